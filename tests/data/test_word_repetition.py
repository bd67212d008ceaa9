"""ESimCSE's word repetition: in-place duplicates only, per-row seeds, the paper's rate on average."""

import numpy as np
import pytest

from keras_cosent.data import PairBatches
from keras_cosent.data import PairDataset
from keras_cosent.data.word_repetition import max_repetitions
from keras_cosent.data.word_repetition import word_repetition

CLS, SEP = 101, 102


def undo_repetition(original, repeated):
    """The positions of `original` that `repeated` duplicates, or an AssertionError.

    `original` has no two equal neighbours (the tests' sequences are distinct
    tokens), so the walk is unambiguous: each token of `repeated` is the next
    token of `original` or a second copy of the one just taken, and each
    original token is copied at most once.
    """
    assert all(a != b for a, b in zip(original, original[1:])), original
    duplicated, j = [], 0
    for i, token in enumerate(original):
        assert j < len(repeated) and repeated[j] == token, (original, repeated)
        j += 1
        if j < len(repeated) and repeated[j] == token:
            duplicated.append(i)
            j += 1
    assert j == len(repeated), (original, repeated)
    return duplicated


def sentence(n, rng):
    # Distinct inner tokens, so that every duplicate is unambiguous.
    return np.array([CLS, *rng.permutation(np.arange(1000, 1000 + n)), SEP], dtype="int32")


@pytest.mark.parametrize("n", [0, 1, 2, 5, 12, 30])
def test_only_in_place_duplicates_of_inner_tokens(n):
    rng = np.random.default_rng(n)
    for trial in range(50):
        ids = sentence(n, rng)
        out = word_repetition(ids, 0.32, np.random.default_rng([n, trial]))
        assert out.dtype == np.int32
        duplicated = undo_repetition(list(ids), list(out))
        assert len(out) == len(ids) + len(duplicated)
        # Never [CLS] or [SEP]; never more than the paper's bound.
        assert all(1 <= i <= n for i in duplicated)
        assert len(duplicated) <= max_repetitions(n, 0.32)
        assert out[0] == CLS and out[-1] == SEP


def test_max_repetitions_is_the_papers_bound():
    for n in range(0, 60):
        for rate in (0.0, 0.1, 0.32, 0.5, 1.0):
            expected = 0 if rate == 0 or n == 0 else min(n, max(2, int(round(rate * n, 9))))
            assert max_repetitions(n, rate) == expected, (n, rate)


def test_deterministic_by_seed_and_varies_with_it():
    ids = sentence(20, np.random.default_rng(0))
    first = word_repetition(ids, 0.32, np.random.default_rng(7))
    again = word_repetition(ids, 0.32, np.random.default_rng(7))
    np.testing.assert_array_equal(first, again)
    outs = {tuple(word_repetition(ids, 0.32, np.random.default_rng(s))) for s in range(30)}
    assert len(outs) > 10


@pytest.mark.parametrize("n", [6, 25])
def test_rate_respected_on_average(n):
    # dup_len is uniform on {0, ..., max(2, int(rate * n))}: its mean is half the bound,
    # and every inner token is equally likely to be chosen.
    rate, trials = 0.32, 4000
    ids = sentence(n, np.random.default_rng(1))
    lengths, chosen = [], np.zeros(n + 2)
    for trial in range(trials):
        out = word_repetition(ids, rate, np.random.default_rng([3, trial]))
        duplicated = undo_repetition(list(ids), list(out))
        lengths.append(len(duplicated))
        chosen[duplicated] += 1
    bound = max_repetitions(n, rate)
    assert set(lengths) == set(range(bound + 1))
    standard_error = np.sqrt(((bound + 1) ** 2 - 1) / 12 / trials)
    assert abs(np.mean(lengths) - bound / 2) < 4 * standard_error
    share = chosen[1:-1] / chosen.sum()
    np.testing.assert_allclose(share, 1.0 / n, atol=4 * np.sqrt(1.0 / n / chosen.sum()) + 0.01)


