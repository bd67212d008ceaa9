"""Cosine regression baseline: mean squared error between cosine and rescaled label.

`cosine_mse_loss` holds the maths; `CosineMSELoss` wraps it as a
`keras.losses.Loss`.
"""

from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.losses._validation import LabelsCheckedLoss
from keras_cosent.losses._validation import check_finite_float
from keras_cosent.losses._validation import check_pair_embeddings
from keras_cosent.losses._validation import flat_labels
from keras_cosent.utils import pair_cosine


def _check_scores(min_score, max_score):
    """The checked `(min_score, max_score)`, for the class and the function."""
    low = check_finite_float("min_score", min_score)
    high = check_finite_float("max_score", max_score)
    if not high > low:  # equal scores divide by 0, reversed ones flip the target
        raise ValueError(
            "`max_score` should be greater than `min_score`. Received: "
            f"`min_score`={min_score!r}, `max_score`={max_score!r}"
        )
    return low, high


def cosine_mse_loss(y_true, y_pred, min_score=0.0, max_score=1.0):
    """Squared error of each pair's cosine, float32 of shape `(batch,)`.

    See `keras_cosent.losses.CosineMSELoss` for the arguments, checked as the
    class checks them.
    """
    min_score, max_score = _check_scores(min_score, max_score)
    y_pred = ops.convert_to_tensor(y_pred)
    check_pair_embeddings(y_pred, "CosineMSELoss")
    cosine = pair_cosine(y_pred)
    labels = ops.cast(flat_labels(y_true, cosine, "CosineMSELoss"), "float32")
    target = (labels - min_score) / (max_score - min_score)
    return ops.square(cosine - target)


@keras_cosent_export
class CosineMSELoss(LabelsCheckedLoss):
    """Cosine regression: MSE between the pair's cosine and its rescaled label.

    The Sentence-BERT regression objective (sentence-transformers'
    `CosineSimilarityLoss`):

    ```
    loss = mean_i (cos(u_i, v_i) - (label_i - min_score) / (max_score - min_score))**2
    ```

    Labels are mapped linearly so that `min_score` becomes 0 and `max_score`
    becomes 1: with STS-B scores in [0, 5] pass `max_score=5.0`. To regress on
    [-1, 1] instead, pass labels already in [-1, 1] with `min_score=0,
    max_score=1`. `call` returns one squared error per pair, so
    `sample_weight` weights pairs.

    Args:
        min_score: finite float, the label mapped to a cosine of 0.
        max_score: finite float greater than `min_score`, the label mapped to
            a cosine of 1.
        name: name of the loss instance.
        reduction: Keras reduction over the per-pair errors.

    Inputs:
        y_true: labels of shape `(batch,)` or `(batch, 1)`.
        y_pred: cosines of shape `(batch,)` or pair embeddings of shape
            `(batch, 2, dim)` (need not be normalised).

    Returns:
        Float32 squared errors of shape `(batch,)` before reduction.

    Example:

    >>> import numpy as np
    >>> import keras_cosent
    >>> loss = keras_cosent.losses.CosineMSELoss(min_score=0.0, max_score=5.0)
    >>> labels = np.array([5.0, 0.0], dtype="float32")
    >>> cosines = np.array([1.0, 0.5], dtype="float32")
    >>> round(float(loss(labels, cosines)), 4)  # ((1 - 1)**2 + (0.5 - 0)**2) / 2
    0.125

    Reference:
        Reimers & Gurevych, "Sentence-BERT: Sentence Embeddings using Siamese
        BERT-Networks" (2019), https://arxiv.org/abs/1908.10084

    Relations:
        - `keras_cosent.losses.CoSENTLoss` uses only the order of the labels
          and usually trains stronger on the same data.
        - `keras_cosent.losses.SoftmaxLoss` is the Sentence-BERT
          classification objective.
    """

    def __init__(
        self,
        min_score=0.0,
        max_score=1.0,
        name="cosine_mse_loss",
        reduction="sum_over_batch_size",
    ):
        super().__init__(name=name, reduction=reduction)
        self.min_score, self.max_score = _check_scores(min_score, max_score)

    def labels_read(self):
        return "CosineMSELoss", "one label per pair"

    def call(self, y_true, y_pred):
        return cosine_mse_loss(
            y_true, y_pred, min_score=self.min_score, max_score=self.max_score
        )

    def get_config(self):
        config = super().get_config()
        config.update({"min_score": self.min_score, "max_score": self.max_score})
        return config
