"""How `sample_weight` weighs each loss (README, "Using the library"), against NumPy.

A loss of one value per row divides the weighted sum of its rows by the batch
size (`reduction="mean_with_sample_weight"`: by the weights' sum); a loss of one
value per batch is rescaled by the weights' mean.
"""

import re

import keras
import numpy as np
import pytest

import keras_cosent
from tests.losses.test_angle_loss import reference_angle_similarity
from tests.losses.test_angle_loss import reference_ranking
from tests.losses.test_cosent_loss import reference_cosent
from tests.losses.test_cosent_loss import reference_cosines
from tests.losses.test_cosine_mse_loss import reference_cosine_mse
from tests.losses.test_infonce_loss import reference_infonce
from tests.losses.test_supcon_loss import reference as reference_supcon
from tests.losses.test_triplet_loss import reference as reference_triplet

WEIGHTS = np.array([2.0, 0.0, 1.0, 0.5, 0.0, 3.0], "float32")
SCORES = np.array([0.1, 0.9, 0.4, 0.0, 1.0, 0.7], "float32")
CLASSES = np.array([0, 1, 0, 2, 1, 0], "int32")


def _rows(columns):
    return np.random.default_rng(7).normal(size=(6, columns, 8))


def _per_row(name):
    """The loss, its labels, its rows and each row's reference value."""
    if name == "infonce":
        rows = _rows(2)
        return (keras_cosent.losses.InfoNCELoss, np.arange(6, dtype="float32"), rows,
                reference_infonce(np.arange(6), rows, 0.05, False, False))
    if name == "triplet":
        rows = _rows(3)
        return (keras_cosent.losses.TripletLoss, np.zeros(6, "float32"), rows,
                np.array([reference_triplet(rows[i : i + 1], 0.5, "cosine") for i in range(6)]))
    rows = _rows(2)
    return (keras_cosent.losses.CosineMSELoss, SCORES, rows,
            reference_cosine_mse(SCORES, rows, 0.0, 1.0))


@pytest.mark.parametrize("name", ["infonce", "triplet", "cosine-mse"])
@pytest.mark.parametrize("reduction", ["sum_over_batch_size", "mean_with_sample_weight"])
def test_a_loss_of_one_value_per_row_weighs_its_rows(name, reduction):
    loss_class, labels, rows, per_row = _per_row(name)
    got = loss_class(reduction=reduction)(labels, rows.astype("float32"), sample_weight=WEIGHTS)
    divisor = 6 if reduction == "sum_over_batch_size" else WEIGHTS.sum()
    np.testing.assert_allclose(float(got), np.sum(per_row * WEIGHTS) / divisor, rtol=1e-5)


@pytest.mark.parametrize("name", ["cosent", "angle", "supcon"])
def test_a_loss_of_one_value_per_batch_is_rescaled_by_the_mean_weight(name):
    rows = _rows(2)
    labels = SCORES * 5
    if name == "cosent":
        loss, expected = (keras_cosent.losses.CoSENTLoss(),
                          reference_cosent(labels, reference_cosines(rows), 20.0))
    elif name == "angle":
        loss, expected = (keras_cosent.losses.AnglELoss(scale=20.0),
                          reference_ranking(labels, reference_angle_similarity(rows), 20.0))
    else:
        rows, labels = rows[:, 0], CLASSES
        loss, expected = keras_cosent.losses.SupConLoss(temperature=0.1), reference_supcon(
            CLASSES, rows, 0.1)
    got = loss(labels, rows.astype("float32"), sample_weight=WEIGHTS)
    np.testing.assert_allclose(float(got), expected * WEIGHTS.mean(), rtol=1e-5)


@pytest.mark.parametrize("weights", [[2.0, 2.0, 2.0], np.full(7, 3.0), np.full((6, 2), 2.0)],
                         ids=["short", "long", "two-per-row"])
