import keras
import numpy as np
import pytest

import keras_cosent
from tests import kit
from tests.losses import helpers


def _cos(u, v):
    return float(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))


def reference(y_pred, t):
    """float64 loops straight from issue 20's formula."""
    n = y_pred.shape[0]
    views = [y_pred[i, 0] for i in range(n)] + [y_pred[i, 1] for i in range(n)]
    total = 0.0
    for i in range(2 * n):
        j = (i + n) % (2 * n)
        den = sum(np.exp(_cos(views[i], views[k]) / t) for k in range(2 * n) if k != i)
        total += -np.log(np.exp(_cos(views[i], views[j]) / t) / den)
    return total / (2 * n)


@pytest.mark.parametrize("t", [0.05, 0.5])
def test_matches_reference_with_ties_and_repeats(t):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 2, 7))
    x[3] = x[1]  # repeated example
    x[4, 1] = x[4, 0]  # identical views
    got = keras_cosent.losses.NTXentLoss(temperature=t)(np.zeros(5), x.astype("float32"))
    np.testing.assert_allclose(float(got), reference(x, t), rtol=1e-5)


def test_finite_at_extremes_and_small_temperature():
    a = np.eye(3, 4, dtype="float32")
    x = np.stack([a, -a], axis=1)
    x[1, 1] = x[1, 0]
    loss = keras_cosent.losses.NTXentLoss(temperature=1e-3)
    helpers.assert_finite_value_and_grad(lambda y: loss(np.zeros(3), y), x)


@pytest.mark.parametrize("bad", [0, -0.1, float("nan"), "0.1"])
def test_validation_names_value(bad):
    with pytest.raises(ValueError, match="temperature"):
        keras_cosent.losses.NTXentLoss(temperature=bad)


def test_shape_error():
    with pytest.raises(ValueError, match=r"\(batch, 2, dim\)"):
        keras_cosent.losses.NTXentLoss()(np.zeros(2), np.zeros((2, 3, 4), "float32"))


def test_serialization_and_half_precision():
    loss = keras_cosent.losses.NTXentLoss(temperature=0.1)
    helpers.check_serialization(loss)
    restored = keras.losses.deserialize(keras.losses.serialize(loss))
    assert restored.temperature == 0.1
    x = np.random.default_rng(1).normal(size=(4, 2, 8)).astype("float32")
    expected = float(loss(np.zeros(4), x))
    for dtype in ("float16", "bfloat16"):
        got = loss(np.zeros(4), keras.ops.cast(x, dtype))
        assert keras.backend.standardize_dtype(got.dtype) == "float32"
        np.testing.assert_allclose(float(got), expected, rtol=2e-2)


def test_fit_step():
    x = np.random.default_rng(2).normal(size=(8, 6)).astype("float32")
    losses = helpers.fit_history(
        helpers.embedding_model(2, 4), keras_cosent.losses.NTXentLoss(), x, np.zeros(8), epochs=2
    )
    assert np.all(np.isfinite(losses))


def test_kit():
    """The shared checks (tests/kit.py); float16 tolerance 5e-2 at temperature 0.05."""
    y_pred = np.random.default_rng(7).normal(size=(6, 2, 16)).astype("float32")
    kit.run_loss_test(keras_cosent.losses.NTXentLoss(), np.zeros(6), y_pred,
                      reference(y_pred, 0.05), mixed_rtol=5e-2)
