"""SpearmanCorrelation and spearman_correlation against scipy.stats.spearmanr."""

import doctest
import importlib

import keras
import numpy as np
import pytest
import scipy.stats

from keras_cosent.metrics import SpearmanCorrelation
from keras_cosent.metrics import spearman_correlation
from tests import kit
from tests.metrics.correlation_helpers import JIT_COMPILE
from tests.metrics.correlation_helpers import noisy_pair_embeddings
from tests.metrics.correlation_helpers import numpy_pair_cosine
from tests.metrics.correlation_helpers import pass_through_model

RTOL = 1e-5


def scipy_spearman(x, y):
    return scipy.stats.spearmanr(np.asarray(x, "float64"), np.asarray(y, "float64")).statistic


def correlated(n, seed, ties=False):
    rng = np.random.default_rng(seed)
    if ties:
        # Chinese STS-B style: integer gold labels 0-5, predictions on a coarse grid.
        y = rng.integers(0, 6, size=n).astype("float32")
        p = np.round(y / 5 + rng.normal(0, 0.3, size=n), 1).astype("float32")
    else:
        y = rng.uniform(0, 5, size=n).astype("float32")
        p = (y / 5 + rng.normal(0, 0.3, size=n)).astype("float32")
    return y, p


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("n", [2, 7, 1000, 40000])
def test_function_matches_scipy(n, ties):
    y, p = correlated(n, seed=n, ties=ties)
    if n == 2:
        p = np.array([0.1, 0.7], "float32")  # keep both sides non-constant
    expected = scipy_spearman(y, p)
    got = float(spearman_correlation(y, p))
    np.testing.assert_allclose(got, expected, rtol=RTOL)


def test_function_mask_drops_rows():
    y, p = correlated(500, seed=1, ties=True)
    mask = np.random.default_rng(2).random(500) > 0.3
    # Values under the mask are extreme: they would change every rank if used.
    p_polluted = np.where(mask, p, -1e6).astype("float32")
    got = float(spearman_correlation(y, p_polluted, mask=mask))
    np.testing.assert_allclose(got, scipy_spearman(y[mask], p[mask]), rtol=RTOL)



@pytest.mark.parametrize("side, bad", [("x", np.nan), ("y", np.nan), ("y", np.inf),
                                       ("x", -np.inf)])
def test_a_non_finite_counted_value_gives_nan_as_scipy_does(side, bad):
    # A diverged model's NaN cosines used to come out as a finite rho (1.0 on a
    # sorted gold vector), which EarlyStopping or keep-best could take as a score.
    y, p = correlated(50, seed=3)
    x, z = (y.copy(), p) if side == "x" else (y, p.copy())
    (x if side == "x" else z)[7] = bad
    if not np.isinf(bad):
        assert np.isnan(scipy_spearman(x, z))
    assert np.isnan(float(spearman_correlation(x, z)))
    # Outside the mask it is left out like any other value.
    mask = np.arange(50) != 7
    np.testing.assert_allclose(float(spearman_correlation(x, z, mask=mask)),
                               scipy_spearman(x[mask], z[mask]), rtol=RTOL)


def test_the_metric_reports_nan_for_nan_predictions():
    gold = np.sort(np.array([3, 1, 4, 1.5, 5, 2, 0.5, 4.5], "float32"))
    metric = SpearmanCorrelation(capacity=16)
    metric.update_state(gold, np.full(8, np.nan, "float32"))
    assert np.isnan(float(metric.result()))
    metric.reset_state()
    metric.update_state(gold, gold * 0.1)
    assert float(metric.result()) == pytest.approx(1.0)

def test_function_degenerate_inputs_give_zero():
    assert float(spearman_correlation([1.0, 1.0, 1.0], [0.1, 0.2, 0.3])) == 0.0
    assert float(spearman_correlation([1.0], [0.5])) == 0.0
    assert float(spearman_correlation([], [])) == 0.0


def test_evaluate_matches_scipy_on_stsb_dev(stsb_dev_scores):
    scores = stsb_dev_scores
    emb = noisy_pair_embeddings(scores, seed=3)
    expected = scipy_spearman(scores, numpy_pair_cosine(emb))
    assert 0.3 < expected < 0.95  # a realistic, non-trivial correlation
    # Default capacity; 1500 rows in batches of 128: the last one has 92 rows.
    model = pass_through_model((2, 8), [SpearmanCorrelation()])
    logs = model.evaluate(emb, scores, batch_size=128, verbose=0, return_dict=True)
    np.testing.assert_allclose(logs["spearman"], expected, rtol=RTOL)


def test_evaluate_heavy_ties_uneven_batches():
    y, p = correlated(333, seed=4, ties=True)
    model = pass_through_model((1,), [SpearmanCorrelation(capacity=512)])
    logs = model.evaluate(p[:, None], y, batch_size=50, verbose=0, return_dict=True)
    np.testing.assert_allclose(logs["spearman"], scipy_spearman(y, p), rtol=RTOL)


def test_evaluate_differs_from_per_batch_average():
    # Averaging per-batch values (what keras.metrics.PearsonCorrelation does for
    # Pearson) is not the corpus value; the metric must give the corpus value.
    y, p = correlated(400, seed=5)
    model = pass_through_model((1,), [SpearmanCorrelation(capacity=400)])
    logs = model.evaluate(p[:, None], y, batch_size=16, verbose=0, return_dict=True)
    per_batch = np.mean(
        [scipy_spearman(y[i : i + 16], p[i : i + 16]) for i in range(0, 400, 16)]
    )
    corpus = scipy_spearman(y, p)
    assert abs(per_batch - corpus) > 1e-3
    np.testing.assert_allclose(logs["spearman"], corpus, rtol=RTOL)


