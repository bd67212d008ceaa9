"""PearsonCorrelation and pearson_correlation against scipy.stats.pearsonr."""

import doctest
import importlib

import keras
import numpy as np
import pytest
import scipy.stats

from keras_cosent.metrics import PearsonCorrelation
from keras_cosent.metrics import SpearmanCorrelation
from keras_cosent.metrics import pearson_correlation
from tests import kit
from tests.metrics.correlation_helpers import JIT_COMPILE
from tests.metrics.correlation_helpers import noisy_pair_embeddings
from tests.metrics.correlation_helpers import numpy_pair_cosine
from tests.metrics.correlation_helpers import pass_through_model

RTOL = 1e-5


def scipy_pearson(x, y):
    return scipy.stats.pearsonr(np.asarray(x, "float64"), np.asarray(y, "float64")).statistic


def scipy_spearman(x, y):
    return scipy.stats.spearmanr(np.asarray(x, "float64"), np.asarray(y, "float64")).statistic


def correlated(n, seed, ties=False, offset=0.0):
    rng = np.random.default_rng(seed)
    if ties:
        y = rng.integers(0, 6, size=n).astype("float32")
    else:
        y = rng.uniform(0, 5, size=n).astype("float32")
    p = (offset + y / 5 + rng.normal(0, 0.3, size=n)).astype("float32")
    return y, p


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("n", [2, 9, 1000, 40000])
def test_function_matches_scipy(n, ties):
    y, p = correlated(n, seed=n, ties=ties)
    if n == 2:
        y = np.array([1.0, 3.0], "float32")
    np.testing.assert_allclose(float(pearson_correlation(y, p)), scipy_pearson(y, p), rtol=RTOL)


def test_function_large_offset_is_stable():
    # A large common offset makes the one-pass formula cancel catastrophically
    # in float32; the centred computation must not care.
    y, p = correlated(2000, seed=1, offset=1000.0)
    np.testing.assert_allclose(float(pearson_correlation(y, p)), scipy_pearson(y, p), rtol=RTOL)


def test_function_mask_drops_rows():
    y, p = correlated(400, seed=2)
    mask = np.random.default_rng(3).random(400) > 0.4
    p_polluted = np.where(mask, p, np.inf).astype("float32")
    got = float(pearson_correlation(y, p_polluted, mask=mask.astype("float32")))
    np.testing.assert_allclose(got, scipy_pearson(y[mask], p[mask]), rtol=RTOL)


def test_function_degenerate_inputs_give_zero():
    assert float(pearson_correlation([2.0, 2.0, 2.0], [0.1, 0.2, 0.3])) == 0.0
    assert float(pearson_correlation([], [])) == 0.0


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_or_inf_value_gives_nan_even_beside_a_constant_side(bad):
    # As SpearmanCorrelation does: a diverged model's scores never read as 0.
    gold = np.full(4, 3.0, "float32")
    scores = np.array([0.1, bad, 0.3, 0.4], "float32")
    for y, p in ((gold, scores), (scores, gold), (gold + np.arange(4, dtype="float32"), scores)):
        assert np.isnan(float(pearson_correlation(y, p)))
        metric = PearsonCorrelation()
        metric.update_state(y[:2], p[:2])
        metric.update_state(y[2:], p[2:])
        assert np.isnan(float(metric.result()))
        spearman = SpearmanCorrelation()
        spearman.update_state(y, p)
        assert np.isnan(float(spearman.result()))


def test_evaluate_matches_scipy_on_stsb_dev_unlike_keras_metric(stsb_dev_scores):
    scores = stsb_dev_scores
    emb = noisy_pair_embeddings(scores, seed=4)
    cosine = numpy_pair_cosine(emb)
    expected_pearson = scipy_pearson(scores, cosine)
    expected_spearman = scipy_spearman(scores, cosine)
    # Cosines as a (batch, 1) column for keras.metrics.PearsonCorrelation, pair
    # embeddings for ours: both paths of y_pred at once, from two models.
    keras_model = pass_through_model((1,), [keras.metrics.PearsonCorrelation(name="keras_pearson", axis=0)])
    keras_logs = keras_model.evaluate(
        cosine[:, None].astype("float32"), scores, batch_size=128, verbose=0, return_dict=True
    )
    model = pass_through_model((2, 8), [PearsonCorrelation(), SpearmanCorrelation(capacity=2048)])
    logs = model.evaluate(emb, scores, batch_size=128, verbose=0, return_dict=True)
    np.testing.assert_allclose(logs["pearson"], expected_pearson, rtol=RTOL)
    np.testing.assert_allclose(logs["spearman"], expected_spearman, rtol=RTOL)
    # Keras averages per-batch correlations (axis=0 correlates within each
    # batch): not the number STS reports.
    assert abs(keras_logs["keras_pearson"] - expected_pearson) > 1e-3


def test_evaluate_uneven_batches_and_ties():
    y, p = correlated(777, seed=5, ties=True)
    model = pass_through_model((1,), [PearsonCorrelation()])
    logs = model.evaluate(p[:, None], y, batch_size=100, verbose=0, return_dict=True)
    np.testing.assert_allclose(logs["pearson"], scipy_pearson(y, p), rtol=RTOL)


def test_streaming_merge_with_varied_batch_sizes():
    y, p = correlated(1000, seed=6, offset=50.0)
    metric = PearsonCorrelation()
    for chunk in np.split(np.arange(1000), [1, 2, 50, 51, 400, 999]):
        metric.update_state(y[chunk], p[chunk])
    np.testing.assert_allclose(float(metric.result()), scipy_pearson(y, p), rtol=RTOL)


