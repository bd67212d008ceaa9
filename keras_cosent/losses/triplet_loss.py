"""Triplet loss, on given triplets or batch-hard mined from class labels.

`triplet_loss` holds the maths; `TripletLoss` wraps it as a `keras.losses.Loss`.
"""

from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.losses._validation import LabelsCheckedLoss
from keras_cosent.losses._validation import check_non_negative_float
from keras_cosent.losses._validation import check_one_of
from keras_cosent.losses._validation import flat_labels
from keras_cosent.losses._validation import nan_if_unlabelled
from keras_cosent.utils.similarity import l2_normalize
from keras_cosent.utils.similarity import similarity_matrix

DISTANCES = ("cosine", "euclidean")
MININGS = (None, "batch_hard")


def _safe_sqrt(x):
    # sqrt has an infinite derivative at 0: take it only where x > 0.
    positive = x > 0
    return ops.where(positive, ops.sqrt(ops.where(positive, x, ops.ones_like(x))), 0.0)


def _check_arguments(margin, distance, mining):
    """The checked `(margin, distance, mining)`, for the class and the function."""
    return (
        check_non_negative_float("margin", margin),
        check_one_of("distance", distance, DISTANCES),
        check_one_of("mining", mining, MININGS),
    )


def _pair_distance(a, b, distance):
    if distance == "cosine":
        return 1.0 - ops.sum(l2_normalize(a) * l2_normalize(b), axis=-1)
    return _safe_sqrt(ops.sum(ops.square(a - b), axis=-1))


def _distance_matrix(x, distance):
    if distance == "cosine":
        z = l2_normalize(x)
        return 1.0 - similarity_matrix(z, z)
    diff = x[:, None, :] - x[None, :, :]
    return _safe_sqrt(ops.sum(ops.square(diff), axis=-1))


def triplet_loss(y_true, y_pred, margin=0.5, distance="cosine", mining=None):
    """Triplet loss: `(batch,)` per row, or a scalar with batch-hard mining.

    See `keras_cosent.losses.TripletLoss` for the arguments, checked as the
    class checks them; `y_true` may be None unless `mining="batch_hard"`.
    """
    margin, distance, mining = _check_arguments(margin, distance, mining)
    y_pred = ops.cast(ops.convert_to_tensor(y_pred), "float32")
    shape = tuple(y_pred.shape)
    if mining is None:
        if len(shape) != 3 or (shape[1] is not None and shape[1] != 3):
            raise ValueError(
                "`TripletLoss` expects `y_pred` of shape (batch, 3, dim): anchor, "
                f"positive, negative. Received shape {shape}."
            )
        a, p, n = y_pred[:, 0, :], y_pred[:, 1, :], y_pred[:, 2, :]
        return ops.relu(
            _pair_distance(a, p, distance) - _pair_distance(a, n, distance) + margin
        )
    if len(shape) not in (2, 3):
        raise ValueError(
            "`TripletLoss(mining='batch_hard')` expects `y_pred` of shape "
            "(batch, dim) or (batch, views, dim) with class labels in `y_true`. "
            f"Received shape {shape}."
        )
    labels = flat_labels(y_true, y_pred, "TripletLoss(mining='batch_hard')", rows="rows")
    if shape[0] == 0:
        # No anchors: 0, as for anchors without a positive (Keras refuses to
        # reduce an empty tensor with max or min).
        return ops.sum(y_pred) * 0.0
    if len(shape) == 3:
        # Views flattened, each with its row's label, as SupCon takes them.
        labels = ops.repeat(labels, ops.shape(y_pred)[1])
        y_pred = ops.reshape(y_pred, (-1, ops.shape(y_pred)[-1]))
    d = _distance_matrix(y_pred, distance)
    count = ops.shape(d)[0]
    ids = ops.arange(count)
    not_self = ids[:, None] != ids[None, :]
    same = labels[:, None] == labels[None, :]
    pos = ops.logical_and(same, not_self)
    neg = ops.logical_not(same)
    hardest_pos = ops.max(ops.where(pos, d, ops.full_like(d, float("-inf"))), axis=-1)
    nearest_neg = ops.min(ops.where(neg, d, ops.full_like(d, float("inf"))), axis=-1)
    valid = ops.logical_and(ops.any(pos, axis=-1), ops.any(neg, axis=-1))
    per = ops.relu(
        ops.where(valid, hardest_pos, 0.0) - ops.where(valid, nearest_neg, 0.0) + margin
    )
    per = ops.where(valid, per, 0.0)
    return nan_if_unlabelled(
        ops.sum(per) / ops.maximum(ops.sum(ops.cast(valid, "float32")), 1.0), labels
    )


