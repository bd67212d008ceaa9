"""AnglELoss against the AnglE authors' complex-quotient formula in float64."""

import math
import re

import keras
import numpy as np
import pytest

from keras_cosent.losses import AnglELoss
from keras_cosent.losses import angle_loss
from keras_cosent.losses import angle_similarity
from tests import kit
from tests.losses import helpers


def reference_angle_similarity(pairs):
    """Written after the AnglE reference code (complex quotient, rescaled)."""
    out = []
    for x, y in np.asarray(pairs, "float64"):
        half = len(x) // 2
        a, b, c, d = x[:half], x[half:], y[:half], y[half:]
        z = np.sum(c**2 + d**2)
        real = (a * c + b * d) / z
        imaginary = (b * c - a * d) / z
        dz, dw = math.sqrt(np.sum(a**2 + b**2)), math.sqrt(np.sum(c**2 + d**2))
        real, imaginary = real / (dz / dw), imaginary / (dz / dw)
        out.append(abs(np.sum(real) + np.sum(imaginary)))
    return np.array(out)


def reference_ranking(labels, similarity, scale):
    total = 0.0
    for a in range(len(labels)):
        for b in range(len(labels)):
            if labels[a] > labels[b]:
                total += math.exp(scale * (similarity[b] - similarity[a]))
    return math.log1p(total)


@pytest.mark.parametrize("scale", [1.0, 20.0])
def test_matches_reference(scale):
    rng = np.random.default_rng(0)
    labels = np.round(rng.uniform(0, 5, 16), 1).astype("float32")
    pairs = rng.normal(size=(16, 2, 8)).astype("float32")
    similarity = reference_angle_similarity(pairs)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(angle_similarity(pairs)), similarity, rtol=1e-5, atol=1e-6
    )
    expected = reference_ranking(labels, similarity, scale)
    np.testing.assert_allclose(float(AnglELoss(scale=scale)(labels, pairs)), expected, rtol=1e-5)
    np.testing.assert_allclose(float(angle_loss(labels, pairs, scale=scale)), expected, rtol=1e-5)


def test_all_equal_labels_give_exactly_zero_and_ties_are_ignored():
    pairs = np.random.default_rng(1).normal(size=(6, 2, 4)).astype("float32")
    assert float(AnglELoss()(np.ones(6, "float32"), pairs)) == 0.0
    labels = np.array([1, 1, 0, 0, 0, 0], "float32")
    expected = reference_ranking(labels, reference_angle_similarity(pairs), 20.0)
    np.testing.assert_allclose(float(AnglELoss()(labels, pairs)), expected, rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_identical_and_opposite_embeddings_have_finite_gradients(dtype):
    u = np.random.default_rng(2).normal(size=(4, 6))
    pairs = np.stack([u, np.concatenate([u[:2], -u[2:]])], axis=1).astype(dtype)
    labels = np.array([0.0, 1.0, 2.0, 3.0], "float32")
    value, _ = helpers.assert_finite_value_and_grad(
        lambda p: angle_loss(labels, p, scale=100.0), pairs
    )
    # Both identical and opposite embeddings score 1: all differences are 0.
    np.testing.assert_allclose(value, math.log(1 + 6), rtol=1e-3)


def test_float16_inputs_match_reference():
    rng = np.random.default_rng(3)
    labels = rng.uniform(0, 5, 8).astype("float32")
    pairs = rng.normal(size=(8, 2, 6)).astype("float16")
    expected = reference_ranking(labels, reference_angle_similarity(pairs), 20.0)
    np.testing.assert_allclose(float(AnglELoss()(labels, pairs)), expected, rtol=1e-3)


@pytest.mark.parametrize("shape", [(4,), (4, 2, 5), (4, 3, 6), (4, 6)])
def test_shapes_other_than_even_pairs_are_rejected(shape):
    with pytest.raises(ValueError, match=re.escape("(batch, 2, dim) with an even `dim`")):
        AnglELoss()(np.zeros(4, "float32"), np.ones(shape, "float32"))


@pytest.mark.parametrize("scale", [0, -3.0, float("inf"), "20"])
def test_bad_scale_is_rejected_with_its_value(scale):
    with pytest.raises(ValueError, match=re.escape(f"`scale`={scale!r}")):
        AnglELoss(scale=scale)


def test_serialization_round_trip():
    assert helpers.check_serialization(AnglELoss(scale=30.0)).scale == 30.0


def test_fit_lowers_loss_and_saved_model_round_trip(tmp_path):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(32, 6)).astype("float32")
    y = rng.uniform(0, 5, 32).astype("float32")
    helpers.check_fit_and_saved_model(tmp_path, AnglELoss(), x, y, columns=2, dim=8)


def test_mixed_float16():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(16, 6)).astype("float32")
    helpers.check_mixed_float16(AnglELoss(), x, rng.uniform(0, 5, 16), columns=2, dim=8)


@pytest.mark.heavy
def test_matches_sentence_transformers():
    import sentence_transformers.sentence_transformer.losses as st_losses
    import torch
    rng = np.random.default_rng(6)
    labels = np.round(rng.uniform(0, 5, 16), 1).astype("float32")
    pairs = rng.normal(size=(16, 2, 8)).astype("float32")
    peer = st_losses.AnglELoss(model=None, scale=20.0)
    expected = peer.compute_loss_from_embeddings(
        [torch.tensor(pairs[:, 0]), torch.tensor(pairs[:, 1])], torch.tensor(labels)
    )
    np.testing.assert_allclose(float(AnglELoss()(labels, pairs)), float(expected), rtol=1e-5)


def test_kit():
    """The shared checks (tests/kit.py); float16 tolerance 5e-2 at scale 20 (see CoSENT's)."""
    rng = np.random.default_rng(7)
    y_pred = rng.normal(size=(12, 2, 16)).astype("float32")
    y_true = np.round(rng.uniform(0, 5, 12), 1).astype("float32")
    expected = reference_ranking(y_true, reference_angle_similarity(y_pred), 20.0)
    kit.run_loss_test(AnglELoss(), y_true, y_pred, expected, mixed_rtol=5e-2)


def test_a_zero_embedding_gets_the_subgradient_zero_on_every_backend():
    # Its similarity is |0|: JAX's abs took the derivative 1 there, which the
    # normalisation of a zero row turned into gradients of ~1e9 (0 on TensorFlow
    # and PyTorch, as torch.abs gives: the reference).
    import torch

    pairs = np.random.default_rng(0).normal(size=(2, 2, 4)).astype("float32")
    pairs[1, 0] = 0.0
    labels = np.array([1.0, 0.0], "float32")
    value, grad = helpers.value_and_grad(lambda p: angle_loss(labels, p), pairs)
    t = torch.tensor(pairs, dtype=torch.float64, requires_grad=True)
    unit = t / torch.clamp(torch.linalg.norm(t, dim=-1, keepdim=True), min=1e-12)
    x, y = unit[:, 0], unit[:, 1]
    a, b, c, d = x[:, :2], x[:, 2:], y[:, :2], y[:, 2:]
    reference = torch.abs((x * y).sum(-1) + (b * c - a * d).sum(-1))
    expected = torch.log1p(torch.exp(20.0 * (reference[1] - reference[0])))
    expected.backward()
    np.testing.assert_allclose(value, expected.item(), rtol=1e-5)
    np.testing.assert_allclose(grad, t.grad.numpy(), atol=1e-6)
    assert np.all(grad[1, 0] == 0.0)
