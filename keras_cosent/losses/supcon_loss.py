"""Supervised contrastive loss (Khosla et al. 2020).

`supcon_loss` holds the maths; `SupConLoss` wraps it as a `keras.losses.Loss`.
"""

from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.losses._validation import LabelsCheckedLoss
from keras_cosent.losses._validation import check_positive_float
from keras_cosent.losses._validation import flat_labels
from keras_cosent.losses._validation import nan_if_unlabelled
from keras_cosent.utils.similarity import l2_normalize
from keras_cosent.utils.similarity import similarity_matrix


def supcon_loss(y_true, y_pred, temperature=0.1):
    """SupCon loss of the batch, a float32 scalar.

    See `keras_cosent.losses.SupConLoss` for the arguments, checked as the
    class checks them; `y_true` is required.
    """
    temperature = check_positive_float("temperature", temperature)
    y_pred = ops.cast(ops.convert_to_tensor(y_pred), "float32")
    shape = tuple(y_pred.shape)
    if len(shape) not in (2, 3):
        raise ValueError(
            "`SupConLoss` expects `y_pred` of shape (batch, dim) or "
            f"(batch, views, dim). Received shape {shape}."
        )
    labels = flat_labels(y_true, y_pred, "SupConLoss", rows="rows")
    if len(shape) == 3:
        views = ops.shape(y_pred)[1]
        labels = ops.repeat(labels, views)
        y_pred = ops.reshape(y_pred, (-1, ops.shape(y_pred)[-1]))
    z = l2_normalize(y_pred)
    n = ops.shape(z)[0]
    logits = similarity_matrix(z, z) / temperature
    ids = ops.arange(n)
    not_self = ids[:, None] != ids[None, :]
    positive = ops.logical_and(labels[:, None] == labels[None, :], not_self)
    denominator = ops.logsumexp(
        ops.where(not_self, logits, ops.full_like(logits, float("-inf"))), axis=-1
    )
    log_prob = logits - denominator[:, None]
    positive_f = ops.cast(positive, "float32")
    count = ops.sum(positive_f, axis=-1)
    has = count > 0
    summed = ops.sum(ops.where(positive, log_prob, ops.zeros_like(log_prob)), axis=-1)
    per_sample = -summed / ops.maximum(count, 1.0)
    has_f = ops.cast(has, "float32")
    total = ops.sum(ops.where(has, per_sample, ops.zeros_like(per_sample)))
    return nan_if_unlabelled(total / ops.maximum(ops.sum(has_f), 1.0), labels)


@keras_cosent_export
class SupConLoss(LabelsCheckedLoss):
    """Supervised contrastive loss: pull together all samples of a class.

    Over all samples `a` (views flattened, each view with its row's label):

    ```
    L_a = -1/|P(a)| sum_{p in P(a)} log( exp(cos(z_a, z_p)/t)
                                         / sum_{b != a} exp(cos(z_a, z_b)/t) )
    ```

    where `P(a)` is every other sample with `a`'s label. The loss is the mean
    of `L_a` over the samples with `|P(a)| > 0`, and exactly 0 when no sample
    has a positive. `call` returns that batch mean as a scalar, so
    `sample_weight` is not per sample.

    Args:
        temperature: float > 0 (any positive value). Defaults to 0.1.
        name: name of the loss instance.
        reduction: Keras reduction (applied to the scalar, a no-op for means).

    Inputs:
        y_true: integer class labels `(batch,)` or `(batch, 1)`; float32
            exact below 2**24. Required: None raises a `ValueError`.
        y_pred: `(batch, dim)` or `(batch, views, dim)` embeddings.

    Returns:
        A float32 scalar.

    Example:

    >>> import numpy as np
    >>> import keras_cosent
    >>> loss = keras_cosent.losses.SupConLoss(temperature=0.1)
    >>> float(loss(np.arange(4), np.eye(4, 8, dtype="float32")))
    0.0

    Reference:
        Khosla et al., "Supervised Contrastive Learning" (2020),
        https://arxiv.org/abs/2004.11362
    """

    def __init__(self, temperature=0.1, name="supcon_loss", reduction="sum_over_batch_size"):
        super().__init__(name=name, reduction=reduction)
        self.temperature = check_positive_float("temperature", temperature)

    def labels_read(self):
        return "SupConLoss", "class labels"

    def call(self, y_true, y_pred):
        return supcon_loss(y_true, y_pred, temperature=self.temperature)

    def get_config(self):
        config = super().get_config()
        config.update({"temperature": self.temperature})
        return config