def test_max_length_caps_the_result():
    ids = sentence(10, np.random.default_rng(0))
    for seed in range(40):
        out = word_repetition(ids, 1.0, np.random.default_rng(seed), max_length=13)
        assert len(out) <= 13
        undo_repetition(list(ids), list(out))


def _tokenize(texts):
    vocab = {}
    return [np.array([CLS] + [1000 + vocab.setdefault(w, len(vocab)) for w in t.split()] + [SEP])
            for t in texts]


def _views(n=12):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(200)]
    sentences = [" ".join(rng.choice(words, size=int(rng.integers(3, 15)), replace=False))
                 for _ in range(n)]
    return PairDataset([sentences, list(sentences)], None, "views")


@pytest.mark.parametrize("packing", [False, True])
def test_pair_batches_repeat_the_positive_column_only(packing):
    dataset = _views()
    plain = PairBatches(dataset, _tokenize, batch_size=4, seed=3, label_mode="group",
                        pad_to_multiple_of=1, packing=packing)
    repeated = PairBatches(dataset, _tokenize, batch_size=4, seed=3, label_mode="group",
                           pad_to_multiple_of=1, packing=packing, word_repetition=0.5)
    tokens = _tokenize(dataset.columns[0])
    index = {tuple(t): i for i, t in enumerate(tokens)}
    # The same batches of rows; their order may differ, as the swap that keeps
    # TensorFlow's first two batch lengths apart sees the repeated lengths.
    assert sorted(map(tuple, repeated._batches)) == sorted(map(tuple, plain._batches))
    differ = 0
    for b in range(len(repeated)):
        rows = repeated._batches[b]
        sequences = repeated._batch_sequences(rows)
        for r in range(len(rows)):
            anchor, positive = sequences[2 * r], sequences[2 * r + 1]
            original = tokens[index[tuple(anchor)]]
            np.testing.assert_array_equal(anchor, original)
            undo_repetition(list(original), list(positive))
            differ += len(positive) != len(anchor)
        x, _ = repeated[b]
        if packing:
            assert x["token_ids"].shape[1] == repeated.row_length
            assert max(len(s) for s in sequences) <= repeated.row_length
        else:
            assert x["token_ids"].shape[2] == max(len(s) for s in sequences)
    assert differ > 0


def test_pair_batches_refuse_repetition_without_a_positive_column():
    sentences = _views().columns[0]
    one_column = PairDataset([sentences], np.zeros(len(sentences)), "texts.txt")
    with pytest.raises(ValueError, match="'texts.txt' has 1 column; it needs at least 2"):
        PairBatches(one_column, _tokenize, batch_size=4, word_repetition=0.32)


def test_pair_batches_repetition_is_seeded_per_row_and_epoch():
    dataset = _views(16)

    def make(seed):
        return PairBatches(dataset, _tokenize, batch_size=4, seed=seed, label_mode="group",
                           pad_to_multiple_of=1, word_repetition=0.5)

    one, two = make(5), make(5)
    for b in range(len(one)):
        for key in ("token_ids", "padding_mask"):
            np.testing.assert_array_equal(one[b][0][key], two[b][0][key])

    def positives(batches):
        out = {}
        for b in range(len(batches)):
            rows = batches._batches[b]
            sequences = batches._batch_sequences(rows)
            out.update({int(r): tuple(sequences[2 * i + 1]) for i, r in enumerate(rows)})
        return out

    epoch0 = positives(one)
    one.set_epoch(1)
    epoch1 = positives(one)
    # Same row, same epoch, same seed: the same repetition whatever batch it is in.
    two.set_epoch(1)
    assert positives(two) == epoch1
    assert epoch0 != epoch1
    assert positives(make(6)) != epoch0


def test_pair_batches_reject_a_bad_rate():
    with pytest.raises(ValueError, match="word_repetition"):
        PairBatches(_views(), _tokenize, batch_size=4, label_mode="group", word_repetition=1.5)