def test_sample_weight_masks_rows():
    y, p = correlated(300, seed=6, ties=True)
    weight = (np.random.default_rng(7).random(300) > 0.25).astype("float32")
    # Capacity below 300: masked rows must not take space in the buffer. Keras
    # passes sample_weight only to `weighted_metrics`.
    metric = SpearmanCorrelation(capacity=int(weight.sum()))
    model = pass_through_model((1,), weighted_metrics=[metric])
    logs = model.evaluate(
        p[:, None], y, sample_weight=weight, batch_size=64, verbose=0, return_dict=True
    )
    keep = weight > 0
    np.testing.assert_allclose(logs["spearman"], scipy_spearman(y[keep], p[keep]), rtol=RTOL)


def test_fit_step_reports_corpus_value():
    # With a zero learning rate the predictions stay fixed through the epoch, so
    # the training metric (computed inside the compiled train step) is checkable.
    rng = np.random.default_rng(8)
    x = rng.normal(size=(200, 4)).astype("float32")
    y = (x[:, 0] + rng.normal(0, 0.5, size=200)).astype("float32")
    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.0),
        loss="mse",
        jit_compile=JIT_COMPILE,
        metrics=[SpearmanCorrelation(capacity=256)],
    )
    history = model.fit(x, y, batch_size=48, epochs=2, verbose=0)
    p = model.predict(x, verbose=0)[:, 0]
    expected = scipy_spearman(y, p)
    np.testing.assert_allclose(history.history["spearman"], [expected] * 2, rtol=RTOL)


def test_reset_state_between_evaluate_calls():
    metric = SpearmanCorrelation(capacity=300)
    model = pass_through_model((1,), [metric])
    y1, p1 = correlated(300, seed=9)
    y2, p2 = correlated(250, seed=10, ties=True)
    model.evaluate(p1[:, None], y1, batch_size=64, verbose=0)
    # Had the first pass been kept, 550 rows would overflow capacity and give NaN.
    logs = model.evaluate(p2[:, None], y2, batch_size=64, verbose=0, return_dict=True)
    np.testing.assert_allclose(logs["spearman"], scipy_spearman(y2, p2), rtol=RTOL)
    metric.reset_state()
    assert float(metric.result()) == 0.0
    metric.update_state(y1[:100], p1[:100])
    np.testing.assert_allclose(
        float(metric.result()), scipy_spearman(y1[:100], p1[:100]), rtol=RTOL
    )


def test_past_capacity_result_is_nan_until_reset():
    y, p = correlated(12, seed=11)
    metric = SpearmanCorrelation(capacity=10)
    metric.update_state(y[:6], p[:6])
    metric.update_state(y[6:10], p[6:10])
    np.testing.assert_allclose(float(metric.result()), scipy_spearman(y[:10], p[:10]), rtol=RTOL)
    metric.update_state(y[10:], p[10:])
    assert np.isnan(float(metric.result()))
    metric.update_state(y[:2], p[:2])
    assert np.isnan(float(metric.result()))
    metric.reset_state()
    metric.update_state(y[:10], p[:10])
    np.testing.assert_allclose(float(metric.result()), scipy_spearman(y[:10], p[:10]), rtol=RTOL)


def test_float16_inputs():
    y, p = correlated(200, seed=12)
    y16, p16 = y.astype("float16"), p.astype("float16")
    metric = SpearmanCorrelation(capacity=256)
    metric.update_state(y16[:120], p16[:120])
    metric.update_state(y16[120:], p16[120:])
    assert keras.backend.standardize_dtype(metric.result().dtype) == "float32"
    # float16 rounding creates ties; the reference ranks the same rounded values.
    np.testing.assert_allclose(float(metric.result()), scipy_spearman(y16, p16), rtol=RTOL)


def test_serialization_round_trip():
    metric = SpearmanCorrelation(name="sts_spearman", capacity=123)
    config = keras.saving.serialize_keras_object(metric)
    assert config["registered_name"] == "keras_cosent>SpearmanCorrelation"
    restored = keras.saving.deserialize_keras_object(config)
    assert isinstance(restored, SpearmanCorrelation)
    assert restored.get_config() == metric.get_config()
    assert restored.capacity == 123 and restored.name == "sts_spearman"


@pytest.mark.parametrize("capacity", [0, -5, 2.5, True, None, "10"])
def test_bad_capacity_raises(capacity):
    with pytest.raises(ValueError, match="`capacity` should be a positive int"):
        SpearmanCorrelation(capacity=capacity)


def test_bad_shapes_raise():
    metric = SpearmanCorrelation(capacity=8)
    with pytest.raises(ValueError, match="same length"):
        metric.update_state(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="shape"):
        metric.update_state(np.zeros(3), np.zeros((3, 2, 2, 2)))
    with pytest.raises(ValueError, match="`x` should be a vector"):
        spearman_correlation(np.zeros((3, 2)), np.zeros(3))


def test_docstring_examples_run():
    module = importlib.import_module("keras_cosent.metrics.spearman_correlation")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_kit():
    """The shared checks (tests/kit.py): three uneven batches, serialisation, float16."""
    rng = np.random.default_rng(5)
    y = rng.uniform(0, 5, 90).astype("float32")
    p = (y / 5 + rng.normal(0, 0.3, 90)).astype("float32")
    batches = [(y[:40], p[:40]), (y[40:47], p[40:47]), (y[47:], p[47:])]
    kit.run_metric_test(SpearmanCorrelation(), batches, scipy_spearman(y, p))
