"""CosineMSELoss against a plain float64 loop."""

import re

import keras
import numpy as np
import pytest

from keras_cosent.losses import CosineMSELoss
from keras_cosent.losses import cosine_mse_loss
from tests import kit
from tests.losses import helpers


def reference_cosine_mse(labels, pairs, min_score, max_score):
    errors = []
    for label, (u, v) in zip(np.asarray(labels, "float64"), np.asarray(pairs, "float64")):
        cosine = np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v))
        target = (label - min_score) / (max_score - min_score)
        errors.append((cosine - target) ** 2)
    return np.array(errors)


@pytest.mark.parametrize("min_score, max_score", [(0.0, 1.0), (0.0, 5.0), (-1.0, 1.0)])
def test_matches_reference(min_score, max_score):
    rng = np.random.default_rng(0)
    labels = rng.uniform(min_score, max_score, 12).astype("float32")
    pairs = rng.normal(size=(12, 2, 7)).astype("float32")
    expected = reference_cosine_mse(labels, pairs, min_score, max_score)
    per_pair = cosine_mse_loss(labels, pairs, min_score=min_score, max_score=max_score)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(per_pair), expected, rtol=1e-5, atol=1e-7)
    loss = CosineMSELoss(min_score=min_score, max_score=max_score)
    np.testing.assert_allclose(float(loss(labels, pairs)), expected.mean(), rtol=1e-5)
    cosines = np.array([np.dot(u, v) / np.linalg.norm(u) / np.linalg.norm(v) for u, v in pairs])
    np.testing.assert_allclose(
        float(loss(labels, cosines.astype("float32"))), expected.mean(), rtol=1e-5
    )


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_identical_and_opposite_embeddings_have_finite_gradients(dtype):
    u = np.random.default_rng(1).normal(size=(4, 6))
    pairs = np.stack([u, np.concatenate([u[:2], -u[2:]])], axis=1).astype(dtype)
    labels = np.array([1.0, 0.5, 0.0, 1.0], "float32")
    value, _ = helpers.assert_finite_value_and_grad(
        lambda p: keras.ops.mean(cosine_mse_loss(labels, p)), pairs
    )
    np.testing.assert_allclose(value, (0 + 0.25 + 1 + 4) / 4, rtol=1e-3)


@pytest.mark.parametrize(
    "kwargs, shown",
    [
        ({"min_score": 1.0, "max_score": 1.0}, "`min_score`=1.0, `max_score`=1.0"),
        ({"min_score": 5, "max_score": 0}, "`min_score`=5, `max_score`=0"),
        ({"max_score": float("nan")}, "`max_score`=nan"),
        ({"min_score": "0"}, "`min_score`='0'"),
    ],
)
def test_bad_arguments_are_rejected_with_their_value(kwargs, shown):
    with pytest.raises(ValueError, match=re.escape(shown)):
        CosineMSELoss(**kwargs)


def test_triplets_are_rejected():
    with pytest.raises(ValueError, match=r"\(batch, 2, dim\)"):
        CosineMSELoss()(np.zeros(4), np.ones((4, 3, 5), "float32"))
    with pytest.raises(ValueError, match=re.escape("`CosineMSELoss` scores pairs")):
        CosineMSELoss()(np.zeros(4), np.ones((4, 8), "float32"))


def test_serialization_round_trip():
    restored = helpers.check_serialization(CosineMSELoss(min_score=0.0, max_score=5.0))
    assert (restored.min_score, restored.max_score) == (0.0, 5.0)


def test_fit_lowers_loss_and_saved_model_round_trip(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(32, 6)).astype("float32")
    y = rng.uniform(0, 5, 32).astype("float32")
    loss = CosineMSELoss(max_score=5.0)
    helpers.check_fit_and_saved_model(tmp_path, loss, x, y, columns=2, dim=8)


def test_mixed_float16():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(16, 6)).astype("float32")
    helpers.check_mixed_float16(CosineMSELoss(), x, rng.uniform(0, 1, 16), columns=2, dim=8)


def test_kit():
    """The shared checks (tests/kit.py): value, serialisation, float16 inputs."""
    rng = np.random.default_rng(7)
    y_pred = rng.normal(size=(12, 2, 16)).astype("float32")
    y_true = rng.uniform(0, 5, 12).astype("float32")
    expected = float(np.mean(reference_cosine_mse(y_true, y_pred, 0.0, 5.0)))
    kit.run_loss_test(CosineMSELoss(min_score=0.0, max_score=5.0), y_true, y_pred, expected)
