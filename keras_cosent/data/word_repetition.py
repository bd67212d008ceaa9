"""ESimCSE's word repetition: a positive view that differs from its anchor in length.

Unsupervised SimCSE feeds the same token sequence twice, so both views of a
sentence carry the same length through the position embeddings, and the model
learns that sentences of similar length are similar. ESimCSE (Wu et al. 2022,
section 3.1) lengthens the positive view instead: of the `N` tokens of a
sentence, `dup_len` drawn uniformly from `[0, max(2, int(dup_rate * N))]` are
chosen uniformly without replacement and each is written twice in place, so
`x1 x2 x3` may become `x1 x1 x2 x3`. The meaning is unchanged, the length is not.

`word_repetition` does this to one tokenised sequence; `keras_cosent.data.PairBatches`
(`word_repetition=rate`) applies it to the positive column of every batch with a
generator seeded per row and epoch, so a restarted run repeats the same tokens.
"""

import numpy as np

# The ESimCSE paper's dup_rate for BERT-base (its best value, Table 1 / section 5.2).
ESIMCSE_DUP_RATE = 0.32


def check_repetition_rate(rate):
    """`rate` as a float in [0, 1], or a ValueError naming it."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float, np.integer, np.floating)):
        raise ValueError(
            f"`word_repetition` should be a duplication rate in [0, 1]. "
            f"Received: `word_repetition`={rate!r}"
        )
    rate = float(rate)
    if not 0.0 <= rate <= 1.0:
        raise ValueError(
            f"`word_repetition` should be a duplication rate in [0, 1]. "
            f"Received: `word_repetition`={rate!r}"
        )
    return rate


def max_repetitions(num_tokens, rate):
    """The most tokens `word_repetition` duplicates in a sequence of `num_tokens`
    repeatable tokens: `min(N, max(2, int(rate * N)))`, 0 when `rate` is 0.

    Example:

    >>> from keras_cosent.data.word_repetition import max_repetitions
    >>> max_repetitions(10, 0.32), max_repetitions(1, 0.32), max_repetitions(30, 0.32)
    (3, 1, 9)
    """
    num_tokens = int(num_tokens)
    if rate <= 0 or num_tokens <= 0:
        return 0
    # int() of a product such as 0.32 * 25 = 8.000000000000002 must not lose a token
    # to rounding the other way (0.29 * 100 = 28.999999999999996).
    return min(num_tokens, max(2, int(rate * num_tokens + 1e-9)))


def word_repetition(token_ids, rate, rng, num_special=(1, 1), max_length=None):
    """Duplicates a random subset of the tokens of one sequence, each in place.

    Args:
        token_ids: 1-D int array, special tokens included.
        rate: the duplication rate `dup_rate` in [0, 1] (ESimCSE: 0.32).
        rng: a `numpy.random.Generator`; the same state gives the same result.
        num_special: `(leading, trailing)` special tokens that are never
            duplicated (`[CLS]` and `[SEP]`: `(1, 1)`).
        max_length: optional cap on the result's length; fewer tokens are
            duplicated when the drawn number would exceed it.

    Returns:
        A new int32 array of `len(token_ids) + dup_len` tokens, in which each
        duplicated token is followed by its copy.

    Example:

    >>> import numpy as np
    >>> from keras_cosent.data.word_repetition import word_repetition
    >>> ids = np.array([101, 7, 8, 9, 102])
    >>> word_repetition(ids, 1.0, np.random.default_rng(0)).tolist()  # all 3 doubled here
    [101, 7, 7, 8, 8, 9, 9, 102]
    >>> word_repetition(ids, 0.0, np.random.default_rng(0)).tolist()
    [101, 7, 8, 9, 102]
    """
    ids = np.asarray(token_ids, dtype="int32")
    lead, trail = num_special
    num_tokens = max(len(ids) - lead - trail, 0)
    most = max_repetitions(num_tokens, rate)
    # Drawn even when `most` is 0, so the generator advances the same way always.
    dup_len = int(rng.integers(0, most + 1))
    if max_length is not None:
        dup_len = min(dup_len, max(int(max_length) - len(ids), 0))
    if dup_len == 0:
        return ids.copy()
    chosen = lead + rng.choice(num_tokens, size=dup_len, replace=False)
    counts = np.ones(len(ids), dtype="int64")
    counts[chosen] = 2
    return np.repeat(ids, counts)
