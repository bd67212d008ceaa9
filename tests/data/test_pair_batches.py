"""Tests for PairBatches: coverage per epoch, shuffling, padding, group ids, unique texts, fit."""

import warnings

import keras
import numpy as np
import pytest
from keras import ops

from keras_cosent.data import PairBatches
from keras_cosent.data import PairDataset
from keras_cosent.utils import pair_cosine

CLS, SEP = 101, 102
_VOCAB = {}


def tokenize(texts):
    """Whitespace tokeniser: [CLS] + one id per distinct word (from 1000) + [SEP]."""
    return [
        np.array([CLS] + [1000 + _VOCAB.setdefault(w, len(_VOCAB)) for w in t.split()] + [SEP])
        for t in texts
    ]


def detokenize(ids, mask):
    words = {i + 1000: w for w, i in _VOCAB.items()}
    return " ".join(words[i] for i in ids[mask][1:-1].tolist())


def counting_tokenize(calls):
    def fn(texts):
        calls.extend(texts)
        return tokenize(texts)
    return fn


def make_dataset(n=50, seed=0, with_labels=True):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(30)]
    first = [" ".join(rng.choice(words, rng.integers(1, 20))) + f" r{i}" for i in range(n)]
    second = [" ".join(rng.choice(words, rng.integers(1, 12))) + f" s{i}" for i in range(n)]
    # Labels are the row ids, so y tells which rows a batch holds.
    labels = np.arange(n, dtype="float32") if with_labels else None
    return PairDataset([first, second], labels, "synthetic")


def epoch_rows(batches):
    return [batches[i][1].astype(int).tolist() for i in range(len(batches))]


def test_every_pair_once_per_epoch_with_correct_tokens():
    ds = make_dataset(50)
    batches = PairBatches(ds, tokenize, batch_size=8, seed=3)
    assert len(batches) == 7
    for _ in range(3):
        seen = []
        for i in range(len(batches)):
            x, y = batches[i]
            assert y.dtype == np.float32
            for row_in_batch, row in enumerate(y.astype(int)):
                for c in range(2):
                    expected = tokenize([ds.columns[c][row]])[0]
                    mask = x["padding_mask"][row_in_batch, c]
                    np.testing.assert_array_equal(x["token_ids"][row_in_batch, c][mask], expected)
            seen.extend(y.astype(int).tolist())
        assert sorted(seen) == list(range(50))
        batches.on_epoch_end()


def test_tokenises_each_distinct_text_once():
    calls = []
    ds = PairDataset([["a b", "c", "a b"], ["c", "d", "d"]], np.zeros(3), "dup")
    batches = PairBatches(ds, counting_tokenize(calls), batch_size=2, seed=0)
    for _ in range(2):
        for i in range(len(batches)):
            batches[i]
        batches.on_epoch_end()
    assert sorted(calls) == ["a b", "c", "d"]


def test_shuffle_differs_across_epochs_and_is_seeded():
    ds = make_dataset(40)
    a = PairBatches(ds, tokenize, batch_size=8, seed=7)
    b = PairBatches(ds, tokenize, batch_size=8, seed=7)
    other = PairBatches(ds, tokenize, batch_size=8, seed=8)
    epochs_a, epochs_b = [], []
    for _ in range(3):
        epochs_a.append(epoch_rows(a))
        epochs_b.append(epoch_rows(b))
        a.on_epoch_end()
        b.on_epoch_end()
    assert epochs_a == epochs_b
    assert epochs_a[0] != epochs_a[1] != epochs_a[2]
    assert epoch_rows(other) != epochs_a[0]
    fixed = PairBatches(ds, tokenize, batch_size=8, shuffle=False)
    assert sum(epoch_rows(fixed), []) == list(range(40))
    fixed.on_epoch_end()
    assert sum(epoch_rows(fixed), []) == list(range(40))


def test_seed_none_follows_global_numpy_seed():
    ds = make_dataset(30)
    np.random.seed(5)
    first = epoch_rows(PairBatches(ds, tokenize, batch_size=4))
    np.random.seed(5)
    assert epoch_rows(PairBatches(ds, tokenize, batch_size=4)) == first
    np.random.seed(6)
    assert epoch_rows(PairBatches(ds, tokenize, batch_size=4)) != first


