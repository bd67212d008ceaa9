"""CoSENT, the ranking loss on pair cosines that this package is named after.

`cosent_loss` holds the maths; `CoSENTLoss` wraps it as a `keras.losses.Loss`.
`ranking_loss_from_similarity` is the ranking step alone, which
`keras_cosent.losses.AnglELoss` reuses with its own similarity; it sorts the
batch by label and needs no `batch x batch` matrix.
"""

from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.losses._validation import LabelsCheckedLoss
from keras_cosent.losses._validation import check_pair_embeddings
from keras_cosent.losses._validation import check_positive_float
from keras_cosent.losses._validation import flat_labels
from keras_cosent.utils import pair_cosine


def cumulative_logsumexp(x):
    """`log(sum(exp(x[:k + 1])))` for every `k`, of a 1-D float tensor.

    A doubling (Hillis-Steele) scan of log-add-exp: `ceil(log2(n))` steps
    of `n` element-wise operations, exact for any range of `x`. One
    `ops.cumsum` of `exp(x - max(x))` would be cheaper, but its terms underflow
    to 0 in float32 once `max(x) - x` passes about 87 (a cosine range of 2 at
    scale 44), and a prefix made only of such terms would come out as
    `log(0) = -inf` instead of its value. `ops.associative_scan` is not used:
    its torch version allocates its buffers on the CPU whatever the input's
    device.

    Args:
        x: float tensor of shape `(n,)`. When `n` is not known while tracing
            (TensorFlow graphs of `model.fit`), the scan takes the 31 steps
            that cover any batch up to `2**31` rows; the extra steps only
            copy the tensor.

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_cosent.losses.cosent_loss import cumulative_logsumexp
    >>> x = np.array([0.0, -100.0, 3.0], "float32")
    >>> np.allclose(ops.convert_to_numpy(cumulative_logsumexp(x)),
    ...             np.logaddexp.accumulate(x.astype("float64")))
    True
    """
    x = ops.convert_to_tensor(x)
    n = x.shape[0]
    steps = 31 if n is None else max(n - 1, 0).bit_length()
    index = ops.arange(ops.shape(x)[0])
    for step in (2**i for i in range(steps)):
        # After this step entry k holds the sum over x[k - 2 * step + 1 : k + 1],
        # from the partial sums it and entry k - step held; the first `step`
        # entries are already complete. A gather and a `where` rather than
        # slices keep every step's shapes equal, so that eager JAX compiles
        # each operation once rather than once per step (10 times faster).
        earlier = ops.take(x, ops.maximum(index - step, 0))
        x = ops.where(index >= step, _logaddexp(x, earlier), x)
    return x


def _logaddexp(a, b):
    """`log(exp(a) + exp(b))` for finite `a` and `b`, with exact gradients at ties.

    `ops.logaddexp` is not used: under TensorFlow its gradient at `a == b`
    is (1, 0) instead of (1/2, 1/2), as `tf.maximum` gives the whole gradient
    to one argument; cosines of exactly +1 or -1 make such ties common. Here
    the shift is a constant for the gradient, which is then the softmax of
    `(a, b)` on every backend.
    """
    shift = ops.stop_gradient(ops.maximum(a, b))
    return shift + ops.log(ops.exp(a - shift) + ops.exp(b - shift))


