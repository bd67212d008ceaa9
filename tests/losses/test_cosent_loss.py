"""CoSENTLoss against a plain float64 double loop over pairs of pairs."""

import math
import re

import keras
import numpy as np
import pytest

import keras_cosent
from keras_cosent.losses import CoSENTLoss
from keras_cosent.losses import cosent_loss
from tests import kit
from tests.losses import helpers


def reference_cosines(pairs):
    pairs = np.asarray(pairs, "float64")
    out = []
    for row in pairs:
        u, v = row[0], row[1]
        out.append(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))
    return np.array(out)


def reference_cosent(labels, cosines, scale):
    total = 0.0
    for a in range(len(labels)):
        for b in range(len(labels)):
            if labels[a] > labels[b]:
                total += math.exp(scale * (float(cosines[b]) - float(cosines[a])))
    return math.log1p(total)


def make_labels(kind, rng, n):
    if kind == "sts":  # one decimal, so some ties
        return np.round(rng.uniform(0, 5, n), 1).astype("float32")
    if kind == "binary":
        return rng.integers(0, 2, n).astype("int32")
    return rng.integers(0, 3, n).astype("int32")  # nli: 2 > 1 > 0


@pytest.mark.parametrize("kind", ["sts", "binary", "nli"])
@pytest.mark.parametrize("scale", [1.0, 20.0])
def test_matches_reference(kind, scale):
    rng = np.random.default_rng(0)
    labels = make_labels(kind, rng, 16)
    pairs = rng.normal(size=(16, 2, 8)).astype("float32")
    expected = reference_cosent(labels, reference_cosines(pairs), scale)
    got = float(CoSENTLoss(scale=scale)(labels, pairs))
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert float(cosent_loss(labels, pairs, scale=scale)) == pytest.approx(got, rel=1e-6)


def test_cosines_and_embeddings_agree():
    rng = np.random.default_rng(1)
    labels = rng.uniform(0, 5, 12).astype("float32")
    pairs = rng.normal(size=(12, 2, 5)).astype("float32")
    cosines = reference_cosines(pairs).astype("float32")
    loss = CoSENTLoss()
    np.testing.assert_allclose(
        float(loss(labels, pairs)), float(loss(labels, cosines)), rtol=1e-5
    )
    # (batch, 1) labels and cosines are accepted as well.
    np.testing.assert_allclose(
        float(loss(labels[:, None], cosines[:, None])),
        float(loss(labels, cosines)),
        rtol=1e-6,
    )


def test_all_equal_labels_give_exactly_zero_and_zero_gradient():
    cosines = np.random.default_rng(2).uniform(-1, 1, 8).astype("float32")
    labels = np.full(8, 3.0, "float32")
    value, grad = helpers.value_and_grad(
        lambda c: cosent_loss(labels, c, scale=20.0), cosines
    )
    assert value == 0.0
    assert np.all(grad == 0.0)


def test_empty_batch_gives_exactly_zero():
    # No pair, so no ordered couple: 0, as for equal labels (not an error on a max of nothing).
    empty = np.zeros((0, 2, 4), "float32")
    for loss in (CoSENTLoss(), keras_cosent.losses.AnglELoss()):
        assert float(loss(np.zeros((0,), "float32"), empty)) == 0.0


@pytest.mark.parametrize("labels", [[2.0, np.nan, 1.0, 0.0], [0.0, np.nan, 1.0, 2.0]])
def test_nan_label_gives_nan_on_every_backend(labels):
    # Sorting put the NaN first, last or nowhere depending on the backend, so a
    # missing score gave a finite loss that differed between backends.
    pairs = np.random.default_rng(0).normal(size=(4, 2, 4)).astype("float32")
    labels = np.asarray(labels, "float32")
    for loss in (CoSENTLoss(), keras_cosent.losses.AnglELoss()):
        assert np.isnan(float(loss(labels, pairs)))