@pytest.mark.parametrize("multiple,max_length", [(8, None), (1, None), (5, None), (8, 30)])
def test_padding_layout(multiple, max_length):
    ds = make_dataset(40)
    batches = PairBatches(ds, tokenize, batch_size=6, seed=1,
                          pad_to_multiple_of=multiple, max_length=max_length)
    for i in range(len(batches)):
        x, y = batches[i]
        rows = y.astype(int)
        lengths = np.array([[len(ds.columns[c][r].split()) + 2 for c in range(2)] for r in rows])
        longest = lengths.max()
        expected = int(np.ceil(longest / multiple) * multiple)
        if max_length is not None:
            expected = min(expected, max_length)
        assert x["token_ids"].shape == (len(rows), 2, expected)
        assert x["token_ids"].dtype == np.int32 and x["segment_ids"].dtype == np.int32
        assert x["padding_mask"].dtype == bool
        np.testing.assert_array_equal(x["padding_mask"].sum(-1), lengths)
        np.testing.assert_array_equal(
            x["padding_mask"], np.arange(expected)[None, None, :] < lengths[..., None]
        )
        assert (x["token_ids"][~x["padding_mask"]] == 0).all()
        assert (x["token_ids"][..., 0] == CLS).all()
        assert (x["segment_ids"] == 0).all()


def test_default_padding_depends_on_whether_the_backend_compiles():
    # Longest row: "a b c" = 5 tokens. JAX/TensorFlow compile per shape and round
    # up to 8; eager PyTorch pads to the exact longest (rounding is wasted work).
    ds = PairDataset([["a b c", "d"], ["e", "f g"]], np.array([1.0, 2.0]), "t")
    x, _ = PairBatches(ds, tokenize, batch_size=2, shuffle=False)[0]
    expected = 5 if keras.backend.backend() == "torch" else 8
    assert x["token_ids"].shape == (2, 2, expected)
    np.testing.assert_array_equal(x["padding_mask"].sum(-1), [[5, 3], [3, 4]])


def test_pad_id_and_three_columns():
    ds = PairDataset([["a b c", "d"], ["e", "f g"], ["h", "i"]], np.array([1.0, 2.0]), "t")
    x, _ = PairBatches(ds, tokenize, batch_size=2, pad_id=-1, shuffle=False,
                       pad_to_multiple_of=8)[0]
    assert x["token_ids"].shape == (2, 3, 8)
    assert (x["token_ids"][~x["padding_mask"]] == -1).all()


def test_group_ids_mark_identical_positives():
    positives = ["p0", "p1", "p0", "p2", "p1", "p0", "p3", "p4"]
    anchors = [f"a{i}" for i in range(8)]
    ds = PairDataset([anchors, positives], None, "g")
    batches = PairBatches(ds, tokenize, batch_size=8, label_mode="group", seed=0)
    x, y = batches[0]
    assert y.dtype == np.int32
    hashes = x["token_ids"][:, 1, 1]  # the single word of each positive
    for i in range(8):
        for j in range(8):
            assert (y[i] == y[j]) == (hashes[i] == hashes[j])
    assert len(set(y.tolist())) == 5


def test_unique_texts_property_holds():
    rng = np.random.default_rng(0)
    # Anchors repeat (one premise, several hypotheses) and positives repeat.
    anchors = [f"premise {i // 3}" for i in range(90)]
    positives = [f"hyp {rng.integers(0, 120)}" for _ in range(90)]
    negatives = [f"neg {i}" for i in range(90)]
    ds = PairDataset([anchors, positives, negatives], None, "nli")
    batches = PairBatches(ds, tokenize, batch_size=16, label_mode="group",
                          unique_texts=True, seed=2)
    assert len(batches) == 6
    for _ in range(3):
        seen = []
        for i in range(len(batches)):
            x, y = batches[i]
            rows = [[detokenize(t, m) for t, m in zip(x["token_ids"][r], x["padding_mask"][r])]
                    for r in range(len(y))]
            texts = [text for row in rows for text in row]
            assert len(texts) == len(set(texts)), f"batch {i} repeats a text"
            assert len(rows) <= 16
            seen.extend(int(row[2].split()[1]) for row in rows)  # "neg <row>"
        assert sorted(seen) == list(range(90))
        assert batches.stats["dropped"] == 0 and batches.stats["conflicts"] == 0
        batches.on_epoch_end()
        assert len(batches) == 6


