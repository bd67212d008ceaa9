"""Losses that compare labels, and the composite losses, on bad labels and shapes.

Each case was a silent wrong result or a backend's own error before its check:
a NaN class, group or threshold label read as "no match" and gave a finite
loss; `JointLoss` thresholds flattened a (2, 2) label matrix onto 4 rows;
`MultiTaskLoss` indexed labels without the task column; a momentum queue of
the wrong shape failed inside a matrix product.
"""

import re

import keras
import numpy as np
import pytest

from keras_cosent.losses import CoSENTLoss
from keras_cosent.losses import InfoNCELoss
from keras_cosent.losses import JointLoss
from keras_cosent.losses import MatryoshkaLoss
from keras_cosent.losses import MultiTaskLoss
from keras_cosent.losses import SupConLoss
from keras_cosent.losses import TripletLoss
from keras_cosent.losses.matryoshka_loss import matryoshka_loss

RNG = np.random.default_rng(0)
PAIRS = RNG.normal(size=(4, 2, 8)).astype("float32")
ROWS = RNG.normal(size=(4, 8)).astype("float32")


def _threshold_loss():
    return JointLoss([InfoNCELoss()], positive_above=[0.5])


@pytest.mark.parametrize("make_loss, y_pred", [
    (SupConLoss, ROWS),
    (lambda: TripletLoss(mining="batch_hard"), ROWS),
    (lambda: InfoNCELoss(mask_false_negatives=True), PAIRS),
    (_threshold_loss, PAIRS),
])
def test_a_nan_label_gives_nan_as_cosent_does(make_loss, y_pred):
    loss = make_loss()
    with_labels = float(loss(np.array([0.0, 1.0, 1.0, 0.0], "float32"), y_pred))
    assert np.isfinite(with_labels)
    assert np.isnan(float(loss(np.array([0.0, np.nan, 1.0, 0.0], "float32"), y_pred)))
    assert np.isnan(float(CoSENTLoss()(np.array([0.0, np.nan, 1.0, 0.0], "float32"), PAIRS)))
    # Integer labels cannot be NaN and are compared as before.
    assert float(loss(np.array([0, 1, 1, 0]), y_pred)) == pytest.approx(with_labels, rel=1e-6)


def test_batch_hard_triplet_of_an_empty_batch_is_zero():
    # No anchors, so none with a positive: 0, as the docstring and SupCon say.
    empty_labels, empty_rows = np.zeros((0,), "float32"), np.zeros((0, 8), "float32")
    assert float(TripletLoss(mining="batch_hard")(empty_labels, empty_rows)) == 0.0
    assert float(SupConLoss()(empty_labels, empty_rows)) == 0.0


@pytest.mark.parametrize("labels, match", [
    (np.array([[0.0, 1.0], [2.0, 1.0]]), r"should have shape \(batch,\) or \(batch, 1\). "
                                         r"Received shape \(2, 2\)"),
    (np.array([0.0, 1.0, 2.0, 1.0, 0.0]), r"`y_true` of shape \(5,\) does not match 4 rows"),
])
def test_joint_loss_thresholds_need_one_label_per_row(labels, match):
    with pytest.raises(ValueError, match=r"`JointLoss\(positive_above=...\)` expects one "
                                         r"label per row.*" + match):
        _threshold_loss()(labels.astype("float32"), PAIRS)


@pytest.mark.parametrize("labels", [np.zeros(4), np.zeros((4, 3)), np.zeros((4, 2, 1))])
def test_multi_task_loss_needs_labels_and_the_task_index(labels):
    loss = MultiTaskLoss([CoSENTLoss()], ["sts"], [2])
    with pytest.raises(ValueError, match=r"`MultiTaskLoss` expects `y_true` of shape \(batch, 2\)"
                                         rf".*Received shape {re.escape(str(labels.shape))}"):
        loss(labels.astype("float32"), PAIRS)


@pytest.mark.parametrize("names, columns, argument", [
    ("ab", [2, 3], "names"),  # split into one-letter names before
    (["sts", "nli"], None, "columns"),  # "'NoneType' object is not iterable"
    (["sts", "nli"], 2, "columns"),
])
def test_multi_task_loss_takes_lists_of_names_and_columns(names, columns, argument):
    with pytest.raises(ValueError, match=rf"`{argument}` should be a list with one entry per "
                                         r"loss \(2\)"):
        MultiTaskLoss([CoSENTLoss(), TripletLoss()], names, columns)


@pytest.mark.parametrize("queue, mask, match", [
    (RNG.normal(size=(5, 4)), None, r"`queue` should have shape \(size, 8\).*Received shape "
                                    r"\(5, 4\)"),
    (RNG.normal(size=(5, 8)), np.ones(3), r"`queue_mask` should have shape \(5,\).*Received "
                                          r"shape \(3,\)"),
    (RNG.normal(size=(5, 8)), np.ones((5, 1)), r"`queue_mask` should have shape \(5,\)"),
])
def test_infonce_queue_shapes_are_named(queue, mask, match):
    y_pred = {"embeddings": PAIRS, "queue": queue.astype("float32")}
    if mask is not None:
        y_pred["queue_mask"] = mask.astype("float32")
    with pytest.raises(ValueError, match=match):
        InfoNCELoss()(None, y_pred)


def test_matryoshka_refuses_the_momentum_queue_form():
    y_pred = {"embeddings": PAIRS, "queue": PAIRS[:, 0]}
    assert np.isfinite(float(InfoNCELoss()(None, y_pred)))
    with pytest.raises(ValueError, match="`MatryoshkaLoss` takes `y_pred` as an array"):
        MatryoshkaLoss(InfoNCELoss(), dims=(8, 4))(None, y_pred)


def test_matryoshka_function_slices_half_precision_in_float32():
    # The slice was re-normalised in bfloat16, 4.5e-4 off the class's value.
    labels = np.array([0.0, 1.0, 2.0, 3.0], "float32")
    embeddings = RNG.normal(size=(4, 2, 16)).astype("float32")
    half = keras.ops.cast(embeddings, "bfloat16")
    exact = keras.ops.cast(half, "float32")  # the same values, held in float32
    got = float(matryoshka_loss(labels, half, CoSENTLoss(), (16, 8)))
    assert got == pytest.approx(float(matryoshka_loss(labels, exact, CoSENTLoss(), (16, 8))),
                                rel=1e-6)
    assert got == pytest.approx(float(MatryoshkaLoss(CoSENTLoss(), dims=(16, 8))(labels, half)),
                                rel=1e-6)
