"""SpearmanEvaluator on a tiny bag-of-words encoder, against a NumPy/SciPy reference."""

import csv
import types
import zlib

import keras
import numpy as np
import pytest
import scipy.stats
from keras import ops

from keras_cosent.callbacks import SpearmanEvaluator
from keras_cosent.utils import pair_cosine

FEATURES = 32
WORDS = [f"w{i}" for i in range(40)]


def featurize(texts):
    """Hashed bag of words; crc32 rather than hash(), which is salted per process."""
    out = np.zeros((len(texts), FEATURES), dtype="float32")
    for row, text in enumerate(texts):
        for word in text.split():
            out[row, zlib.crc32(word.encode()) % FEATURES] += 1.0
    return out


class BowEncoder(keras.Model):
    """Stand-in for SentenceEncoder: a linear map of hashed bag-of-words features."""

    def __init__(self, dim=8, seed=0, **kwargs):
        super().__init__(**kwargs)
        self.proj = keras.layers.Dense(
            dim, use_bias=False, kernel_initializer=keras.initializers.RandomNormal(seed=seed)
        )
        self.proj.build((None, FEATURES))
        self.encode_calls = []

    def call(self, features):
        if keras.backend.backend() == "jax":
            # The reference multiplies in float64; on a GPU, JAX would multiply float32
            # in TensorFloat-32 (10-bit mantissas), which moved Pearson by 2e-4 on an H200.
            import jax

            with jax.default_matmul_precision("highest"):
                return self.proj(features)
        return self.proj(features)

    def encode(self, texts, batch_size=32):
        self.encode_calls.append(list(texts))
        features = featurize(texts)
        chunks = [
            ops.convert_to_numpy(self(features[i : i + batch_size]))
            for i in range(0, len(texts), batch_size)
        ]
        return np.concatenate(chunks)


