import keras
import numpy as np
import pytest

import keras_cosent
from tests import kit
from tests.losses import helpers


def _cos(u, v):
    return float(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))


def reference(labels, y_pred, t):
    """float64 loops straight from issue 20's formula."""
    if y_pred.ndim == 3:
        labels = np.repeat(labels, y_pred.shape[1])
        y_pred = y_pred.reshape(-1, y_pred.shape[-1])
    n = len(labels)
    losses = []
    for a in range(n):
        pos = [p for p in range(n) if p != a and labels[p] == labels[a]]
        if not pos:
            continue
        den = sum(np.exp(_cos(y_pred[a], y_pred[b]) / t) for b in range(n) if b != a)
        losses.append(
            -sum(np.log(np.exp(_cos(y_pred[a], y_pred[p]) / t) / den) for p in pos) / len(pos)
        )
    return float(np.mean(losses)) if losses else 0.0


@pytest.mark.parametrize(
    "labels,shape",
    [
        ([0, 1, 0, 2, 1, 3], (6, 8)),
        ([0, 0, 0, 0], (4, 8)),  # single class
        ([0, 1, 2], (3, 3, 8)),  # V = 3 views, positives are the other views
        ([0, 1, 1], (3, 4, 5)),
    ],
)
@pytest.mark.parametrize("t", [0.1, 0.5])
def test_matches_reference(labels, shape, t):
    rng = np.random.default_rng(0)
    x = rng.normal(size=shape)
    x[1] = x[0]  # repeated rows (ties)
    labels = np.array(labels)
    got = keras_cosent.losses.SupConLoss(temperature=t)(labels, x.astype("float32"))
    np.testing.assert_allclose(float(got), reference(labels, x, t), rtol=1e-5)


def test_exactly_zero_without_positives():
    x = np.random.default_rng(3).normal(size=(4, 6)).astype("float32")
    assert float(keras_cosent.losses.SupConLoss()(np.arange(4), x)) == 0.0


def test_finite_at_extremes_and_small_temperature():
    a = np.eye(2, 4, dtype="float32")
    x = np.concatenate([a, a, -a], axis=0)  # cos +1 and -1
    loss = keras_cosent.losses.SupConLoss(temperature=1e-3)
    helpers.assert_finite_value_and_grad(lambda y: loss(np.array([0, 1, 0, 1, 0, 1]), y), x)
    helpers.assert_finite_value_and_grad(lambda y: loss(np.arange(6), y), x)


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), None])
def test_validation_names_value(bad):
    with pytest.raises(ValueError, match="temperature"):
        keras_cosent.losses.SupConLoss(temperature=bad)


def test_serialization_and_half_precision():
    loss = keras_cosent.losses.SupConLoss(temperature=0.2)
    helpers.check_serialization(loss)
    assert keras.losses.deserialize(keras.losses.serialize(loss)).temperature == 0.2
    x = np.random.default_rng(1).normal(size=(6, 8)).astype("float32")
    y = np.array([0, 1, 0, 1, 2, 2])
    expected = float(loss(y, x))
    for dtype in ("float16", "bfloat16"):
        got = loss(y, keras.ops.cast(x, dtype))
        np.testing.assert_allclose(float(got), expected, rtol=2e-2)


def test_fit_step():
    x = np.random.default_rng(2).normal(size=(8, 6)).astype("float32")
    y = np.array([0, 1, 2, 3] * 2)
    model = helpers.embedding_model(1, 4, head=keras.layers.Reshape((4,)))
    losses = helpers.fit_history(model, keras_cosent.losses.SupConLoss(), x, y, epochs=2)
    assert np.all(np.isfinite(losses))


def test_kit():
    """The shared checks (tests/kit.py): value, serialisation, float16 inputs."""
    labels = np.array([0, 1, 0, 2, 1, 3, 2, 0], "int32")
    y_pred = np.random.default_rng(7).normal(size=(8, 16)).astype("float32")
    kit.run_loss_test(keras_cosent.losses.SupConLoss(), labels, y_pred,
                      reference(labels, y_pred, 0.1))


def test_a_label_count_other_than_the_batch_names_both():
    emb = np.random.default_rng(0).normal(size=(3, 2, 8)).astype("float32")
    with pytest.raises(ValueError, match=r"`SupConLoss` expects one label per row: `y_true` of "
                                         r"shape \(4,\) does not match 3 rows"):
        keras_cosent.losses.SupConLoss()(np.arange(4), emb)