def ranking_loss_from_similarity(y_true, similarity, scale=20.0, loss_name="CoSENTLoss"):
    """CoSENT ranking of one similarity per pair against the pairs' labels.

    Returns `log(1 + sum_{a, b: label_a > label_b} exp(scale * (s_b - s_a)))`
    as a float32 scalar. Pairs with equal labels are not compared, so a batch
    without any ordered pair (an empty one too) gives exactly 0; a NaN label
    (a missing score) gives NaN.

    The double sum factors as `sum_a exp(-scale * s_a) * sum_{b: label_b <
    label_a} exp(scale * s_b)`: with the batch sorted by label, the inner sum
    is a prefix sum that stops before pair `a`'s tie group (found with
    `searchsorted`), so the loss is one `logsumexp` over `batch` terms built
    from a cumulative log-sum-exp (`cumulative_logsumexp`). That is
    O(batch log batch) time and memory, against the `batch**2` matrix of
    differences the formula spells out; it gives the same value and the same
    gradients, in float32 and without overflow for any scale.

    Args:
        y_true: labels of shape `(batch,)` or `(batch, 1)`, any ordered values, compared
            in float32 (as Keras' `Loss` casts them): values closer than its
            resolution, such as integers above 2**24, tie.
        similarity: similarities of shape `(batch,)`.
        scale: positive float multiplying the similarities (anything else
            raises a `ValueError`).
        loss_name: name used in error messages.

    Example:

    >>> import numpy as np
    >>> from keras_cosent.losses.cosent_loss import ranking_loss_from_similarity
    >>> labels = np.array([1.0, 1.0, 0.0], "float32")  # pairs 0 and 1 are tied
    >>> similarity = np.array([0.2, 0.9, 0.5], "float32")
    >>> expected = np.log(1 + np.exp(20 * (0.5 - 0.2)) + np.exp(20 * (0.5 - 0.9)))
    >>> bool(np.isclose(float(ranking_loss_from_similarity(labels, similarity)), expected))
    True
    """
    # A scale <= 0 would reward mis-ranking (or ignore it) with a finite loss.
    scale = check_positive_float("scale", scale)
    similarity = ops.cast(similarity, "float32")
    labels = ops.cast(flat_labels(y_true, similarity, loss_name), "float32")
    # Sorting places a NaN label differently on each backend (first, last, or
    # nowhere), so the loss would be a finite number that depends on the
    # backend; like the other losses that read labels, it is NaN instead.
    unlabelled = ops.any(ops.isnan(labels))
    order = ops.argsort(labels)
    labels = ops.take(labels, order)
    scaled = ops.take(similarity, order) * scale
    # below[a]: how many pairs have a label strictly lower than pair a's; a
    # tie group starts where its first member would be inserted on the left.
    below = ops.searchsorted(labels, labels, side="left")
    # prefix[n] = log(sum of exp(scaled[:n])); prefix[0] = -inf for the pairs
    # with nothing below them: exp(-inf) is exactly 0 in the value and in the
    # gradient of logsumexp, whatever the scale.
    prefix = ops.concatenate(
        [ops.full((1,), float("-inf"), dtype="float32"), cumulative_logsumexp(scaled)],
        axis=0,
    )
    # terms[a] = log(sum_{b below a} exp(scale * (s_b - s_a))).
    loss = _log1p_sum_exp(ops.take(prefix, below) - scaled)
    return ops.where(unlabelled, float("nan"), loss)


def _log1p_sum_exp(terms):
    """`log(1 + sum(exp(terms)))`, accurate for small values, 0 when all are -inf.

    With `shift = max(0, max(terms))` it is `shift + log1p(expm1(-shift) +
    sum(exp(terms - shift)))`: the sum stays at most `len(terms)`, `log1p`
    keeps the digits of a loss near 0 that `log(1 + ...)` would round away
    (a well-ranked batch), and the shift is finite even when every term is
    -inf, so no NaN reaches the gradient. The shift cancels out, so it needs
    no gradient.
    """
    # max over the terms and 0: an empty batch has no term (and its loss is 0).
    shift = ops.stop_gradient(
        ops.max(ops.concatenate([terms, ops.zeros((1,), dtype=terms.dtype)], axis=0))
    )
    rest = ops.sum(ops.exp(terms - shift))
    return shift + ops.log1p(ops.expm1(-shift) + rest)


def cosent_loss(y_true, y_pred, scale=20.0):
    """CoSENT loss of one batch of labelled pairs, as a float32 scalar.

    `log(1 + sum over pairs (i,j), (k,l) with label(i,j) > label(k,l) of
    exp(scale * (cos(k,l) - cos(i,j))))`. See `keras_cosent.losses.CoSENTLoss`
    for the arguments, checked as the class checks them (`scale` by
    `ranking_loss_from_similarity`).
    """
    y_pred = ops.convert_to_tensor(y_pred)
    check_pair_embeddings(y_pred, "CoSENTLoss")
    return ranking_loss_from_similarity(
        y_true, pair_cosine(y_pred), scale=scale, loss_name="CoSENTLoss"
    )


@keras_cosent_export
class CoSENTLoss(LabelsCheckedLoss):
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
    gives a loss of exactly 0, and a NaN label (a missing score) gives NaN.
    The sum runs over all ordered couples of pairs but is computed without the
    `batch**2` matrix: sorted by label, it is a cumulative log-sum-exp (see
    `ranking_loss_from_similarity`), in O(batch log batch) time and memory, in
    float32, finite for any scale up to half of float32's maximum (the loss
    is at most `2 * scale + log(1 + couples)`) and under `mixed_float16`, so
    batches of tens of thousands of pairs fit.

    The loss is one value per batch (the couples mix examples), so
    `sample_weight` can only rescale it as a whole.

    Args:
        scale: positive float, the inverse temperature multiplying cosine
            differences. Defaults to 20 (the CoSENT paper's and
            sentence-transformers' default).
        name: name of the loss instance.
        reduction: Keras reduction; the loss is already one scalar per batch.

    Inputs:
        y_true: labels of shape `(batch,)` or `(batch, 1)`: any ordered values, compared
            in float32 (as Keras' `Loss` casts them): values closer than its
            resolution, such as integers above 2**24, tie.
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

    def labels_read(self):
        return "CoSENTLoss", "one label per pair"

    def call(self, y_true, y_pred):
        return cosent_loss(y_true, y_pred, scale=self.scale)

    def get_config(self):
        config = super().get_config()
        config.update({"scale": self.scale})
        return config
