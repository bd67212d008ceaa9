"""CoSENT, the ranking loss on pair cosines that this package is named after.

`cosent_loss` holds the maths; `CoSENTLoss` wraps it as a `keras.losses.Loss`.
`ranking_loss_from_similarity` is the ranking step alone, which
`keras_cosent.losses.AnglELoss` reuses with its own similarity.
"""

import keras
from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.losses._validation import check_pair_embeddings
from keras_cosent.losses._validation import check_positive_float
from keras_cosent.losses._validation import flat_labels
from keras_cosent.utils import pair_cosine


def ranking_loss_from_similarity(y_true, similarity, scale=20.0, loss_name="CoSENTLoss"):
    """CoSENT ranking of one similarity per pair against the pairs' labels.

    Returns `log(1 + sum_{a, b: label_a > label_b} exp(scale * (s_b - s_a)))`
    as a float32 scalar, computed as `logsumexp([0, ...])` over the masked
    `(batch, batch)` matrix of differences. Pairs with equal labels are not
    compared, so a batch without any ordered pair gives exactly 0.

    Args:
        y_true: labels of shape `(batch,)` or `(batch, 1)`, any ordered values.
        similarity: similarities of shape `(batch,)`.
        scale: positive float multiplying the similarity differences.
        loss_name: name used in error messages.
    """
    similarity = ops.cast(similarity, "float32")
    labels = ops.cast(flat_labels(y_true, similarity, loss_name), "float32")
    scaled = similarity * scale
    # differences[a, b] = scale * (s_b - s_a): the penalty paid when pair `a`
    # is labelled above pair `b`, which should then have the lower similarity.
    differences = scaled[None, :] - scaled[:, None]
    ordered = labels[:, None] > labels[None, :]
    # -inf rather than a large negative constant: exp(-inf) is exactly 0 in the
    # value and in the gradient of logsumexp, whatever the scale.
    differences = ops.where(
        ordered, differences, ops.full_like(differences, float("-inf"))
    )
    # The leading 0 is the "1 +" of the formula; it also keeps logsumexp's
    # maximum finite when every entry is masked, so no NaN reaches the gradient.
    terms = ops.concatenate(
        [ops.zeros((1,), dtype="float32"), ops.reshape(differences, (-1,))], axis=0
    )
    return ops.logsumexp(terms)


def cosent_loss(y_true, y_pred, scale=20.0):
    """CoSENT loss of one batch of labelled pairs, as a float32 scalar.

    `log(1 + sum over pairs (i,j), (k,l) with label(i,j) > label(k,l) of
    exp(scale * (cos(k,l) - cos(i,j))))`. See `keras_cosent.losses.CoSENTLoss`
    for the arguments.
    """
    y_pred = ops.convert_to_tensor(y_pred)
    check_pair_embeddings(y_pred, "CoSENTLoss")
    return ranking_loss_from_similarity(
        y_true, pair_cosine(y_pred), scale=scale, loss_name="CoSENTLoss"
    )


@keras_cosent_export
class CoSENTLoss(keras.losses.Loss):
    """CoSENT ranking loss: pairs labelled more similar should get higher cosines.

    For every two pairs `(i, j)` and `(k, l)` in the batch whose labels are
    ordered, `label(i, j) > label(k, l)`, the loss penalises the cosine of the
    lower-labelled pair exceeding that of the higher-labelled one:

    ```
    loss = log(1 + sum_{label(i,j) > label(k,l)} exp(scale * (cos(k,l) - cos(i,j))))
    ```

    Only the order of the labels matters, not their values, so the same loss
    trains on binary labels, float STS scores (0 to 5) and NLI classes coded as
    integers with entailment > neutral > contradiction (e.g. 2, 1, 0). Pairs
    with equal labels are not compared; a batch in which all labels are equal
    gives a loss of exactly 0. The sum runs over all `batch**2` ordered couples
    of pairs and is computed in float32 with `logsumexp`, so it stays finite
    for any scale and under `mixed_float16`.

    The loss is one value per batch (the couples mix examples), so
    `sample_weight` can only rescale it as a whole.

    Args:
        scale: positive float, the inverse temperature multiplying cosine
            differences. Defaults to 20 (the CoSENT paper's and
            sentence-transformers' default).
        name: name of the loss instance.
        reduction: Keras reduction; the loss is already one scalar per batch.

    Inputs:
        y_true: labels of shape `(batch,)` or `(batch, 1)`: any ordered values.
        y_pred: either the cosine of each pair, shape `(batch,)`, or the two
            embeddings of each pair, shape `(batch, 2, dim)` (what
            `keras_cosent.models.SiameseEncoder` outputs; they need not be
            normalised).

    Returns:
        A float32 scalar.

    Example:

    >>> import numpy as np
    >>> import keras_cosent
    >>> loss = keras_cosent.losses.CoSENTLoss(scale=20.0)
    >>> labels = np.array([5.0, 3.2, 0.4], dtype="float32")
    >>> cosines = np.array([0.9, 0.6, 0.1], dtype="float32")  # well ranked
    >>> float(loss(labels, cosines)) < 0.01
    True
    >>> pairs = np.random.normal(size=(3, 2, 8)).astype("float32")
    >>> float(loss(labels, pairs)) > 0
    True

    Reference:
        Su Jianlin, "CoSENT (1): a more effective sentence embedding scheme
        than Sentence-BERT" (2022), https://kexue.fm/archives/8847 ; Huang et
        al., "CoSENT: Consistent Sentence Embedding via Similarity Ranking",
        IEEE/ACM TASLP 2024, https://doi.org/10.1109/TASLP.2024.3402087

    Relations:
        - `keras_cosent.losses.AnglELoss` is this ranking on the AnglE
          angle-difference similarity instead of the cosine.
        - `keras_cosent.losses.CosineMSELoss` regresses the cosine on the
          label; it needs calibrated labels and usually trains weaker.
        - `keras_cosent.losses.InfoNCELoss` needs no labels, only positive
          pairs, and ranks each positive above in-batch negatives.
    """

    def __init__(self, scale=20.0, name="cosent_loss", reduction="sum_over_batch_size"):
        super().__init__(name=name, reduction=reduction)
        self.scale = check_positive_float("scale", scale)

    def call(self, y_true, y_pred):
        return cosent_loss(y_true, y_pred, scale=self.scale)

    def get_config(self):
        config = super().get_config()
        config.update({"scale": self.scale})
        return config
