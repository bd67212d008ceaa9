import keras
import numpy as np
import pytest

import keras_cosent
from tests import kit
from tests.losses import helpers


def _cos(u, v):
    return float(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))


def reference(y_pred, margin, form, scale):
    terms = []
    for row in y_pred:
        for neg in row[2:]:
            diff = _cos(row[0], row[1]) - _cos(row[0], neg)
            terms.append(max(0.0, margin - diff) if form == "hinge" else np.log1p(np.exp(-scale * diff)))
    return float(np.mean(terms))


@pytest.mark.parametrize("form", ["hinge", "logistic"])
@pytest.mark.parametrize("k", [1, 3])
def test_matches_reference(form, k):
    x = np.random.default_rng(0).normal(size=(5, 2 + k, 6))
    x[1] = x[0]
    x[2, 2] = x[2, 1]  # tie between positive and negative
    loss = keras_cosent.losses.MarginRankingLoss(margin=0.2, form=form, scale=20.0)
    np.testing.assert_allclose(
        float(loss(np.zeros(5), x.astype("float32"))), reference(x, 0.2, form, 20.0), rtol=1e-5, atol=1e-7
    )


@pytest.mark.parametrize("form", ["hinge", "logistic"])
def test_finite_at_extremes_and_zero_margin(form):
    a = np.eye(2, 4, dtype="float32")
    x = np.stack([a, -a, a], axis=1)  # worst case: positive opposite, negative identical
    loss = keras_cosent.losses.MarginRankingLoss(margin=0.0, form=form, scale=1e3)
    helpers.assert_finite_value_and_grad(lambda y: loss(np.zeros(2), y), x)


@pytest.mark.parametrize(
    "kwargs,name", [({"margin": -1.0}, "margin"), ({"form": "square"}, "form"), ({"scale": 0}, "scale")]
)
def test_validation_names_value(kwargs, name):
    with pytest.raises(ValueError, match=name):
        keras_cosent.losses.MarginRankingLoss(**kwargs)


def test_serialization_and_half_precision():
    loss = keras_cosent.losses.MarginRankingLoss(margin=0.5, form="logistic", scale=10.0)
    helpers.check_serialization(loss)
    assert keras.losses.deserialize(keras.losses.serialize(loss)).get_config() == loss.get_config()
    x = np.random.default_rng(1).normal(size=(4, 4, 8)).astype("float32")
    expected = float(loss(np.zeros(4), x))
    for dtype in ("float16", "bfloat16"):
        np.testing.assert_allclose(float(loss(np.zeros(4), keras.ops.cast(x, dtype))), expected, rtol=3e-2)


def test_fit_step():
    x = np.random.default_rng(2).normal(size=(8, 6)).astype("float32")
    losses = helpers.fit_history(
        helpers.embedding_model(3, 4), keras_cosent.losses.MarginRankingLoss(), x, np.zeros(8), epochs=2
    )
    assert np.all(np.isfinite(losses))


def test_kit():
    """The shared checks (tests/kit.py): value, serialisation, float16 inputs."""
    y_pred = np.random.default_rng(7).normal(size=(8, 4, 16)).astype("float32")
    kit.run_loss_test(keras_cosent.losses.MarginRankingLoss(form="logistic"), np.zeros(8),
                      y_pred, reference(y_pred, 0.2, "logistic", 20.0), mixed_rtol=5e-2)
