"""AnglE: the CoSENT ranking on an angle difference in complex space.

`angle_similarity` computes the pair similarity, `angle_loss` the loss, and
`AnglELoss` wraps it as a `keras.losses.Loss`. The ranking itself is
`keras_cosent.losses.cosent_loss.ranking_loss_from_similarity`.
"""

from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.losses._validation import LabelsCheckedLoss
from keras_cosent.losses._validation import check_positive_float
from keras_cosent.utils.similarity import l2_normalize
from keras_cosent.losses.cosent_loss import ranking_loss_from_similarity


def angle_similarity(y_pred):
    """AnglE similarity of each pair, float32 of shape `(batch,)`.

    Each embedding `x` is read as a complex vector `a + ib`, its first half
    the real parts and its second half the imaginary parts. The complex
    quotient of the pair `(a + ib) / (c + id)`, rescaled by `|y| / |x|`, has
    real part `x.y / (|x||y|) = cos(x, y)` and imaginary part
    `(b.c - a.d) / (|x||y|)`; the similarity is the absolute value of the sum
    of all its components, `|cos(x, y) + (b.c - a.d) / (|x||y|)|`. It is the
    `pairwise_angle_sim` of sentence-transformers (and the AnglE authors'
    reference code), computed here on L2-normalised halves, which avoids the
    separate division by `|y|**2`. Like theirs it is not a geometric angle:
    identical and opposite embeddings both score 1.

    Args:
        y_pred: pair embeddings of shape `(batch, 2, dim)` with an even `dim`.
    """
    y_pred = ops.cast(ops.convert_to_tensor(y_pred), "float32")
    shape = tuple(y_pred.shape)
    if len(shape) != 3 or shape[1] != 2 or shape[2] is None or shape[2] % 2:
        raise ValueError(
            "`AnglELoss` needs the pair embeddings, `y_pred` of shape "
            "(batch, 2, dim) with an even `dim` (real and imaginary halves); "
            f"cosines alone are not enough. Received shape {shape}."
        )
    half = shape[2] // 2
    x = l2_normalize(y_pred[:, 0, :])
    y = l2_normalize(y_pred[:, 1, :])
    a, b = x[:, :half], x[:, half:]
    c, d = y[:, :half], y[:, half:]
    real = ops.sum(x * y, axis=-1)
    imaginary = ops.sum(b * c - a * d, axis=-1)
    total = real + imaginary
    # |total| with the subgradient 0 at 0 on every backend (JAX's abs takes 1
    # there: a zero embedding's gradient, through the normalisation, was ~1e9
    # on JAX and 0 on TensorFlow and PyTorch); `sign` has no gradient anywhere.
    return total * ops.sign(total)


def angle_loss(y_true, y_pred, scale=20.0):
    """AnglE loss of one batch of labelled pairs, as a float32 scalar.

    See `keras_cosent.losses.AnglELoss` for the arguments, checked as the
    class checks them (`scale` by `ranking_loss_from_similarity`).
    """
    return ranking_loss_from_similarity(
        y_true, angle_similarity(y_pred), scale=scale, loss_name="AnglELoss"
    )


@keras_cosent_export
class AnglELoss(LabelsCheckedLoss):
    """AnglE loss: CoSENT ranking on the angle-difference similarity.

    The cosine's gradient vanishes near +1 and -1, where well-trained pairs
    sit. AnglE (Li & Li) instead ranks pairs by a similarity built from the
    angle difference of the two embeddings in complex space (see
    `keras_cosent.losses.angle_loss.angle_similarity`), with the CoSENT
    ranking objective:

    ```
    loss = log(1 + sum_{label(i,j) > label(k,l)} exp(scale * (s(k,l) - s(i,j))))
    s(x, y) = |cos(x, y) + (b.c - a.d) / (|x| |y|)|,  x = [a, b], y = [c, d]
    ```

    As in CoSENT, only the order of the labels matters, ties are not compared
    and a batch of equal labels gives exactly 0 (a NaN label, NaN). The loss
    is one float32 value per batch. The AnglE paper trains it together with a cosine
    objective and InfoNCE; combine losses in your own training step for that.

    Args:
        scale: positive float multiplying similarity differences. Defaults to
            20, sentence-transformers' default.
        name: name of the loss instance.
        reduction: Keras reduction; the loss is already one scalar per batch.

    Inputs:
        y_true: labels of shape `(batch,)` or `(batch, 1)`: any ordered values, compared
            in float32 (as Keras' `Loss` casts them): values closer than its
            resolution, such as integers above 2**24, tie.
        y_pred: pair embeddings of shape `(batch, 2, dim)`, `dim` even; the
            first half of each embedding is the real part, the second the
            imaginary part. Cosines of shape `(batch,)` are not accepted.

    Returns:
        A float32 scalar.

    Example:

    >>> import numpy as np
    >>> import keras_cosent
    >>> loss = keras_cosent.losses.AnglELoss(scale=20.0)
    >>> pairs = np.random.normal(size=(4, 2, 8)).astype("float32")
    >>> labels = np.array([0.0, 1.0, 2.0, 3.0], dtype="float32")
    >>> float(loss(labels, pairs)) > 0
    True

    Reference:
        Li & Li, "AnglE-optimized Text Embeddings" (2023),
        https://arxiv.org/abs/2309.12871 (ACL 2024: "AoE: Angle-optimized
        Embeddings for Semantic Textual Similarity"); reference code
        https://github.com/SeanLee97/AnglE

    Relations:
        - `keras_cosent.losses.CoSENTLoss` is this loss with the cosine as
          the similarity.
        - `keras_cosent.losses.CosineMSELoss` is the regression baseline.
    """

    def __init__(self, scale=20.0, name="angle_loss", reduction="sum_over_batch_size"):
        super().__init__(name=name, reduction=reduction)
        self.scale = check_positive_float("scale", scale)

    def labels_read(self):
        return "AnglELoss", "one label per pair"

    def call(self, y_true, y_pred):
        return angle_loss(y_true, y_pred, scale=self.scale)

    def get_config(self):
        config = super().get_config()
        config.update({"scale": self.scale})
        return config
