"""SimCLR's NT-Xent (normalized temperature-scaled cross entropy).

`ntxent_loss` holds the maths; `NTXentLoss` wraps it as a `keras.losses.Loss`.
"""

from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.losses._validation import LabelsCheckedLoss
from keras_cosent.losses._validation import check_positive_float
from keras_cosent.utils.similarity import l2_normalize
from keras_cosent.utils.similarity import similarity_matrix


def ntxent_loss(y_true, y_pred, temperature=0.05):
    """NT-Xent of each example (mean of its two views), float32 `(batch,)`.

    See `keras_cosent.losses.NTXentLoss` for the arguments, checked as the
    class checks them; `y_true` is ignored and may be None.
    """
    del y_true
    temperature = check_positive_float("temperature", temperature)
    y_pred = ops.cast(ops.convert_to_tensor(y_pred), "float32")
    shape = tuple(y_pred.shape)
    if len(shape) != 3 or (shape[1] is not None and shape[1] != 2):
        raise ValueError(
            "`NTXentLoss` expects `y_pred` of shape (batch, 2, dim): two views "
            f"of each example. Received shape {shape}."
        )
    batch = ops.shape(y_pred)[0]
    z = l2_normalize(y_pred)
    # Views 0..N-1 are column 0, N..2N-1 column 1; view i's partner is i +- N.
    views = ops.concatenate([z[:, 0, :], z[:, 1, :]], axis=0)
    logits = similarity_matrix(views, views) / temperature
    ids = ops.arange(2 * batch)
    self_mask = ids[:, None] == ids[None, :]
    partner = ops.concatenate([ids[batch:], ids[:batch]], axis=0)
    own = partner[:, None] == ids[None, :]
    logits = ops.where(self_mask, ops.full_like(logits, float("-inf")), logits)
    positive = ops.sum(ops.where(own, logits, ops.zeros_like(logits)), axis=-1)
    per_view = ops.logsumexp(logits, axis=-1) - positive
    return (per_view[:batch] + per_view[batch:]) / 2.0


@keras_cosent_export
class NTXentLoss(LabelsCheckedLoss):
    """NT-Xent (SimCLR): each of the 2N views must pick its partner view.

    With `y_pred` of shape `(batch, 2, dim)` (two views of each example, 2N
    views in all), each view `i` with partner `j` has

    ```
    l_i = -log( exp(cos(z_i, z_j) / t) / sum_{k != i} exp(cos(z_i, z_k) / t) )
    ```

    where `k` runs over all 2N views. Unlike `keras_cosent.losses.InfoNCELoss`,
    the other views of the same column are negatives too. `call` returns the
    mean of each example's two view losses, so the Keras mean over the batch
    is the mean over all 2N views. `y_true` is ignored (None is accepted).
    A `sample_weight` weighs each example's two view losses, as Keras weighs
    per-row losses (`sum(w * l) / batch`); an example weighted 0 still serves
    as a negative for the others.

    Args:
        temperature: float > 0 dividing the cosines (any positive value is
            allowed; the loss stays finite at 1e-3). Defaults to 0.05.
        name: name of the loss instance.
        reduction: Keras reduction over the per-example losses.

    Inputs:
        y_true: ignored (anything, e.g. zeros, or None).
        y_pred: embeddings `(batch, 2, dim)`, need not be normalised.

    Returns:
        Float32 losses of shape `(batch,)` before reduction.

    Example:

    >>> import numpy as np
    >>> import keras_cosent
    >>> loss = keras_cosent.losses.NTXentLoss(temperature=0.05)
    >>> x = np.eye(4, 8, dtype="float32")
    >>> float(loss(np.zeros(4), np.stack([x, x + 0.01], axis=1))) < 0.01
    True

    Reference:
        Chen et al., "A Simple Framework for Contrastive Learning of Visual
        Representations" (2020), https://arxiv.org/abs/2002.05709
    """

    def __init__(self, temperature=0.05, name="ntxent_loss", reduction="sum_over_batch_size"):
        super().__init__(name=name, reduction=reduction)
        self.temperature = check_positive_float("temperature", temperature)

    def labels_read(self):
        return "NTXentLoss", None

    def call(self, y_true, y_pred):
        return ntxent_loss(y_true, y_pred, temperature=self.temperature)

    def get_config(self):
        config = super().get_config()
        config.update({"temperature": self.temperature})
        return config
