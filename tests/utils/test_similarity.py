"""`l2_normalize`, `pair_cosine` and `similarity_matrix` against NumPy, including the all-zero vector."""

import re

import keras
import numpy as np
import pytest

from keras_cosent.losses import CoSENTLoss
from keras_cosent.losses import InfoNCELoss
from keras_cosent.losses.infonce_loss import infonce_loss
from keras_cosent.losses.ntxent_loss import ntxent_loss
from keras_cosent.losses.supcon_loss import supcon_loss
from keras_cosent.losses.triplet_loss import triplet_loss
from keras_cosent.utils import l2_normalize
from keras_cosent.utils import pair_cosine
from keras_cosent.utils import similarity_matrix
from tests.losses.helpers import assert_finite_value_and_grad


def test_l2_normalize_matches_numpy():
    x = np.random.default_rng(0).standard_normal((5, 7)).astype("float32")
    expected = x / np.linalg.norm(x, axis=-1, keepdims=True)
    got = keras.ops.convert_to_numpy(l2_normalize(x))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


def test_l2_normalize_floors_the_norm_not_its_square():
    # x / max(||x||, epsilon), torch.nn.functional.normalize's rule: vectors far
    # shorter than 1e-6 still come out unit length, and parallel ones have cosine 1.
    x = np.array([[1e-7, 0.0], [3e-7, 4e-7], [0.0, 0.0], [3e-13, 4e-13]], "float32")
    norms = np.linalg.norm(x.astype("float64"), axis=-1, keepdims=True)
    expected = x / np.maximum(norms, 1e-12)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(l2_normalize(x)), expected,
                               rtol=1e-6, atol=1e-7)
    parallel = np.array([[[1e-7, 0.0], [2e-7, 0.0]]], "float32")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(pair_cosine(parallel)), [1.0],
                               rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_l2_normalize_keeps_half_precision_inputs_finite(dtype):
    # float16 squares overflow past 256 and 1e-24 rounds to 0 in it: computed in float32.
    x = keras.ops.cast(np.array([[300.0, 400.0], [0.0, 0.0], [1e-3, 0.0]], "float32"), dtype)
    got = l2_normalize(x)
    assert keras.backend.standardize_dtype(got.dtype) == dtype
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(keras.ops.cast(got, "float32")),
        [[0.6, 0.8], [0.0, 0.0], [1.0, 0.0]], atol=4e-3)


def test_pair_cosine_matches_numpy_for_both_input_forms():
    emb = np.random.default_rng(1).standard_normal((6, 2, 4)).astype("float32")
    a, b = emb[:, 0], emb[:, 1]
    expected = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    got = keras.ops.convert_to_numpy(pair_cosine(emb))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    passthrough = keras.ops.convert_to_numpy(pair_cosine(expected.astype("float32")))
    np.testing.assert_allclose(passthrough, expected, rtol=1e-6)


def test_a_pair_of_equal_embeddings_scores_exactly_one():
    # One sentence on both sides: a.a of a normalised float32 vector rounds to either
    # side of 1 (by backend), which ranked such pairs, tied in truth, at random.
    vectors = np.random.default_rng(2).standard_normal((64, 384)).astype("float32")
    unit = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    assert np.any(np.sum(unit * unit, axis=-1) != 1.0)  # the rounding this is about
    pairs = np.stack([vectors, vectors], axis=1)
    assert np.all(keras.ops.convert_to_numpy(pair_cosine(pairs)) == 1.0)
    # Others are a.b as before, and a zero embedding keeps its 0.
    mixed = np.stack([vectors[:3], np.concatenate([vectors[3:5], [np.zeros(384)]])], axis=1)
    mixed = np.concatenate([mixed, np.zeros((1, 2, 384), "float32")]).astype("float32")
    got = keras.ops.convert_to_numpy(pair_cosine(mixed))
    np.testing.assert_allclose(got[:2], np.sum(unit[:2] * unit[3:5], axis=-1), atol=1e-6)
    assert got[2] == 0.0 and got[3] == 0.0


