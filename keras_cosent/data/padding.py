"""Turns tokenised sentences into one padded batch, padded to the batch's own length.

Padding to the longest sequence in the batch rather than to a global maximum is
what keeps CPU training fast. On JAX and TensorFlow the length is rounded up to a
multiple of 8, so that compiled functions see few distinct shapes; PyTorch runs
eagerly, so there every rounded-up token would be wasted work and the default is
the batch's exact length (see `default_pad_to_multiple_of`). The training batches,
`SentenceEncoder.preprocess` and `encode(packing=False)` all go through `pad_batch`,
so they can never disagree on layout; `encode`'s default on BERT packs sentences
into rows instead (`keras_cosent.data.packing`), whose row length is a
`padded_length` too.
"""

import keras
import numpy as np

from keras_cosent.utils.arguments import check_positive_int


def default_pad_to_multiple_of():
    """The padding multiple used when none is given: 1 on PyTorch, 8 elsewhere.

    JAX and TensorFlow (with XLA) compile the train step and the predict
    function once per input shape, so rounding lengths up to a multiple of 8
    bounds the compilations (at most 8 for 64 tokens). PyTorch runs eagerly and
    compiles nothing, so padding beyond the batch's longest sequence only adds
    work: about 10% of encoding time on the STS-B test set (BENCHMARKS.md).

    Example:

    >>> import keras
    >>> from keras_cosent.data.padding import default_pad_to_multiple_of
    >>> default_pad_to_multiple_of() == (1 if keras.backend.backend() == "torch" else 8)
    True
    """
    return 1 if keras.backend.backend() == "torch" else 8


def padded_length(longest, pad_to_multiple_of=None, max_length=None):
    """The length `pad_batch` pads a batch whose longest sequence is `longest` to.

    Exposed so that callers can count padding (e.g. `PairBatches.padding_ratio`)
    without building the arrays, and can never disagree with `pad_batch`.
    `pad_to_multiple_of=None` means `default_pad_to_multiple_of()`.
    """
    if pad_to_multiple_of is None:
        pad_to_multiple_of = default_pad_to_multiple_of()
    multiple = check_positive_int("pad_to_multiple_of", pad_to_multiple_of)
    length = -(-max(int(longest), 1) // multiple) * multiple
    if max_length is not None:
        length = min(length, max_length)
    return length


def pad_batch(token_id_lists, pad_id=0, pad_to_multiple_of=None, max_length=None):
    """Pads a list of token-id sequences into BERT-style input arrays.

    Args:
        token_id_lists: list of 1-D integer sequences (special tokens included).
        pad_id: id written into padded positions.
        pad_to_multiple_of: round the padded length up to a multiple of this
            (1 disables rounding); never beyond `max_length` when it is set.
            None: `default_pad_to_multiple_of()` (8 on JAX/TensorFlow, 1 on
            PyTorch).
        max_length: optional cap; longer sequences raise, since truncation is
            the tokeniser's job.

    Returns:
        A dict of numpy arrays of shape `(batch, length)`: `token_ids` (int32),
        `padding_mask` (bool), `segment_ids` (int32, zeros).

    Example:

    >>> from keras_cosent.data.padding import pad_batch
    >>> out = pad_batch([[101, 7, 102], [101, 102]], pad_to_multiple_of=4)
    >>> out["token_ids"].tolist()
    [[101, 7, 102, 0], [101, 102, 0, 0]]
    """
    if len(token_id_lists) == 0:
        raise ValueError("`token_id_lists` is empty: cannot pad an empty batch.")
    lengths = [len(ids) for ids in token_id_lists]
    longest = max(lengths)
    if max_length is not None and longest > max_length:
        raise ValueError(
            f"A sequence of {longest} tokens exceeds `max_length`={max_length}; "
            "truncate while tokenising."
        )
    length = padded_length(longest, pad_to_multiple_of, max_length)
    token_ids = np.full((len(token_id_lists), length), pad_id, dtype="int32")
    for row, ids in enumerate(token_id_lists):
        token_ids[row, : len(ids)] = ids
    positions = np.arange(length)[None, :]
    padding_mask = positions < np.asarray(lengths)[:, None]
    return {
        "token_ids": token_ids,
        "padding_mask": padding_mask,
        "segment_ids": np.zeros_like(token_ids),
    }
