"""The sorted (O(B log B)) CoSENT ranking against the B x B matrix formula in float64.

`ranking_loss_from_similarity`, which CoSENTLoss and AnglELoss share, sorts the
batch by label and adds cumulative log-sum-exps instead of building the matrix
of all pair differences. Its value and its gradient must equal the matrix
formula's, with many ties, for batches from 1 to 2048 rows, at scales where a
naive shift by the global maximum would underflow.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_cosent.losses import angle_loss
from keras_cosent.losses import angle_similarity
from keras_cosent.losses.cosent_loss import cumulative_logsumexp
from keras_cosent.losses.cosent_loss import ranking_loss_from_similarity
from tests.losses import helpers


def matrix_reference(labels, similarity, scale):
    """Value and gradient (w.r.t. `similarity`) of the matrix formula, in float64.

    loss = log(1 + sum_{a, b: label_a > label_b} exp(scale * (s_b - s_a)));
    d loss / d s_b = scale * sum_a p_ab and d loss / d s_a = -scale * sum_b p_ab,
    p_ab the share of term (a, b) in 1 + sum.
    """
    labels = np.asarray(labels, "float64").reshape(-1)
    scaled = scale * np.asarray(similarity, "float64")
    ordered = labels[:, None] > labels[None, :]
    with np.errstate(invalid="ignore"):
        log_terms = np.where(ordered, scaled[None, :] - scaled[:, None], -np.inf)
    shift = log_terms.max(initial=0.0)  # at least the 0 of the "1 +"
    terms = np.exp(log_terms - shift)
    total = np.exp(-shift) + terms.sum()
    share = terms / total
    return shift + np.log(total), scale * (share.sum(axis=0) - share.sum(axis=1))


def value_and_grad(labels, similarity, scale):
    return helpers.value_and_grad(
        lambda s: ranking_loss_from_similarity(labels, s, scale=scale),
        np.asarray(similarity, "float32"),
    )


def assert_matches_matrix(labels, similarity, scale, rtol=1e-5):
    value, grad = value_and_grad(labels, similarity, scale)
    expected_value, expected_grad = matrix_reference(labels, similarity, scale)
    np.testing.assert_allclose(value, expected_value, rtol=rtol, atol=1e-7)
    # Each gradient entry is a difference of sums of shares: compared to the
    # largest entry, which float32 rounding moves by about 1e-6 relative.
    tolerance = rtol * max(np.abs(expected_grad).max(), 1e-30)
    np.testing.assert_allclose(grad, expected_grad, rtol=rtol, atol=tolerance)


@pytest.mark.parametrize("batch", [2, 3, 5, 17, 256, 2048])
@pytest.mark.parametrize("levels", [2, 6, None])
def test_value_and_gradient_equal_the_matrix_form(batch, levels):
    # levels=2 and 6: integer labels with many ties; None: STS-like scores
    # with one decimal, ties still frequent at 2048 rows.
    rng = np.random.default_rng(batch * 10 + (levels or 0))
    if levels is None:
        labels = np.round(rng.uniform(0, 5, batch), 1)
    else:
        labels = rng.integers(0, levels, batch)
    labels = labels.astype("float32")
    cosines = rng.uniform(-1, 1, batch).astype("float32")
    assert_matches_matrix(labels, cosines, 20.0)


def test_single_pair_and_all_equal_labels_give_zero_value_and_gradient():
    for batch in (1, 2, 100):
        cosines = np.random.default_rng(batch).uniform(-1, 1, batch).astype("float32")
        value, grad = value_and_grad(np.full(batch, 2.5, "float32"), cosines, 20.0)
        assert value == 0.0 and np.all(grad == 0.0), (batch, value, grad)


@pytest.mark.parametrize("scale,rtol", [(20.0, 1e-5), (100.0, 1e-5), (1000.0, 1e-3)])
def test_cosines_of_plus_and_minus_one_stay_exact(scale, rtol):
    # Extreme cosines at large scales: exp(scale * 2) overflows float32 at
    # scale 45, and the lower-labelled pairs' exp(scale * (s - max s)) underflow
    # to 0, so only log-space prefix sums get the value right. At scale 1000
    # the log-space sums (about 1000) carry float32's 1e-4 absolute rounding,
    # which moves the gradient by 1e-4 relative: the tolerance is 1e-3 there.
    rng = np.random.default_rng(int(scale))
    labels = rng.integers(0, 4, 64).astype("float32")
    cosines = rng.choice([-1.0, 1.0], 64).astype("float32")
    value, grad = value_and_grad(labels, cosines, scale)
    assert np.isfinite(value) and np.all(np.isfinite(grad))
    assert_matches_matrix(labels, cosines, scale, rtol)


def test_prefix_far_below_the_batch_maximum_is_not_lost():
    # The pair below the two label-1 pairs has cosine -0.9; the batch maximum
    # is 1.0. At scale 100, exp(100 * (-0.9 - 1.0)) is 0 in float32, so a
    # cumulative sum shifted by the batch maximum would give the label-1 pair
    # at -1.0 nothing below it; its true term is exp(100 * 0.1) = e**10.
    labels = np.array([0.0, 1.0, 1.0], "float32")
    cosines = np.array([-0.9, 1.0, -1.0], "float32")
    assert matrix_reference(labels, cosines, 100.0)[0] > 9.9
    assert_matches_matrix(labels, cosines, 100.0)


def test_order_of_the_batch_does_not_matter():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 3, 300).astype("float32")
    cosines = rng.uniform(-1, 1, 300).astype("float32")
    value, grad = value_and_grad(labels, cosines, 20.0)
    permutation = rng.permutation(300)
    shuffled_value, shuffled_grad = value_and_grad(labels[permutation], cosines[permutation], 20.0)
    np.testing.assert_allclose(shuffled_value, value, rtol=1e-6)
    np.testing.assert_allclose(shuffled_grad, grad[permutation], rtol=1e-5, atol=1e-9)


def test_angle_loss_ranks_its_own_similarity_at_large_batch():
    # AnglE ranks |cos + imaginary part|, not the cosine: the sorted form must
    # see that similarity (the matrix reference below takes it from NumPy).
    rng = np.random.default_rng(4)
    pairs = rng.normal(size=(1024, 2, 8)).astype("float32")
    labels = rng.integers(0, 5, 1024).astype("float32")
    x, y = pairs[:, 0].astype("float64"), pairs[:, 1].astype("float64")
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    a, b, c, d = x[:, :4], x[:, 4:], y[:, :4], y[:, 4:]
    similarity = np.abs(np.sum(x * y, axis=1) + np.sum(b * c - a * d, axis=1))
    np.testing.assert_allclose(
        ops.convert_to_numpy(angle_similarity(pairs)), similarity, atol=1e-6
    )
    expected, _ = matrix_reference(labels, similarity, 20.0)
    np.testing.assert_allclose(float(angle_loss(labels, pairs)), expected, rtol=1e-5)


@pytest.mark.parametrize("length", [1, 2, 3, 4, 5, 31, 32, 33, 1000])
def test_cumulative_logsumexp_matches_numpy(length):
    x = np.random.default_rng(length).uniform(-200, 200, length).astype("float32")
    got = ops.convert_to_numpy(cumulative_logsumexp(ops.convert_to_tensor(x)))
    expected = np.logaddexp.accumulate(x.astype("float64"))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-5)


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="only TensorFlow traces batches of unknown size (model.fit's graphs)",
)
def test_batch_of_unknown_size_in_a_tensorflow_graph():
    import tensorflow as tf

    spec = tf.TensorSpec([None], tf.float32)
    traced = tf.function(
        lambda labels, cosines: ranking_loss_from_similarity(labels, cosines, scale=20.0),
        input_signature=[spec, spec],
    )
    rng = np.random.default_rng(5)
    for batch in (1, 2, 7, 300):
        labels = rng.integers(0, 3, batch).astype("float32")
        cosines = rng.uniform(-1, 1, batch).astype("float32")
        expected, _ = matrix_reference(labels, cosines, 20.0)
        np.testing.assert_allclose(float(traced(labels, cosines)), expected, rtol=1e-5)