def test_similarity_matrix_matches_numpy():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((5, 7)).astype("float32")
    b = rng.standard_normal((3, 7)).astype("float32")
    got = keras.ops.convert_to_numpy(similarity_matrix(a, b))
    np.testing.assert_allclose(got, a.astype("float64") @ b.T.astype("float64"),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_similarity_matrix_multiplies_half_precision_inputs_in_float32(dtype):
    # In their own dtype, rows of norm 500 gave inf (250000 > float16's 65504) and
    # unit rows lost digits (5e-5 off at dim 384).
    big = keras.ops.cast(np.array([[300.0, 400.0]], "float32"), dtype)
    got = keras.ops.convert_to_numpy(similarity_matrix(big, big))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [[250000.0]], rtol=1e-6)
    rng = np.random.default_rng(0)
    unit = rng.normal(size=(4, 384))
    unit = keras.ops.cast(unit / np.linalg.norm(unit, axis=1, keepdims=True), dtype)
    rows = keras.ops.convert_to_numpy(keras.ops.cast(unit, "float32")).astype("float64")
    got = keras.ops.convert_to_numpy(similarity_matrix(unit, unit))
    np.testing.assert_allclose(got, rows @ rows.T, atol=1e-6)


@pytest.mark.parametrize("a_shape, b_shape", [((5, 7), (3, 6)), ((2, 5, 7), (3, 7)), ((), (3, 7))])
def test_similarity_matrix_names_the_shapes_it_cannot_multiply(a_shape, b_shape):
    with pytest.raises(ValueError, match=re.escape(f"Received shapes {a_shape} and {b_shape}")):
        similarity_matrix(np.ones(a_shape, "float32"), np.ones(b_shape, "float32"))


# Every matrix product of these losses, value and gradient, is a score product.
SCORE_LOSSES = {
    "infonce-symmetric-hard-negatives": (
        lambda y, p: infonce_loss(y, p, symmetric=True, mask_false_negatives=True), (6, 3, 8)),
    "infonce-queue": (lambda y, p: infonce_loss(y, p, queue=np.ones((4, 8), "float32")),
                      (6, 2, 8)),
    "ntxent": (ntxent_loss, (6, 2, 8)),
    "supcon": (supcon_loss, (6, 2, 8)),
    "triplet-batch-hard": (lambda y, p: triplet_loss(y, p, mining="batch_hard"), (6, 8)),
}


@pytest.mark.skipif(
    keras.backend.backend() != "jax",
    reason="JAX's matmul precision setting; PyTorch multiplies float32 in float32 unless "
           "told otherwise and TensorFlow has no per-product setting (similarity_matrix)")
@pytest.mark.parametrize("name", list(SCORE_LOSSES))
def test_compiled_score_products_ask_jax_for_float32_precision(name):
    # On Ampere and later GPUs a DEFAULT-precision float32 product is TensorFloat-32;
    # the lowered program says which precision each product asks for, on any device.
    import jax

    loss, shape = SCORE_LOSSES[name]
    rng = np.random.default_rng(3)
    y_pred = rng.standard_normal(shape).astype("float32")
    y_true = np.array([0, 0, 1, 1, 2, 2], "float32")
    step = jax.jit(jax.value_and_grad(lambda p: keras.ops.sum(loss(y_true, p))))
    text = step.lower(y_pred).as_text()
    products = [line for line in text.splitlines() if "dot_general" in line]
    assert len(products) >= 2, text  # the scores and their gradient
    precisions = [re.search(r"precision = \[(\w+), (\w+)\]", line) for line in products]
    assert all(p is not None and p.groups() == ("HIGHEST", "HIGHEST") for p in precisions), products


def test_pair_cosine_rejects_wrong_rank():
    with pytest.raises(ValueError, match=r"\(batch, 2, dim\)"):
        pair_cosine(np.zeros((2, 2, 2, 2), "float32"))


def test_zero_vector_has_finite_value_and_gradient():
    # ops.normalize gives NaN gradients here on JAX and PyTorch.
    x = np.zeros((2, 3), "float32")
    x[1] = [1.0, 2.0, 2.0]
    value, grad = assert_finite_value_and_grad(
        lambda t: keras.ops.sum(l2_normalize(t) * keras.ops.convert_to_tensor([1.0, 2.0, 3.0])), x
    )
    np.testing.assert_allclose(value, (1 + 4 + 6) / 3, rtol=1e-6)


@pytest.mark.parametrize("loss", [CoSENTLoss(), InfoNCELoss()], ids=["cosent", "infonce"])
def test_losses_survive_an_all_zero_embedding(loss):
    emb = np.random.default_rng(2).standard_normal((4, 2, 8)).astype("float32")
    emb[0, 0] = 0.0
    labels = np.array([0.0, 1.0, 2.0, 3.0], "float32")
    assert_finite_value_and_grad(lambda t: loss(labels, t), emb)