def test_ties_are_ignored():
    labels = np.array([1.0, 1.0, 0.0], "float32")
    cosines = np.array([0.2, 0.9, 0.5], "float32")
    # Only (0 over 2) and (1 over 2) are ordered; 0 and 1 are tied.
    expected = math.log(1 + math.exp(20 * (0.5 - 0.2)) + math.exp(20 * (0.5 - 0.9)))
    np.testing.assert_allclose(float(CoSENTLoss()(labels, cosines)), expected, rtol=1e-5)
    swapped = cosines[[1, 0, 2]]  # reordering within the tie changes nothing
    np.testing.assert_allclose(
        float(CoSENTLoss()(labels, swapped)), expected, rtol=1e-5
    )


def test_only_label_order_matters():
    rng = np.random.default_rng(3)
    labels = rng.permutation(10).astype("float32")
    cosines = rng.uniform(-1, 1, 10).astype("float32")
    squashed = np.exp(labels)  # monotone transform of the labels
    np.testing.assert_allclose(
        float(CoSENTLoss()(labels, cosines)),
        float(CoSENTLoss()(squashed, cosines)),
        rtol=1e-6,
    )


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_extreme_cosines_have_finite_values_and_gradients(dtype):
    labels = np.array([1.0, 0.0, 0.0, 1.0], "float32")
    cosines = np.array([1.0, -1.0, 1.0, -1.0], dtype)
    value, _ = helpers.assert_finite_value_and_grad(
        lambda c: cosent_loss(labels, c, scale=100.0), cosines
    )
    expected = reference_cosent(labels, cosines.astype("float64"), 100.0)
    np.testing.assert_allclose(value, expected, rtol=1e-5)


def test_loss_is_finite_up_to_half_float32s_maximum_scale():
    # The worst-ranked batch costs about 2 * scale, so half float32's maximum
    # is the largest scale whose loss fits; the docstring promises that much.
    from keras_cosent.losses.cosent_loss import ranking_loss_from_similarity

    scale = float(np.finfo("float32").max) / 2
    labels = np.array([1.0, 0.0], "float32")
    value = ranking_loss_from_similarity(labels, np.array([-1.0, 1.0], "float32"), scale=scale)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(value), 2 * scale, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_identical_and_opposite_embeddings_have_finite_gradients(dtype):
    u = np.random.default_rng(4).normal(size=(4, 6))
    pairs = np.stack([u, np.concatenate([u[:2], -u[2:]])], axis=1).astype(dtype)
    labels = np.array([0.0, 1.0, 1.0, 0.0], "float32")
    value, _ = helpers.assert_finite_value_and_grad(
        lambda p: cosent_loss(labels, p, scale=100.0), pairs
    )
    # cosines 1, 1, -1, -1: pair 1 (label 1) beats 0 (label 0) by 0, pair 2 loses by 2.
    expected = reference_cosent(labels, [1.0, 1.0, -1.0, -1.0], 100.0)
    np.testing.assert_allclose(value, expected, rtol=1e-3)


def test_float16_inputs_match_float32():
    rng = np.random.default_rng(5)
    labels = rng.uniform(0, 5, 8).astype("float16")
    pairs = rng.normal(size=(8, 2, 4)).astype("float16")
    got = float(CoSENTLoss()(labels, pairs))
    expected = reference_cosent(labels.astype("float64"), reference_cosines(pairs), 20.0)
    np.testing.assert_allclose(got, expected, rtol=1e-3)


@pytest.mark.parametrize("scale", [0, -1.0, float("nan"), float("inf"), "20", True, None,
                                   1e39,  # inf in float32, where the loss is computed
                                   10**400,  # an int no float holds (was an OverflowError)
                                   1e-39])  # 0 or subnormal in float32
def test_bad_scale_is_rejected_with_its_value(scale):
    with pytest.raises(ValueError, match=re.escape(f"`scale`={scale!r}")):
        CoSENTLoss(scale=scale)


def test_bad_shapes_are_rejected():
    labels = np.zeros(4, "float32")
    with pytest.raises(ValueError, match=r"\(batch, 2, dim\)"):
        CoSENTLoss()(labels, np.zeros((4, 3, 5), "float32"))
    with pytest.raises(ValueError, match="one label per pair"):
        CoSENTLoss()(np.zeros(3, "float32"), np.zeros(4, "float32"))
    # Embeddings without the pair axis, two cosines per row, a scalar: the loss is named.
    for shape in ((4, 8), (4, 2), ()):
        with pytest.raises(ValueError, match=re.escape(
                f"`CoSENTLoss` scores pairs: `y_pred` should have shape (batch,) with one "
                f"cosine per pair, or (batch, 2, dim) with the pair's embeddings. Received "
                f"shape {shape}.")):
            CoSENTLoss()(labels, np.zeros(shape, "float32"))