class PairModel(keras.Model):
    """Stand-in for SiameseEncoder: (batch, 2, features) -> (batch, 2, dim)."""

    def __init__(self, encoder, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder

    def call(self, x):
        return ops.stack([self.encoder(x[:, 0]), self.encoder(x[:, 1])], axis=1)


def cosine_mse(y_true, y_pred):
    return ops.mean(ops.square(pair_cosine(y_pred) - ops.reshape(y_true, (-1,))))


class WeightRecorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.weights = []

    def on_epoch_end(self, epoch, logs=None):
        self.weights.append([np.array(w) for w in self.model.get_weights()])


def make_pairs(n=120, seed=0):
    """Sentence pairs with duplicated sentences and a word-overlap gold score."""
    rng = np.random.default_rng(seed)
    base = [" ".join(rng.choice(WORDS, size=6, replace=False)) for _ in range(n // 3)]
    pairs, scores = [], []
    for i in range(n):
        first = base[i % len(base)]
        words = first.split()
        changed = int(rng.integers(1, 6))  # never 0: no identical pair, no cosine of exactly 1
        others = [w for w in WORDS if w not in words]
        words = words[: 6 - changed] + list(rng.choice(others, size=changed, replace=False))
        pairs.append((first, " ".join(words)))
        scores.append(5.0 * (6 - changed) / 6)
    return pairs, np.asarray(scores, "float32")


def training_arrays(pairs, scores):
    x = np.stack([featurize([a for a, _ in pairs]), featurize([b for _, b in pairs])], axis=1)
    return x, scores / 5.0


def reference(pairs, scores, kernel):
    """Spearman and Pearson of the cosines, computed independently in float64."""
    a = featurize([p[0] for p in pairs]).astype("float64") @ kernel
    b = featurize([p[1] for p in pairs]).astype("float64") @ kernel
    cosine = (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
    return (
        scipy.stats.spearmanr(scores, cosine).statistic,
        scipy.stats.pearsonr(scores, cosine).statistic,
    )


def compiled_pair_model(learning_rate=0.05, seed=0):
    model = PairModel(BowEncoder(seed=seed))
    model.compile(optimizer=keras.optimizers.SGD(learning_rate), loss=cosine_mse)
    return model


def test_logs_match_scipy_each_epoch_using_model_encoder():
    pairs, scores = make_pairs()
    x, y = training_arrays(pairs, scores)
    model = compiled_pair_model()
    recorder = WeightRecorder()
    evaluator = SpearmanEvaluator(pairs, scores, batch_size=16, verbose=0)
    history = model.fit(x, y, batch_size=32, epochs=3, verbose=0, callbacks=[recorder, evaluator])
    expected = [reference(pairs, scores, w[0]) for w in recorder.weights]
    np.testing.assert_allclose(
        history.history["sts_dev_spearman"], [e[0] for e in expected], rtol=1e-5
    )
    np.testing.assert_allclose(
        history.history["sts_dev_pearson"], [e[1] for e in expected], rtol=1e-5
    )
    assert [h["epoch"] for h in evaluator.history] == [0, 1, 2]
    np.testing.assert_allclose([h["spearman"] for h in evaluator.history], [e[0] for e in expected], rtol=1e-5)
    best = int(np.argmax([e[0] for e in expected]))
    assert evaluator.best_epoch == best
    np.testing.assert_allclose(evaluator.best_score, expected[best][0], rtol=1e-5)
    # One encode per epoch, each distinct sentence exactly once.
    calls = model.encoder.encode_calls
    distinct = {text for pair in pairs for text in pair}
    assert len(calls) == 3
    assert all(len(call) == len(distinct) and set(call) == distinct for call in calls)
    assert len(distinct) < 2 * len(pairs)  # the data does repeat sentences


def test_early_stopping_and_checkpoint_read_the_score(tmp_path):
    pairs, scores = make_pairs()
    x, y = training_arrays(pairs, scores)
    model = compiled_pair_model()
    evaluator = SpearmanEvaluator(pairs, scores, name="dev", verbose=0)
    # With an unreachable min_delta only epoch 0 counts as an improvement, so
    # training stops after epoch 1, but only if EarlyStopping finds
    # "dev_spearman" in the logs; otherwise all 6 epochs run.
    stopper = keras.callbacks.EarlyStopping(
        monitor="dev_spearman", mode="max", patience=1, min_delta=10.0
    )
    checkpoint = keras.callbacks.ModelCheckpoint(
        str(tmp_path / "best.weights.h5"),
        monitor="dev_spearman",
        mode="max",
        save_best_only=True,
        save_weights_only=True,
    )
    history = model.fit(
        x, y, batch_size=32, epochs=6, verbose=0, callbacks=[evaluator, stopper, checkpoint]
    )
    assert history.epoch == [0, 1]
    spearman = history.history["dev_spearman"]
    assert spearman[0] != spearman[1]
    assert stopper.best == spearman[0]
    # mode="max": the checkpoint keeps the larger of the two, as the evaluator does.
    assert checkpoint.best == max(spearman) == evaluator.best_score
    assert (tmp_path / "best.weights.h5").exists()


def test_restore_best_weights_restores_best_epoch():
    pairs, scores = make_pairs()
    x, y = training_arrays(pairs, scores)
    # Training towards the negated scores drives the correlation down, so the
    # best epoch is not the last one and restoring has something to do.
    y = -y
    model = compiled_pair_model(learning_rate=0.5)
    recorder = WeightRecorder()
    evaluator = SpearmanEvaluator(pairs, scores, restore_best_weights=True, verbose=0)
    model.fit(x, y, batch_size=32, epochs=4, verbose=0, callbacks=[recorder, evaluator])
    spearman = [reference(pairs, scores, w[0])[0] for w in recorder.weights]
    best = int(np.argmax(spearman))
    assert evaluator.best_epoch == best
    assert best != 3, "test setup: the last epoch should not be the best"
    final = model.get_weights()
    for got, want in zip(final, recorder.weights[best]):
        np.testing.assert_array_equal(got, want)
    assert not np.array_equal(final[0], recorder.weights[-1][0])


class NanEncoder(BowEncoder):
    """A diverged encoder: every embedding NaN."""

    def encode(self, texts, batch_size=32):
        return np.full((len(texts), 8), np.nan, "float32")


def test_a_nan_first_epoch_is_logged_and_training_goes_on(capsys):
    # NaN never beats -inf, so there was no best epoch and the printout crashed.
    pairs, scores = make_pairs(40)
    x, y = training_arrays(pairs, scores)
    evaluator = SpearmanEvaluator(pairs, scores, encoder=NanEncoder(), verbose=1)
    history = compiled_pair_model().fit(x, y, batch_size=20, epochs=2, verbose=0,
                                        callbacks=[evaluator])
    assert all(np.isnan(history.history["sts_dev_spearman"]))
    assert evaluator.best_epoch is None
    printed = capsys.readouterr().out
    assert printed.count("sts_dev_spearman=nan sts_dev_pearson=nan (no best yet)") == 2


def test_csv_rows_appended_with_one_header(tmp_path):
    pairs, scores = make_pairs(60)
    x, y = training_arrays(pairs, scores)
    path = tmp_path / "sts.csv"
    model = compiled_pair_model()
    evaluator = SpearmanEvaluator(pairs, scores, csv_path=path, verbose=0)
    model.fit(x, y, batch_size=32, epochs=2, verbose=0, callbacks=[evaluator])
    first_fit = list(evaluator.history)
    model.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=[evaluator])
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["epoch", "spearman", "pearson"]
    assert len(rows) == 4
    for row, record in zip(rows[1:], first_fit + evaluator.history):
        assert int(row[0]) == record["epoch"]
        assert float(row[1]) == record["spearman"]
        assert float(row[2]) == record["pearson"]


def test_evaluate_outside_fit_and_from_dataset(capsys):
    pairs, scores = make_pairs(60)
    encoder = BowEncoder(seed=3)
    kernel = np.asarray(encoder.get_weights()[0], "float64")
    dataset = types.SimpleNamespace(
        columns=[[a for a, _ in pairs], [b for _, b in pairs]], labels=scores, source="test"
    )
    evaluator = SpearmanEvaluator.from_dataset(dataset, name="dev", encoder=encoder, batch_size=7)
    result = evaluator.evaluate()
    assert set(result) == {"spearman", "pearson"}
    np.testing.assert_allclose(
        [result["spearman"], result["pearson"]], reference(pairs, scores, kernel), rtol=1e-5
    )
    evaluator.on_epoch_end(0, logs := {})
    assert set(logs) == {"dev_spearman", "dev_pearson"}
    assert "dev_spearman" in capsys.readouterr().out


@pytest.mark.parametrize(
    "pairs, scores, match",
    [
        ([("a", "b"), ("c", "d")], [1.0], "`pairs` and `scores` should have the same length"),
        ([("a", "b"), ("c", "d")], [1.0, float("nan")], "`scores` should be finite.*index 1"),
        ([], [], "`pairs` should be a non-empty sequence"),
        ([("a", "b"), ("c",)], [1.0, 2.0], r"`pairs\[1\]` should be a \(sentence1, sentence2\)"),
        ("ab", [1.0, 2.0], "`pairs` should be a sequence"),
        ([("a", "b"), ("c", "d")], [2.0, 2.0], "`scores` should not all be equal"),
    ],
)
def test_bad_inputs_raise(pairs, scores, match):
    with pytest.raises(ValueError, match=match):
        SpearmanEvaluator(pairs, scores)


def test_bad_arguments_raise():
    pairs, scores = [("a", "b"), ("c", "d")], [1.0, 2.0]
    with pytest.raises(ValueError, match="`batch_size` should be a positive int"):
        SpearmanEvaluator(pairs, scores, batch_size=0)
    assert SpearmanEvaluator(pairs, scores, batch_size=np.int64(8)).batch_size == 8
    # A truthy string turned the copy of the best weights on.
    with pytest.raises(ValueError, match="`restore_best_weights`='no'"):
        SpearmanEvaluator(pairs, scores, restore_best_weights="no")
    with pytest.raises(ValueError, match="`encoder` should have an `encode"):
        SpearmanEvaluator(pairs, scores, encoder=object())
    with pytest.raises(ValueError, match="`labels`=None"):
        SpearmanEvaluator.from_dataset(types.SimpleNamespace(columns=[["a"], ["b"]], labels=None))
    with pytest.raises(ValueError, match="exactly two text columns"):
        SpearmanEvaluator.from_dataset(
            types.SimpleNamespace(columns=[["a"], ["b"], ["c"]], labels=[1.0])
        )


def test_missing_encoder_raises():
    pairs, scores = [("a", "b"), ("c", "d")], [1.0, 2.0]
    evaluator = SpearmanEvaluator(pairs, scores)
    with pytest.raises(ValueError, match="pass `encoder=`"):
        evaluator.evaluate()
    evaluator.set_model(keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]))
    with pytest.raises(ValueError, match="has no `encoder` attribute"):
        evaluator.evaluate()


@pytest.mark.parametrize("kwargs, match", [
    ({"encoder": "all-MiniLM-L6-v2"},
     "`encoder` should be an object with an `encode.*not a string.*'all-MiniLM-L6-v2'"),
    ({"encoder": b"model"}, "not a string"),
    ({"csv_path": "/missing/dir/x.csv"}, "`csv_path` should name a file in an existing "
                                         "directory: there is no directory '/missing/dir'. "
                                         "Received: `csv_path`='/missing/dir/x.csv'"),
    ({"csv_path": 3}, "`csv_path` should be a file path or None. Received: `csv_path`=3"),
    ({"csv_path": ""}, "it is empty"),
])
def test_encoder_and_csv_path_are_checked_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SpearmanEvaluator([("a", "b"), ("c", "d")], [1.0, 2.0], **kwargs)


def test_csv_path_naming_a_directory_is_refused(tmp_path):
    with pytest.raises(ValueError, match="`csv_path` should name a file.*it is a directory"):
        SpearmanEvaluator([("a", "b"), ("c", "d")], [1.0, 2.0], csv_path=tmp_path)
    evaluator = SpearmanEvaluator([("a", "b"), ("c", "d")], [1.0, 2.0],
                                  csv_path=tmp_path / "new.csv")
    assert evaluator.csv_path == str(tmp_path / "new.csv")