def test_unique_texts_impossible_warns_and_keeps_rows():
    # "same" occurs in 5 rows but there are only 2 batches: it cannot be unique.
    ds = PairDataset([[f"a{i}" for i in range(8)], ["same"] * 5 + ["b", "c", "d"]], None, "u")
    with pytest.warns(UserWarning, match="share a text"):
        batches = PairBatches(ds, tokenize, batch_size=4, label_mode="group",
                              unique_texts=True, seed=0)
    rows = sorted(np.concatenate(batches._batches).tolist())
    assert rows == list(range(8))
    # The next epoch is planned at the end of this one, even after the last
    # epoch: its warning waits until one of its batches is served.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batches.on_epoch_end()
    with pytest.warns(UserWarning, match="epoch 1: .* share a text"):
        batches[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batches[1]  # once per epoch
        # Planned again, as `fit` (epoch 1 before the first epoch) and then
        # `ServeEpochBatches` (epoch 0 anew) do: the same plan is not warned of twice.
        batches.set_epoch(0)
        batches[0]
        batches.set_epoch(1)
        batches[0]
    batches.set_epoch(2)
    with pytest.warns(UserWarning, match="epoch 2: .* share a text"):
        batches[0]


def test_unique_texts_allows_same_text_within_a_row():
    texts = [f"s {i}" for i in range(12)]
    ds = PairDataset([texts, list(texts)], None, "simcse")
    batches = PairBatches(ds, tokenize, batch_size=4, label_mode="group", unique_texts=True)
    assert [len(batches[i][1]) for i in range(3)] == [4, 4, 4]
    assert batches.stats["deferred"] == 0


def test_drop_remainder():
    ds = make_dataset(30)
    batches = PairBatches(ds, tokenize, batch_size=8, drop_remainder=True, seed=0)
    assert len(batches) == 3
    seen = sum(epoch_rows(batches), [])
    assert all(len(batches[i][1]) == 8 for i in range(3))
    assert len(set(seen)) == 24 and batches.stats["dropped"] == 6
    unique = PairBatches(ds, tokenize, batch_size=8, drop_remainder=True, seed=0,
                         label_mode="group", unique_texts=True)
    assert len(unique) == 3 and unique.stats["dropped"] == 6
    # It says why it is set: `build` sets it for several devices, not the user.
    with pytest.raises(ValueError, match=r"has 5 rows, fewer than `batch_size`=8, so "
                                         r"drop_remainder=True leaves no batch \(`build` sets "
                                         r"it to train on several devices"):
        PairBatches(make_dataset(5), tokenize, batch_size=8, drop_remainder=True)


@pytest.mark.filterwarnings("ignore:PairBatches.unique_texts=True.:UserWarning")
def test_drop_remainder_with_unique_texts_keeps_batches_full():
    # Many anchors share a positive (FAQ-style): rows the first-fit could not
    # place were dropped, leaving short batches mid-epoch that a sharded step
    # refused ("do not divide over 2 ranks") and the docs promised never happen.
    for num_rows, shared in ((8, 3), (66, 12)):
        anchors = [f"question {i}" for i in range(num_rows)]
        positives = ["answer A"] * shared + [f"answer {i}" for i in range(num_rows - shared)]
        ds = PairDataset([anchors, positives], None, "faq")
        batches = PairBatches(ds, tokenize, batch_size=4, seed=0, label_mode="group",
                              unique_texts=True, drop_remainder=True)
        for epoch in range(3):
            batches.set_epoch(epoch)
            # y holds group ids here, so the rows come from the epoch's plan.
            rows = [plan.tolist() for plan in batches._batches]
            assert [len(batches[i][1]) for i in range(len(batches))] == [4] * (num_rows // 4)
            assert len(set(sum(rows, []))) == num_rows // 4 * 4
            assert batches.stats["dropped"] == num_rows % 4
            # A clash only where the shared positive outnumbers the batches.
            clashes = sum(max(0, [positives[i] for i in r].count("answer A") - 1)
                          for r in rows)
            assert batches.stats["conflicts"] == clashes
            assert clashes == max(0, shared - num_rows // 4)


def test_bucketing_does_not_choose_the_long_rows_to_drop():
    # 60 rows in chunks of 32 and 28: sorting the last chunk before cutting the
    # remainder dropped its 4 longest rows every epoch.
    ds = make_dataset(60)
    batches = PairBatches(ds, tokenize, batch_size=8, drop_remainder=True, seed=0,
                          length_buckets=4)
    lengths = batches._row_lengths
    dropped = []
    for _ in range(200):
        kept = set(sum(epoch_rows(batches), []))
        dropped.extend(set(range(60)) - kept)
        batches.on_epoch_end()
    assert len(dropped) == 200 * 4
    # Mean length of the dropped rows: the rows' mean, within 4 standard errors.
    assert abs(lengths[dropped].mean() - lengths.mean()) < 4 * lengths.std() / np.sqrt(800)


def test_length_bucketing_reduces_padding_and_keeps_rows():
    ds = make_dataset(256)
    plain = PairBatches(ds, tokenize, batch_size=8, seed=0, pad_to_multiple_of=1)
    bucketed = PairBatches(ds, tokenize, batch_size=8, seed=0, pad_to_multiple_of=1,
                           length_buckets=16)
    assert sorted(sum(epoch_rows(bucketed), [])) == list(range(256))
    assert bucketed.padding_ratio < plain.padding_ratio
    bucketed.on_epoch_end()
    assert sorted(sum(epoch_rows(bucketed), [])) == list(range(256))


def test_padding_ratio_matches_batches():
    ds = make_dataset(37)
    batches = PairBatches(ds, tokenize, batch_size=8, seed=4, length_buckets=2)
    real = total = 0
    for i in range(len(batches)):
        x, _ = batches[i]
        real += x["padding_mask"].sum()
        total += x["padding_mask"].size
    assert batches.num_tokens == real
    assert batches.padding_ratio == pytest.approx(1 - real / total)


@pytest.mark.parametrize("kwargs,match", [
    (dict(batch_size=1, label_mode="group"), "`batch_size`"),
    (dict(batch_size=0), "`batch_size`"),
    (dict(batch_size=2.0), "`batch_size`"),
    (dict(batch_size=4, label_mode="rank"), "`label_mode`"),
    (dict(batch_size=4, length_buckets=-1), "`length_buckets`"),
    (dict(batch_size=4, pad_to_multiple_of=0), "`pad_to_multiple_of`"),
    (dict(batch_size=4, max_length=0), "`max_length`"),
    (dict(batch_size=4, max_length=3), "more than `max_length`=3"),
])
def test_bad_args(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PairBatches(make_dataset(10), tokenize, **kwargs)


def test_bad_inputs():
    with pytest.raises(ValueError, match="label_mode='score' needs labels"):
        PairBatches(make_dataset(10, with_labels=False), tokenize, batch_size=4)
    with pytest.raises(TypeError, match="PairDataset"):
        PairBatches([("a", "b")], tokenize, batch_size=4)
    with pytest.raises(ValueError, match="returned 1 sequences for 2 texts"):
        PairBatches(PairDataset([["a"], ["b"]], np.zeros(1)), lambda t: tokenize(t)[:1], 4)
    with pytest.raises(ValueError, match="non-empty"):
        PairBatches(PairDataset([["a"], ["b"]], np.zeros(1)), lambda t: [[]] * len(t), 4)
    with pytest.raises(IndexError):
        PairBatches(make_dataset(10), tokenize, batch_size=4)[3]


def test_class_mode_gives_int32_class_ids_and_refuses_fractions():
    texts = PairDataset([["a", "b", "c", "d"]], np.array([2.0, 0.0, 2.0, 1.0]), "topics")
    _, y = PairBatches(texts, tokenize, batch_size=4, label_mode="class", shuffle=False)[0]
    assert y.dtype == np.int32 and y.tolist() == [2, 0, 2, 1]
    fractional = PairDataset([["a", "b", "c"]], np.array([0.0, 1.5, 1.0]), "frac")
    with pytest.raises(ValueError, match=r"'frac'\) has label 1.5 in row 1"):
        PairBatches(fractional, tokenize, batch_size=2, label_mode="class")
    negative = PairDataset([["a", "b"]], np.array([0, -1]), "neg")  # no class -1
    with pytest.raises(ValueError, match=r"integers >= 0, but `dataset` \('neg'\) has label "
                                         r"-1 in row 1"):
        PairBatches(negative, tokenize, batch_size=2, label_mode="class")


class MeanEmbeddingModel(keras.Model):
    """Embedding + masked mean over tokens on (batch, columns, length) inputs."""

    def __init__(self):
        super().__init__()
        self.embedding = keras.layers.Embedding(2000, 8)

    def call(self, x):
        vectors = self.embedding(x["token_ids"])
        mask = ops.cast(x["padding_mask"], "float32")[..., None]
        return ops.sum(vectors * mask, axis=2) / ops.sum(mask, axis=2)


def test_feeds_model_fit():
    ds = make_dataset(64)
    ds.labels = (ds.labels % 2).astype("float32")  # targets in {0, 1} for a cosine
    batches = PairBatches(ds, tokenize, batch_size=16, seed=0)
    model = MeanEmbeddingModel()
    model.compile(optimizer=keras.optimizers.Adam(0.05),
                  loss=lambda y, p: ops.mean(ops.square(y - pair_cosine(p))))
    history = model.fit(batches, epochs=3, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    assert batches._epoch >= 3  # fit reshuffled after every epoch


def _short_then_long_dataset():
    # 32 short rows then 8 long ones: unshuffled, batches 0 and 1 pad to 8
    # tokens and batch 2 to 24, the layout that made TensorFlow fix the length.
    short = [f"w{i} x{i}" for i in range(32)]
    long = [" ".join(f"l{i}_{k}" for k in range(20)) for i in range(8)]
    texts = short + long
    labels = np.array([i % 2 for i in range(40)], "float32")
    return PairDataset(columns=[texts, [t + " y" for t in texts]], labels=labels, source="lengths")


def test_first_two_batches_differ_in_length_when_the_epoch_has_several():
    batches = PairBatches(_short_then_long_dataset(), tokenize, batch_size=16, shuffle=False)
    lengths = [batches[i][0]["token_ids"].shape[-1] for i in range(len(batches))]
    assert len(set(lengths)) > 1
    assert lengths[0] != lengths[1]
    assert sorted(np.concatenate(batches._batches).tolist()) == list(range(40))


def test_the_batch_order_does_not_depend_on_the_padding_multiple():
    # PyTorch pads to the longest row, JAX and TensorFlow to a multiple of 8: the
    # swap that keeps TensorFlow's first two lengths apart compared lengths as each
    # pads, so the same seed trained PyTorch in another batch order.
    rng = np.random.default_rng(0)
    texts = [" ".join(f"w{i}_{k}" for k in range(int(n))) for i, n in
             enumerate(rng.integers(1, 12, size=96))]
    ds = PairDataset([texts, texts[::-1]], np.zeros(96, "float32"), "mixed lengths")
    plans = {multiple: PairBatches(ds, tokenize, batch_size=8, seed=3, pad_to_multiple_of=multiple)
             for multiple in (1, 8)}
    for epoch in range(12):
        exact, rounded = (plans[m]._plan_epoch(epoch) for m in (1, 8))
        assert [b.tolist() for b in exact] == [b.tolist() for b in rounded]
        # And TensorFlow's first two batches still pad to different lengths.
        lengths = [plans[8]._batch_length(b) for b in rounded]
        assert lengths[0] != lengths[1] or len(set(lengths)) == 1


def test_fit_accepts_a_longer_batch_after_two_equal_ones():
    # Keras infers a PyDataset's TensorFlow signature from its first two batches.
    batches = PairBatches(_short_then_long_dataset(), tokenize, batch_size=8, shuffle=False)
    model = MeanEmbeddingModel()
    model.compile(optimizer=keras.optimizers.Adam(0.05),
                  loss=lambda y, p: ops.mean(ops.square(y - pair_cosine(p))))
    history = model.fit(batches, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


@pytest.mark.parametrize("module_name", ["keras_cosent.data.padding",
                                         "keras_cosent.data.pair_batches"])
def test_docstring_examples_run(module_name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module_name), verbose=False)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"shuffle": "no"}, r"`shuffle` should be a bool. Received: `shuffle`='no'"),
    ({"shuffle": 0}, r"`shuffle`=0"),
    ({"seed": -1}, r"`seed` should be None or an int in \[0, 2\*\*32\). Received: `seed`=-1"),
    ({"seed": 1.5}, r"`seed`=1.5"),
])
def test_shuffle_and_seed_are_checked(kwargs, message):
    ds = PairDataset([["a", "b"], ["c", "d"]], np.zeros(2), "t")
    with pytest.raises(ValueError, match=message):
        PairBatches(ds, tokenize, batch_size=2, **kwargs)


@pytest.mark.parametrize("kwargs", [{"workers": 2},
                                    {"workers": 1, "use_multiprocessing": True}])
def test_background_workers_are_refused(kwargs):
    # Keras' workers fetch ahead across an epoch's end, before on_epoch_end plans
    # the next epoch: on PyTorch an epoch's batches came out of the plan's order.
    with pytest.raises(ValueError, match=r"PairBatches serves each epoch's batches in the order "
                                         r"planned .* Received: `workers`="):
        PairBatches(make_dataset(), tokenize, batch_size=8, **kwargs)
    in_order = PairBatches(make_dataset(), tokenize, batch_size=8, workers=1, max_queue_size=4)
    assert in_order.workers == 1