def test_serialization_round_trip():
    restored = helpers.check_serialization(CoSENTLoss(scale=32.0, name="my_cosent"))
    assert restored.scale == 32.0 and restored.name == "my_cosent"


def test_fit_lowers_loss_and_saved_model_round_trip(tmp_path):
    rng = np.random.default_rng(6)
    x = rng.normal(size=(32, 6)).astype("float32")
    y = rng.uniform(0, 5, 32).astype("float32")
    helpers.check_fit_and_saved_model(tmp_path, CoSENTLoss(scale=25.0), x, y, columns=2, dim=8)


def test_mixed_float16():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(16, 6)).astype("float32")
    y = rng.uniform(0, 5, 16).astype("float32")
    helpers.check_mixed_float16(CoSENTLoss(), x, y, columns=2, dim=8)


def test_matches_sentence_transformers():
    import sentence_transformers.sentence_transformer.losses as st_losses
    import torch
    rng = np.random.default_rng(8)
    labels = np.round(rng.uniform(0, 5, 16), 1).astype("float32")
    pairs = rng.normal(size=(16, 2, 8)).astype("float32")
    peer = st_losses.CoSENTLoss(model=None, scale=20.0)
    expected = peer.compute_loss_from_embeddings(
        [torch.tensor(pairs[:, 0]), torch.tensor(pairs[:, 1])], torch.tensor(labels)
    )
    got = float(keras_cosent.losses.CoSENTLoss(scale=20.0)(labels, pairs))
    np.testing.assert_allclose(got, float(expected), rtol=1e-5)



@pytest.mark.parametrize("dtype,rtol", [("float32", 1e-5), ("float16", 2e-2), ("bfloat16", 5e-2)])
def test_many_ties_change_the_value_if_counted(dtype, rtol):
    # Five label levels, four pairs each: 48 tied ordered pairs whose cosines are
    # spread so that counting a tie as ordered adds exp(20 * (up to 1.6)) terms,
    # which dominate the true value. Half and bfloat16 inputs must still agree with
    # the float64 reference within `rtol` (float16 has ~3 significant digits).
    rng = np.random.default_rng(7)
    labels = np.repeat(np.arange(5, dtype="float32"), 4)
    cosines = np.clip(labels / 5.0 - 0.4 + rng.uniform(-0.4, 0.4, 20), -1, 1)
    cosines = cosines.astype(dtype if dtype != "bfloat16" else "float32")
    expected = reference_cosent(labels, cosines.astype("float64"), 20.0)
    with_ties = math.log1p(
        sum(math.exp(20 * (float(cosines[b]) - float(cosines[a])))
            for a in range(20) for b in range(20) if a != b and labels[a] >= labels[b])
    )
    assert abs(with_ties - expected) > 1.0  # the input really discriminates
    y_pred = keras.ops.cast(cosines, dtype)
    y_true = keras.ops.cast(labels, dtype)
    got = float(keras.ops.convert_to_numpy(keras.ops.cast(cosent_loss(y_true, y_pred, scale=20.0), "float32")))
    np.testing.assert_allclose(got, expected, rtol=rtol)


def test_kit(tmp_path):
    """The shared checks (tests/kit.py): value, serialisation, float16 inputs.

    At scale 20 an input rounded to float16 moves a cosine by about 1e-3 and
    a term exp(20 * ...) by about 2%: the float16 tolerance is 5e-2 here.
    """
    rng = np.random.default_rng(7)
    y_pred = rng.normal(size=(12, 2, 16)).astype("float32")
    y_true = make_labels("sts", rng, 12)
    expected = reference_cosent(y_true, reference_cosines(y_pred), 20.0)
    kit.run_loss_test(CoSENTLoss(), y_true, y_pred, expected, mixed_rtol=5e-2)
