"""InfoNCE with in-batch negatives (also SimCSE and MultipleNegativesRankingLoss).

`infonce_loss` holds the maths; `InfoNCELoss` wraps it as a `keras.losses.Loss`.
"""

from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.losses._validation import LabelsCheckedLoss
from keras_cosent.losses._validation import check_bool
from keras_cosent.losses._validation import check_positive_float
from keras_cosent.losses._validation import flat_labels
from keras_cosent.losses._validation import nan_if_unlabelled
from keras_cosent.utils.similarity import l2_normalize
from keras_cosent.utils.similarity import similarity_matrix


def _check_tuples(y_pred):
    shape = tuple(y_pred.shape)
    if len(shape) != 3 or (shape[1] is not None and shape[1] < 2):
        raise ValueError(
            "`InfoNCELoss` expects `y_pred` of shape (batch, 2 + k, dim): column 0 "
            "the anchors, column 1 the positives, columns 2.. hard negatives. "
            f"Received shape {shape}."
        )


def _cross_entropy_rows(logits, own, excluded):
    """`-log softmax` of each row at its `own` column, leaving out `excluded`."""
    neg_inf = ops.full_like(logits, float("-inf"))
    # The own column is never excluded, so every row keeps a finite maximum
    # and logsumexp and its gradient stay finite.
    logits = ops.where(ops.logical_and(excluded, ops.logical_not(own)), neg_inf, logits)
    positive = ops.sum(ops.where(own, logits, ops.zeros_like(logits)), axis=-1)
    return ops.logsumexp(logits, axis=-1) - positive


def infonce_loss(
    y_true, y_pred, temperature=0.05, symmetric=False, mask_false_negatives=False,
    queue=None, queue_mask=None,
):
    """InfoNCE loss of each anchor, float32 of shape `(batch,)`.

    See `keras_cosent.losses.InfoNCELoss` for the arguments, checked as the
    class checks them; `queue` (`(size, dim)`) holds extra negatives shared
    by every anchor, `queue_mask` (`(size,)`, positive where an entry is
    filled, 0 where empty) says which count. `y_true` may be None unless
    `mask_false_negatives=True`.
    """
    temperature = check_positive_float("temperature", temperature)
    symmetric = check_bool("symmetric", symmetric)
    mask_false_negatives = check_bool("mask_false_negatives", mask_false_negatives)
    y_pred = ops.cast(ops.convert_to_tensor(y_pred), "float32")
    _check_tuples(y_pred)
    batch = ops.shape(y_pred)[0]
    dim = ops.shape(y_pred)[-1]
    embeddings = l2_normalize(y_pred)
    anchors = embeddings[:, 0, :]
    positives = embeddings[:, 1, :]
    # All positives first, then each hard-negative column: candidate c belongs
    # to row c % batch, and candidate i is row i's own positive.
    candidates = ops.reshape(ops.transpose(embeddings[:, 1:, :], (1, 0, 2)), (-1, dim))
    logits = similarity_matrix(anchors, candidates) / temperature
    rows = ops.arange(batch)
    candidate_ids = ops.arange(ops.shape(candidates)[0])
    own = rows[:, None] == candidate_ids[None, :]
    own_square = rows[:, None] == rows[None, :]
    if mask_false_negatives:
        groups = flat_labels(y_true, anchors, "InfoNCELoss(mask_false_negatives=True)")
        same_group = groups[:, None] == groups[None, :]
        # Only other rows' positives can duplicate row i's positive; hard
        # negatives of a duplicate row are still negatives for row i.
        hard = ops.shape(candidates)[0] - batch
        excluded = ops.concatenate(
            [same_group, ops.zeros((batch, hard), dtype="bool")], axis=1
        )
    else:
        same_group = ops.zeros_like(own_square)
        excluded = ops.zeros_like(own)
    if queue is not None:
        # Appended after every in-batch candidate: never a row's own positive,
        # never masked by group (the queue keeps no labels); empty slots out.
        queue = ops.cast(ops.convert_to_tensor(queue), "float32")
        _check_queue(queue, queue_mask, tuple(y_pred.shape))
        queue = l2_normalize(queue)
        logits = ops.concatenate(
            [logits, similarity_matrix(anchors, queue) / temperature], axis=1
        )
        size = ops.shape(queue)[0]
        own = ops.concatenate([own, ops.zeros((batch, size), dtype="bool")], axis=1)
        if queue_mask is None:
            empty = ops.zeros((batch, size), dtype="bool")
        else:
            filled = ops.reshape(ops.convert_to_tensor(queue_mask), (1, -1))
            empty = ops.broadcast_to(ops.logical_not(filled > 0), (batch, size))
        excluded = ops.concatenate([excluded, empty], axis=1)
    loss = _cross_entropy_rows(logits, own, excluded)
    if symmetric:
        backward_logits = similarity_matrix(positives, anchors) / temperature
        backward = _cross_entropy_rows(backward_logits, own_square, same_group)
        loss = (loss + backward) / 2.0
    if mask_false_negatives:
        loss = nan_if_unlabelled(loss, groups)
    return loss


