"""Sentence-BERT classification baseline: cross-entropy on classifier-head logits.

The trainable classifier is `keras_cosent.layers.SoftmaxClassifierHead`;
`softmax_loss` and `SoftmaxLoss` are the cross-entropy on its logits.
"""

from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.losses._validation import LabelsCheckedLoss
from keras_cosent.losses._validation import flat_labels
from keras_cosent.utils.arguments import is_int


def _check_num_labels(num_labels):
    if num_labels is None:
        return None
    if not is_int(num_labels) or num_labels < 2:
        raise ValueError(
            "`num_labels` should be None or an int >= 2. "
            f"Received: `num_labels`={num_labels!r}"
        )
    return int(num_labels)  # a NumPy integer (`np.unique(...).size`) stored as an int


def softmax_loss(y_true, y_pred, num_labels=None):
    """Cross-entropy of integer labels against logits, float32 of shape `(batch,)`.

    Labels that are not integers in `[0, num_labels)` give NaN for their
    example. See `keras_cosent.losses.SoftmaxLoss` for the arguments.
    """
    num_labels = _check_num_labels(num_labels)
    logits = ops.cast(ops.convert_to_tensor(y_pred), "float32")
    shape = tuple(logits.shape)
    if len(shape) != 2 or shape[-1] is None:
        raise ValueError(
            "`SoftmaxLoss` expects logits of shape (batch, num_labels), e.g. the "
            "output of `keras_cosent.layers.SoftmaxClassifierHead`. "
            f"Received shape {shape}."
        )
    if num_labels is not None and shape[-1] != num_labels:
        raise ValueError(
            f"`SoftmaxLoss(num_labels={num_labels})` received logits for "
            f"{shape[-1]} labels (shape {shape}); the head and the loss should "
            "agree on `num_labels`."
        )
    n = shape[-1]
    labels = ops.cast(flat_labels(y_true, logits, "SoftmaxLoss"), "float32")
    valid = ops.logical_and(
        ops.logical_and(labels >= 0, labels < n), ops.equal(labels, ops.floor(labels))
    )
    safe = ops.where(valid, labels, ops.zeros_like(labels))
    one_hot = ops.one_hot(ops.cast(safe, "int32"), n, dtype="float32")
    nll = ops.logsumexp(logits, axis=-1) - ops.sum(one_hot * logits, axis=-1)
    # A label outside [0, n) cannot raise inside a compiled train step on
    # every backend (JAX would silently use a zero one-hot); NaN makes it loud.
    return ops.where(valid, nll, ops.full_like(nll, float("nan")))


@keras_cosent_export
class SoftmaxLoss(LabelsCheckedLoss):
    """Sentence-BERT softmax objective: cross-entropy over the pair's class logits.

    Sentence-BERT (Reimers & Gurevych 2019) trains the encoder on NLI by
    classifying each pair `(u, v)` from `concat(u, v, |u - v|)` with a linear
    softmax classifier. In keras-cosent that classifier is a layer of the
    model, `keras_cosent.layers.SoftmaxClassifierHead(num_labels)`, put after
    the `keras_cosent.models.SiameseEncoder`; this loss is only the sparse
    categorical cross-entropy on its logits:

    ```
    loss_i = -log softmax(W [u_i, v_i, |u_i - v_i|] + b)[label_i]
    ```

    The head's weights are trained with the encoder and thrown away after
    training: the encoder alone is kept and, as for every other loss here, it
    is evaluated by the cosine of its embeddings (e.g. Spearman on STS), not
    by the classifier.

    Labels must be integers in `[0, num_labels)`. A loss cannot raise on
    tensor values inside a compiled train step on every backend, so an
    example with an invalid label (e.g. -1 for NLI's "-" gold label, or 3
    with 3 classes) makes the loss NaN rather than being silently scored.
    When `num_labels` is given, logits with another number of classes raise
    a `ValueError` when the loss is traced.

    Args:
        num_labels: optional int >= 2, the number of classes; checked against
            the logits' last dimension.
        name: name of the loss instance.
        reduction: Keras reduction over the per-pair losses.

    Inputs:
        y_true: integer class ids of shape `(batch,)` or `(batch, 1)`.
        y_pred: logits of shape `(batch, num_labels)`.

    Returns:
        Float32 losses of shape `(batch,)` before reduction.

    Example:

    >>> import numpy as np
    >>> import keras
    >>> import keras_cosent
    >>> pairs = keras.Input((2, 16))
    >>> logits = keras_cosent.layers.SoftmaxClassifierHead(num_labels=3)(pairs)
    >>> model = keras.Model(pairs, logits)
    >>> model.compile("adam", loss=keras_cosent.losses.SoftmaxLoss(num_labels=3))
    >>> x = np.random.normal(size=(8, 2, 16)).astype("float32")
    >>> y = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    >>> loss = model.train_on_batch(x, y)

    Reference:
        Reimers & Gurevych, "Sentence-BERT: Sentence Embeddings using Siamese
        BERT-Networks" (2019), https://arxiv.org/abs/1908.10084

    Relations:
        - `keras_cosent.losses.CoSENTLoss` trains on the same NLI pairs with
          labels ordered entailment > neutral > contradiction and optimises
          the cosine directly; the CoSENT paper reports it ahead of this
          baseline.
        - `keras_cosent.losses.CosineMSELoss` is the Sentence-BERT regression
          objective.
    """

    def __init__(self, num_labels=None, name="softmax_loss", reduction="sum_over_batch_size"):
        super().__init__(name=name, reduction=reduction)
        self.num_labels = _check_num_labels(num_labels)

    def labels_read(self):
        return "SoftmaxLoss", "one label per pair"

    def call(self, y_true, y_pred):
        return softmax_loss(y_true, y_pred, num_labels=self.num_labels)

    def get_config(self):
        config = super().get_config()
        config.update({"num_labels": self.num_labels})
        return config
