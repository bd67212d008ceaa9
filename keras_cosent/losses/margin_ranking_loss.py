"""Margin ranking of a query's positive above each of its negatives.

`margin_ranking_loss` holds the maths; `MarginRankingLoss` wraps it.
"""

from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.losses._validation import LabelsCheckedLoss
from keras_cosent.losses._validation import check_non_negative_float
from keras_cosent.losses._validation import check_one_of
from keras_cosent.losses._validation import check_positive_float
from keras_cosent.utils.similarity import l2_normalize

FORMS = ("hinge", "logistic")


def _check_arguments(margin, form, scale):
    """The checked `(margin, form, scale)`, for the class and the function."""
    return (
        check_non_negative_float("margin", margin),
        check_one_of("form", form, FORMS),
        check_positive_float("scale", scale),
    )


def margin_ranking_loss(y_true, y_pred, margin=0.2, form="hinge", scale=20.0):
    """Loss of each query averaged over its negatives, float32 `(batch,)`.

    See `keras_cosent.losses.MarginRankingLoss` for the arguments, checked as
    the class checks them; `y_true` is ignored and may be None.
    """
    del y_true
    margin, form, scale = _check_arguments(margin, form, scale)
    y_pred = ops.cast(ops.convert_to_tensor(y_pred), "float32")
    shape = tuple(y_pred.shape)
    if len(shape) != 3 or (shape[1] is not None and shape[1] < 3):
        raise ValueError(
            "`MarginRankingLoss` expects `y_pred` of shape (batch, 2 + k, dim), "
            f"k >= 1 negatives. Received shape {shape}."
        )
    z = l2_normalize(y_pred)
    s = ops.sum(z[:, :1, :] * z[:, 1:, :], axis=-1)  # (batch, 1 + k)
    diff = s[:, :1] - s[:, 1:]
    if form == "hinge":
        per = ops.relu(margin - diff)
    else:
        per = ops.softplus(-scale * diff)
    return ops.mean(per, axis=-1)


@keras_cosent_export
class MarginRankingLoss(LabelsCheckedLoss):
    """Margin ranking: the positive's cosine must beat each negative's.

    With `y_pred` `(batch, 2 + k, dim)` (query, positive, `k >= 1`
    negatives) and `s` the cosine:

    - hinge: `max(0, margin - (s(q, p) - s(q, n)))`;
    - logistic: `log(1 + exp(-scale * (s(q, p) - s(q, n))))`;

    averaged over all rows and negatives. `y_true` is ignored (None is
    accepted).

    Args:
        margin: finite float >= 0 (hinge form). Defaults to 0.2.
        form: `"hinge"` or `"logistic"`.
        scale: float > 0 (logistic form). Defaults to 20.0.
        name: name of the loss instance.
        reduction: Keras reduction over the per-row losses.

    Inputs:
        y_true: ignored (anything, e.g. zeros, or None).
        y_pred: `(batch, 2 + k, dim)` embeddings, need not be normalised.

    Returns:
        Float32 losses of shape `(batch,)` (mean over negatives).

    Example:

    >>> import numpy as np
    >>> import keras_cosent
    >>> loss = keras_cosent.losses.MarginRankingLoss(margin=0.2)
    >>> q = np.eye(2, 4, dtype="float32")
    >>> float(loss(np.zeros(2), np.stack([q, q, -q], axis=1)))
    0.0

    Reference:
        Burges et al., "Learning to Rank using Gradient Descent" (2005).
    """

    def __init__(
        self,
        margin=0.2,
        form="hinge",
        scale=20.0,
        name="margin_ranking_loss",
        reduction="sum_over_batch_size",
    ):
        super().__init__(name=name, reduction=reduction)
        self.margin, self.form, self.scale = _check_arguments(margin, form, scale)

    def labels_read(self):
        return "MarginRankingLoss", None

    def call(self, y_true, y_pred):
        return margin_ranking_loss(
            y_true, y_pred, margin=self.margin, form=self.form, scale=self.scale
        )

    def get_config(self):
        config = super().get_config()
        config.update({"margin": self.margin, "form": self.form, "scale": self.scale})
        return config