@pytest.mark.parametrize("name", ["cosent", "infonce", "joint"])
def test_weights_that_are_not_one_per_row_are_refused_naming_the_loss(name, weights):
    # A loss of one value per batch took any number of weights (their mean
    # rescaled it); a loss of one per row failed with the backend's own message.
    rows = _rows(2).astype("float32")
    loss = {"cosent": keras_cosent.losses.CoSENTLoss(),
            "infonce": keras_cosent.losses.InfoNCELoss(),
            "joint": keras_cosent.losses.JointLoss([keras_cosent.losses.InfoNCELoss(),
                                                    keras_cosent.losses.CoSENTLoss()])}[name]
    shape = np.shape(weights)
    with pytest.raises(ValueError, match=re.escape(
            f"`{type(loss).__name__}` takes one `sample_weight` per row of `y_pred` (6): "
            f"shape (batch,) or (batch, 1). Received shape {shape}.")):
        loss(SCORES, rows, sample_weight=weights)
    for accepted in (np.ones(6), np.ones((6, 1)), 2.0):
        assert np.isfinite(float(loss(SCORES, rows, sample_weight=accepted)))


class _OneBatch(keras.utils.PyDataset):
    """One batch of 6 pairs with `labels` labels and, as README's wrapper adds
    them, `weights` weights (none when None)."""

    def __init__(self, labels=6, weights=None):
        super().__init__()
        self.labels, self.weights = labels, weights

    def __len__(self):
        return 1

    def __getitem__(self, index):
        batch = (_rows(2).astype("float32"), np.resize(SCORES * 5, self.labels))
        if self.weights is None:
            return batch
        return (*batch, np.linspace(0.5, 2.0, self.weights).astype("float32"))


def _assert_fit_refuses(loss, good, bad, scope, message, jit_compile="auto"):
    """`fit` trains on `good` and fails on `bad`: on TensorFlow, whose `fit` traces
    with an unknown batch size, at a node of name scope `scope`; on JAX and
    PyTorch, which trace known shapes, with the ValueError `message`."""
    inputs = keras.Input((2, 8))
    model = keras.Model(inputs, keras.layers.Dense(8)(inputs))
    model.compile(optimizer="sgd", loss=loss, jit_compile=jit_compile)
    model.fit(good, epochs=1, verbose=0)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        expected = (tf.errors.InvalidArgumentError, f"{type(loss).__name__}_{scope}")
    else:
        expected = (ValueError, re.escape(f"`{type(loss).__name__}` {message}"))
    with pytest.raises(expected[0], match=expected[1]):
        model.fit(bad, epochs=1, verbose=0)


# On PyTorch `jit_compile=True` is `torch.compile`, which keras-cosent never turns on
# and whose first compilation here takes most of a minute: run there with `-m slow`.
_COMPILED = pytest.param(True, id="xla", marks=[pytest.mark.slow] * (
    keras.backend.backend() == "torch"))


@pytest.mark.parametrize("jit_compile", [pytest.param(False, id="graph"), _COMPILED])
@pytest.mark.parametrize("name", ["cosent", "infonce", "joint"])
def test_fit_refuses_weights_that_are_not_one_per_row(name, jit_compile):
    # TensorFlow's `fit` traces with an unknown batch size, where the shape
    # check cannot compare: a loss of one value per batch took 7 weights for 6
    # rows (their mean rescaled it), one of a value per row failed without
    # naming the loss.
    loss = {"cosent": keras_cosent.losses.CoSENTLoss(),
            "infonce": keras_cosent.losses.InfoNCELoss(),
            "joint": keras_cosent.losses.JointLoss([keras_cosent.losses.InfoNCELoss(),
                                                    keras_cosent.losses.CoSENTLoss()])}[name]
    _assert_fit_refuses(loss, _OneBatch(weights=6), _OneBatch(weights=7),
                        "takes_one_sample_weight_per_row_of_y_pred",
                        "takes one `sample_weight`", jit_compile)


@pytest.mark.parametrize("count", [5, 7])
@pytest.mark.parametrize("name", ["cosent", "angle"])
def test_fit_refuses_labels_that_are_not_one_per_pair(name, count):
    # As for the weights: with one label too few, TensorFlow's `fit` ranked
    # the first 5 pairs and trained on.
    loss = {"cosent": keras_cosent.losses.CoSENTLoss(),
            "angle": keras_cosent.losses.AnglELoss()}[name]
    _assert_fit_refuses(loss, _OneBatch(), _OneBatch(labels=count),
                        "expects_one_label_per_pair", "expects one label per pair")
