"""Margin ranking of a query's positive above each of its negatives.

`margin_ranking_loss` holds the maths; `MarginRankingLoss` wraps it.
"""

import keras
from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.losses._validation import check_non_negative_float
from keras_cosent.losses._validation import check_positive_float
from keras_cosent.utils.similarity import l2_normalize

FORMS = ("hinge", "logistic")


def margin_ranking_loss(y_true, y_pred, margin=0.2, form="hinge", scale=20.0):
    """Loss of each query averaged over its negatives, float32 `(batch,)`.

    See `keras_cosent.losses.MarginRankingLoss` for the arguments.
    """
    del y_true
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
class MarginRankingLoss(keras.losses.Loss):
    """Margin ranking: the positive's cosine must beat each negative's.

    With `y_pred` `(batch, 2 + k, dim)` (query, positive, `k >= 1`
    negatives) and `s` the cosine:

    - hinge: `max(0, margin - (s(q, p) - s(q, n)))`;
    - logistic: `log(1 + exp(-scale * (s(q, p) - s(q, n))))`;

    averaged over all rows and negatives. `y_true` is ignored.

    Args:
        margin: finite float >= 0 (hinge form). Defaults to 0.2.
        form: `"hinge"` or `"logistic"`.
        scale: float > 0 (logistic form). Defaults to 20.0.
        name: name of the loss instance.
        reduction: Keras reduction over the per-row losses.

    Inputs:
        y_true: ignored.
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
        self.margin = check_non_negative_float("margin", margin)
        if form not in FORMS:
            raise ValueError(
                f"`form` should be one of {FORMS}. Received: `form`={form!r}"
            )
        self.form = form
        self.scale = check_positive_float("scale", scale)

    def call(self, y_true, y_pred):
        return margin_ranking_loss(
            y_true, y_pred, margin=self.margin, form=self.form, scale=self.scale
        )

    def get_config(self):
        config = super().get_config()
        config.update({"margin": self.margin, "form": self.form, "scale": self.scale})
        return config