@keras_cosent_export
class TripletLoss(LabelsCheckedLoss):
    """Triplet loss: the anchor must be nearer its positive than its negative.

    With `mining=None`, `y_pred` is `(batch, 3, dim)` (anchor, positive,
    negative) and each row's loss is `max(0, d(a, p) - d(a, n) + margin)`;
    `y_true` is ignored (None is accepted). With `mining="batch_hard"`,
    `y_pred` is `(batch, dim)` or `(batch, views, dim)` (views flattened,
    each with its row's label, as `SupConLoss` takes them; `keras-cosent
    train --loss batch-hard-triplet`), `y_true` holds integer class labels
    (required), and each anchor uses
    its farthest positive (same label, other row) and nearest negative (other
    label) in the batch. Anchors with no positive or no negative in the batch
    are excluded; the result is the mean over the remaining anchors (a
    scalar), 0 if there are none. That scalar is not per row, so Keras scales
    it by the mean `sample_weight`: a row weighted 0 still serves as an
    anchor, a positive and a negative (as in `SupConLoss`). Given triplets
    are per row and weighted as Keras weighs rows.

    `distance="cosine"` is `1 - cos`; `"euclidean"` is the L2 distance of the
    raw (not normalised) embeddings, with a zero gradient at distance 0.

    Args:
        margin: finite float >= 0. Defaults to 0.5.
        distance: `"cosine"` or `"euclidean"`.
        mining: `None` or `"batch_hard"`.
        name: name of the loss instance.
        reduction: Keras reduction.

    Inputs:
        y_true: ignored (`mining=None`; None is accepted) or class labels
            `(batch,)` (`mining="batch_hard"`; None raises a `ValueError`).
        y_pred: `(batch, 3, dim)` or, batch-hard, `(batch, dim)` or
            `(batch, views, dim)`.

    Returns:
        Float32 `(batch,)` losses, or a scalar with `mining="batch_hard"`.

    Example:

    >>> import numpy as np
    >>> import keras_cosent
    >>> loss = keras_cosent.losses.TripletLoss(margin=0.5)
    >>> a = np.eye(2, 4, dtype="float32")
    >>> float(loss(np.zeros(2), np.stack([a, a, -a], axis=1)))
    0.0

    Reference:
        Schroff et al., "FaceNet" (2015), https://arxiv.org/abs/1503.03832 ;
        Hermans et al., "In Defense of the Triplet Loss" (2017),
        https://arxiv.org/abs/1703.07737
    """

    def __init__(
        self,
        margin=0.5,
        distance="cosine",
        mining=None,
        name="triplet_loss",
        reduction="sum_over_batch_size",
    ):
        super().__init__(name=name, reduction=reduction)
        self.margin, self.distance, self.mining = _check_arguments(margin, distance, mining)

    def labels_read(self):
        needs = None if self.mining is None else "class labels"
        return "TripletLoss(mining='batch_hard')", needs

    def call(self, y_true, y_pred):
        return triplet_loss(
            y_true, y_pred, margin=self.margin, distance=self.distance, mining=self.mining
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {"margin": self.margin, "distance": self.distance, "mining": self.mining}
        )
        return config