def _check_queue(queue, queue_mask, embeddings_shape):
    """Raises unless `queue` is `(size, dim)` and `queue_mask` `(size,)` or None."""
    shape, dim = tuple(queue.shape), embeddings_shape[-1]
    if len(shape) != 2 or (None not in (shape[1], dim) and shape[1] != dim):
        raise ValueError(
            f"`queue` should have shape (size, {dim}): one embedding of the embeddings' "
            f"dimension per entry. Received shape {shape} (embeddings {embeddings_shape})."
        )
    if queue_mask is not None:
        mask_shape = tuple(ops.shape(queue_mask))
        if len(mask_shape) != 1 or (
                None not in (mask_shape[0], shape[0]) and mask_shape[0] != shape[0]):
            raise ValueError(
                f"`queue_mask` should have shape ({shape[0]},): one value per `queue` entry. "
                f"Received shape {mask_shape}."
            )


@keras_cosent_export
class InfoNCELoss(LabelsCheckedLoss):
    """InfoNCE: each anchor must pick its own positive among all in-batch candidates.

    With `y_pred` of shape `(batch, 2 + k, dim)` (anchors, positives, `k` hard
    negatives), every anchor `a_i` is scored against all `batch * (1 + k)`
    candidates of the batch (every row's positive and hard negatives) and the
    loss is the cross-entropy of picking its own positive `p_i`:

    ```
    loss_i = -log( exp(cos(a_i, p_i) / t) / sum_c exp(cos(a_i, c) / t) )
    ```

    averaged over the batch by the Keras reduction (`call` returns one value
    per anchor, so `sample_weight` weights anchors). `t` is the temperature;
    sentence-transformers' `MultipleNegativesRankingLoss` writes the same loss
    with `scale = 1 / t` (`scale=20` is `temperature=0.05`); this class takes
    `temperature` only.

    With `symmetric=True` each positive must also pick its own anchor among
    all anchors of the batch, and the two directions are averaged per row, as
    in sentence-transformers' `MultipleNegativesSymmetricRankingLoss`.

    With `mask_false_negatives=True`, `y_true` is an integer group id per row
    (equal ids for rows whose positives are the same text, or share a label):
    for row `i` the positives of the other rows of its group are removed from
    the softmax (set to `-inf`), so duplicates are not pushed apart. Row `i`'s
    own positive is never removed, and hard negatives are never removed.
    Group ids travel as float32 through Keras, so keep them below 2**24.
    With `mask_false_negatives=False` (the default) `y_true` is ignored and
    may be anything, e.g. zeros, or None.

    Momentum-queue negatives (MoCo, ESimCSE): `y_pred` may also be a dict
    `{"embeddings": (batch, 2 + k, dim), "queue": (size, dim), "queue_mask":
    (size,)}`; every filled queue entry (`queue_mask` positive) is one more
    negative of every anchor, added to the softmax denominator:

    ```
    loss_i = -log( exp(cos(a_i, p_i) / t) /
                   (sum_c exp(cos(a_i, c) / t) + sum_q exp(cos(a_i, q) / t)) )
    ```

    The queue is not used by the `symmetric` backward direction and is never
    masked by group. `keras_cosent.models.MomentumContrastModel` builds this
    dict in its `compute_loss` from its queue of momentum-encoder embeddings.

    Unsupervised SimCSE (Gao et al. 2021) is this loss fed the same sentence
    in both columns, the two views differing only by the encoder's dropout:
    `keras_cosent.losses.InfoNCELoss(temperature=0.05)` on a
    `keras_cosent.models.SiameseEncoder` called on `[s, s]` in training mode.

    Args:
        temperature: positive float dividing the cosines. Defaults to 0.05.
        symmetric: bool, also add the positive -> anchor direction.
        mask_false_negatives: bool, remove same-group positives (by `y_true`)
            from each row's negatives.
        name: name of the loss instance.
        reduction: Keras reduction over the per-anchor losses.

    Inputs:
        y_true: int group ids of shape `(batch,)` or `(batch, 1)`; only read
            (and then required) when `mask_false_negatives=True`.
        y_pred: embeddings of shape `(batch, 2 + k, dim)`: column 0 anchors,
            column 1 positives, columns 2.. hard negatives (`k >= 0`); they
            need not be normalised. Or a dict of `embeddings` (that array),
            `queue` and `queue_mask` (see above).

    Returns:
        Float32 losses of shape `(batch,)` before reduction.

    Example:

    >>> import numpy as np
    >>> import keras_cosent
    >>> loss = keras_cosent.losses.InfoNCELoss(temperature=0.05)
    >>> anchors = np.eye(4, 8, dtype="float32")
    >>> tuples = np.stack([anchors, anchors + 0.1], axis=1)  # (4, 2, 8)
    >>> float(loss(np.zeros(4), tuples)) < 0.01
    True

    Reference:
        van den Oord et al., "Representation Learning with Contrastive
        Predictive Coding" (2018), https://arxiv.org/abs/1807.03748 ; Gao et
        al., "SimCSE: Simple Contrastive Learning of Sentence Embeddings"
        (2021), https://arxiv.org/abs/2104.08821

    Relations:
        - `keras_cosent.losses.CoSENTLoss` and `AnglELoss` need graded labels
          per pair; this loss needs only positive pairs (and optional hard
          negatives).
        - `keras_cosent.losses.get("simcse")` returns this class.
    """

    def __init__(
        self,
        temperature=0.05,
        symmetric=False,
        mask_false_negatives=False,
        name="infonce_loss",
        reduction="sum_over_batch_size",
    ):
        super().__init__(name=name, reduction=reduction)
        self.temperature = check_positive_float("temperature", temperature)
        self.symmetric = check_bool("symmetric", symmetric)
        self.mask_false_negatives = check_bool(
            "mask_false_negatives", mask_false_negatives
        )

    def labels_read(self):
        needs = "group ids" if self.mask_false_negatives else None
        return "InfoNCELoss(mask_false_negatives=True)", needs

    def call(self, y_true, y_pred):
        queue = queue_mask = None
        if isinstance(y_pred, dict):
            missing = {"embeddings", "queue"} - set(y_pred)
            if missing:
                raise ValueError(
                    "`InfoNCELoss` takes `y_pred` as an array or as a dict with "
                    f"`embeddings`, `queue` and optional `queue_mask`; missing {sorted(missing)}. "
                    f"Received keys {sorted(y_pred)}."
                )
            queue, queue_mask = y_pred["queue"], y_pred.get("queue_mask")
            y_pred = y_pred["embeddings"]
        return infonce_loss(
            y_true,
            y_pred,
            temperature=self.temperature,
            symmetric=self.symmetric,
            mask_false_negatives=self.mask_false_negatives,
            queue=queue,
            queue_mask=queue_mask,
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "temperature": self.temperature,
                "symmetric": self.symmetric,
                "mask_false_negatives": self.mask_false_negatives,
            }
        )
        return config
