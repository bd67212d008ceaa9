"""`MultiTaskLoss` applies the batch's own task's loss, against the NumPy references."""

import keras
import numpy as np
import pytest

import keras_cosent
from tests.losses.helpers import assert_finite_value_and_grad
from tests.losses.helpers import value_and_grad
from tests.losses.test_cosent_loss import reference_cosent
from tests.losses.test_cosent_loss import reference_cosines
from tests.losses.test_triplet_loss import reference as reference_triplet


def make_loss():
    return keras_cosent.losses.MultiTaskLoss(
        [keras_cosent.losses.CoSENTLoss(scale=20.0), keras_cosent.losses.TripletLoss(margin=0.5)],
        names=["sts", "nli"], columns=[2, 3],
    )


def y_of(labels, task):
    return np.stack([labels, np.full(len(labels), task)], axis=1).astype("float32")


@pytest.mark.parametrize("task", [0, 1])
def test_each_task_gets_its_own_loss(task):
    rng = np.random.default_rng(task)
    labels = rng.uniform(0, 5, size=6).astype("float32")
    embeddings = rng.normal(size=(6, [2, 3][task], 8)).astype("float32")
    value = float(make_loss()(y_of(labels, task), embeddings))
    if task == 0:
        expected = reference_cosent(labels, reference_cosines(embeddings.astype("float64")), 20.0)
    else:
        expected = reference_triplet(embeddings.astype("float64"), 0.5, "cosine")
    np.testing.assert_allclose(value, expected, rtol=1e-5)


def test_sample_weight_reaches_the_task_loss_rows():
    # Triplet weighs each row: sum(loss_i * w_i) / batch. The weights used to
    # scale the task's scalar by their mean instead.
    rng = np.random.default_rng(4)
    rows = rng.normal(size=(6, 3, 8))
    weights = np.array([2.0, 0.0, 1.0, 0.0, 0.0, 1.0], "float32")
    per_row = np.array([reference_triplet(rows[i : i + 1], 0.5, "cosine") for i in range(6)])
    got = make_loss()(y_of(np.zeros(6), 1), rows.astype("float32"), sample_weight=weights)
    np.testing.assert_allclose(float(got), np.sum(per_row * weights) / 6, rtol=1e-5)


@pytest.mark.parametrize("task", [0, 1])
def test_the_gradient_is_the_task_losses_own(task):
    # The other task's loss, computed on the padded columns on TensorFlow, must add
    # nothing; the gradient is finite even at identical embeddings (cosine 1).
    rng = np.random.default_rng(3)
    columns = [2, 3][task]
    embeddings = rng.normal(size=(4, columns, 8)).astype("float32")
    embeddings[0, 1] = embeddings[0, 0]
    labels = np.array([4.0, 1.0, 3.0, 0.5], "float32")
    direct = make_loss().losses[task]
    value, grad = assert_finite_value_and_grad(
        lambda e: make_loss()(y_of(labels, task), e), embeddings)
    expected_value, expected_grad = value_and_grad(lambda e: direct(labels, e), embeddings)
    np.testing.assert_allclose(value, expected_value, rtol=1e-5)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("task", [2, -1])
def test_a_task_index_out_of_range_gives_nan_on_every_backend(task):
    # ops.switch alone clamps it to a real task on JAX and PyTorch; TensorFlow gave 0.
    embeddings = np.random.default_rng(0).normal(size=(4, 3, 8)).astype("float32")
    assert np.isnan(float(make_loss()(y_of(np.ones(4, "float32"), task), embeddings)))


@pytest.mark.parametrize("indices", [[0.7] * 4, [1.9] * 4, [-0.5] * 4, [0, 1, 0, 1]])
def test_a_task_index_that_is_not_one_whole_number_gives_nan(indices):
    # The int32 cast truncated 0.7 to task 0 and 1.9 to task 1, and only row 0's
    # index was read (probe).
    embeddings = np.random.default_rng(0).normal(size=(4, 3, 8)).astype("float32")
    y = np.stack([np.ones(4), indices], axis=1).astype("float32")
    assert np.isnan(float(make_loss()(y, embeddings)))


def test_a_batch_narrower_than_its_task_gives_nan_and_than_every_task_an_error():
    # Its missing columns were copies of column 0: a triplet loss of (a, p, a)
    # returned a number (probe).
    rng = np.random.default_rng(0)
    pairs = rng.normal(size=(4, 2, 8)).astype("float32")
    assert np.isnan(float(make_loss()(y_of(np.ones(4), 1), pairs)))
    with pytest.raises(ValueError, match=r"at least the 2 columns of its narrowest task "
                                         r"\(`columns`=\[2, 3\]\). Received shape \(4, 1, 8\)"):
        make_loss()(y_of(np.ones(4), 0), pairs[:, :1])


def test_serialization_round_trips():
    loss = make_loss()
    restored = keras.losses.deserialize(keras.losses.serialize(loss))
    assert restored.names == ("sts", "nli") and restored.columns == (2, 3)
    assert restored.losses[1].margin == 0.5


@pytest.mark.parametrize("kwargs, match", [
    ({"names": ["a"]}, "`names` should be a list with one entry per loss"),
    ({"names": ["a", "a"]}, "`names` should be distinct"),
    ({"columns": [2, 0]}, "`columns` should hold positive ints"),
    ({"losses": []}, "non-empty list"),
])
def test_bad_arguments_are_named(kwargs, match):
    arguments = {"losses": [keras_cosent.losses.CoSENTLoss(), keras_cosent.losses.TripletLoss()],
                 "names": ["a", "b"], "columns": [2, 3], **kwargs}
    with pytest.raises(ValueError, match=match):
        keras_cosent.losses.MultiTaskLoss(**arguments)