@pytest.mark.parametrize("constant", [0.1, 0.7])
def test_streaming_constant_side_gives_exactly_zero(constant):
    # SciPy calls the correlation undefined; the metric documents 0. Merging
    # batches leaves float32 residues in a constant side's variance, whose ratio
    # to the co-moment read +-0.16 here on TensorFlow.
    gold = np.sort(np.random.default_rng(20).uniform(0, 5, 1500)).astype("float32")
    same = np.full(1500, constant, "float32")
    for y, p in ((gold, same), (same, gold)):
        metric = PearsonCorrelation()
        metric.update_state(gold[:300], gold[:300])  # forgotten by the reset
        metric.reset_state()
        for i in range(0, 1500, 32):
            metric.update_state(y[i : i + 32], p[i : i + 32])
        assert float(metric.result()) == 0.0
    # Rows masked out do not make a side vary; batches each constant but
    # different from one another do.
    metric = PearsonCorrelation()
    metric.update_state(gold, np.where(np.arange(1500) % 3, constant, 9.0).astype("float32"),
                        sample_weight=(np.arange(1500) % 3 != 0).astype("float32"))
    assert float(metric.result()) == 0.0
    steps = np.repeat(np.arange(50), 30).astype("float32")
    metric = PearsonCorrelation()
    for i in range(0, 1500, 30):
        metric.update_state(gold[i : i + 30], steps[i : i + 30])
    np.testing.assert_allclose(float(metric.result()), scipy_pearson(gold, steps), rtol=RTOL)


def test_sample_weight_masks_rows():
    y, p = correlated(300, seed=7)
    weight = (np.random.default_rng(8).random(300) > 0.3).astype("float32")
    model = pass_through_model((1,), weighted_metrics=[PearsonCorrelation()])
    logs = model.evaluate(
        p[:, None], y, sample_weight=weight, batch_size=64, verbose=0, return_dict=True
    )
    keep = weight > 0
    np.testing.assert_allclose(logs["pearson"], scipy_pearson(y[keep], p[keep]), rtol=RTOL)


def test_fit_step_reports_corpus_value():
    rng = np.random.default_rng(9)
    x = rng.normal(size=(200, 4)).astype("float32")
    y = (x[:, 0] + rng.normal(0, 0.5, size=200)).astype("float32")
    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.0),
        loss="mse",
        jit_compile=JIT_COMPILE,
        metrics=[PearsonCorrelation()],
    )
    history = model.fit(x, y, batch_size=48, epochs=2, verbose=0)
    p = model.predict(x, verbose=0)[:, 0]
    np.testing.assert_allclose(history.history["pearson"], [scipy_pearson(y, p)] * 2, rtol=RTOL)


def test_reset_state_between_evaluate_calls():
    model = pass_through_model((1,), [PearsonCorrelation()])
    y1, p1 = correlated(300, seed=10, offset=3.0)
    y2, p2 = correlated(200, seed=11)
    model.evaluate(p1[:, None], y1, batch_size=64, verbose=0)
    logs = model.evaluate(p2[:, None], y2, batch_size=64, verbose=0, return_dict=True)
    np.testing.assert_allclose(logs["pearson"], scipy_pearson(y2, p2), rtol=RTOL)
    standalone = PearsonCorrelation()
    standalone.update_state(y1, p1)
    standalone.reset_state()
    assert float(standalone.result()) == 0.0
    standalone.update_state(y2, p2)
    np.testing.assert_allclose(float(standalone.result()), scipy_pearson(y2, p2), rtol=RTOL)


def test_float16_inputs():
    y, p = correlated(300, seed=12)
    y16, p16 = y.astype("float16"), p.astype("float16")
    metric = PearsonCorrelation()
    metric.update_state(y16[:100], p16[:100])
    metric.update_state(y16[100:], p16[100:])
    assert keras.backend.standardize_dtype(metric.result().dtype) == "float32"
    np.testing.assert_allclose(float(metric.result()), scipy_pearson(y16, p16), rtol=RTOL)


def test_serialization_round_trip():
    metric = PearsonCorrelation(name="sts_pearson")
    config = keras.saving.serialize_keras_object(metric)
    assert config["registered_name"] == "keras_cosent>PearsonCorrelation"
    restored = keras.saving.deserialize_keras_object(config)
    assert isinstance(restored, PearsonCorrelation)
    assert restored.get_config() == metric.get_config()
    assert restored.name == "sts_pearson"


def test_bad_shapes_raise():
    metric = PearsonCorrelation()
    with pytest.raises(ValueError, match="`y_true` and `y_pred` should have the same length"):
        metric.update_state(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="`sample_weight`"):
        metric.update_state(np.zeros(3), np.zeros(3), sample_weight=np.ones(5))
    with pytest.raises(ValueError, match="`y` should be a vector"):
        pearson_correlation(np.zeros(3), np.zeros((3, 2)))
    # The right size but not one score per pair: refused, not flattened.
    for metric in (PearsonCorrelation(), SpearmanCorrelation()):
        with pytest.raises(ValueError, match=r"`y_true` of shape \(3, 2\)"):
            metric.update_state(np.zeros((3, 2)), np.zeros(6))


def test_docstring_examples_run():
    module = importlib.import_module("keras_cosent.metrics.pearson_correlation")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_kit():
    """The shared checks (tests/kit.py): three uneven batches, serialisation, float16."""
    rng = np.random.default_rng(5)
    y = rng.uniform(0, 5, 90).astype("float32")
    p = (y / 5 + rng.normal(0, 0.3, 90)).astype("float32")
    batches = [(y[:40], p[:40]), (y[40:47], p[40:47]), (y[47:], p[47:])]
    kit.run_metric_test(PearsonCorrelation(), batches, scipy_pearson(y, p))
