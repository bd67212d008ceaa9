"""Corpus-level Spearman correlation: the pure function and the buffered metric.

Spearman's rho is the Pearson correlation of the ranks, and ranks need the whole
split at once, so `SpearmanCorrelation` keeps every (gold, predicted) pair of an
evaluation pass in fixed-size buffers (static shapes, so it runs inside compiled
`train_step`/`test_step` on every backend) and ranks them in `result()`.
"""

import keras
from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.metrics.pearson_correlation import _as_mask
from keras_cosent.metrics.pearson_correlation import _as_vector
from keras_cosent.metrics.pearson_correlation import _check_same_length
from keras_cosent.metrics.pearson_correlation import _flatten_inputs
from keras_cosent.metrics.pearson_correlation import pearson_correlation

DEFAULT_CAPACITY = 65536


def _average_ranks(x, mask):
    """1-based ranks of `x` among the rows where `mask`, ties sharing their mean rank.

    Masked rows are sent to +inf so that they sort after every real value and do
    not shift its rank; their own ranks are meaningless and must stay masked.
    After sorting, a run of equal values is a group; group g spans sorted
    positions [start_g, start_g+1), so each of its members gets the average
    1-based rank (start_g + 1 + start_g+1) / 2. Group starts are found with a
    second sort instead of `searchsorted`, which TensorFlow's XLA lowers to an
    n-by-n comparison (64 GiB at the default capacity). O(n log n) overall.
    """
    keyed = ops.where(mask, x, float("inf"))
    n = ops.shape(keyed)[0]
    order = ops.argsort(keyed)
    ordered = ops.take(keyed, order)
    position = ops.arange(n, dtype="int32")
    is_start = ops.logical_or(
        ops.equal(position, 0), ops.not_equal(ordered, ops.roll(ordered, 1))
    )
    group = ops.cumsum(ops.cast(is_start, "int32")) - 1
    # Starts of the groups in order, padded with n: starts[g + 1] ends group g.
    starts = ops.sort(ops.where(is_start, position, n))
    ends = ops.where(ops.equal(position, n - 1), n, ops.roll(starts, -1))
    rank_sorted = ops.cast(ops.take(starts, group) + ops.take(ends, group) + 1, "float32") / 2.0
    # Back to the input order. scatter_update, not scatter: torch's `scatter`
    # loops in Python and fails on the "meta" device Keras traces with.
    return ops.scatter_update(ops.zeros_like(keyed), ops.expand_dims(order, -1), rank_sorted)


def spearman_correlation(x, y, mask=None):
    """Spearman rank correlation of two vectors, ties getting average ranks.

    Equal to `scipy.stats.spearmanr(x, y).statistic` up to float32 rounding
    (SciPy's default: ties share the mean of their ranks). A NaN or infinite
    value in a row that counts gives NaN: NaN has no rank, and a diverged
    model's NaN cosines must not read as a score. SciPy's default gives NaN for
    a NaN too, but ranks an infinite value as the largest (or smallest).

    Args:
        x: vector of shape `(n,)` (or `(n, 1)`).
        y: vector of the same length.
        mask: optional boolean (or 0/1) vector; rows where it is false/0 are
            left out before ranking. Defaults to every row.

    Returns:
        A float32 scalar tensor in [-1, 1]; 0 when fewer than two rows are left
        or one side is constant (where SciPy would return NaN); NaN when a
        counted value is not finite.

    Example:

    >>> import keras_cosent
    >>> rho = keras_cosent.metrics.spearman_correlation(
    ...     [1.0, 2.0, 2.0, 3.0], [0.1, 0.3, 0.2, 0.9])
    >>> round(float(rho), 4)
    0.9487
    """
    x = _as_vector(x, "x")
    y = _as_vector(y, "y")
    _check_same_length(x, y, "x", "y")
    mask = _as_mask(mask, x)
    rho = pearson_correlation(_average_ranks(x, mask), _average_ranks(y, mask), mask)
    finite = ops.logical_and(ops.isfinite(x), ops.isfinite(y))
    counted_finite = ops.all(ops.logical_or(finite, ops.logical_not(mask)))
    return ops.where(counted_finite, rho, float("nan"))


@keras_cosent_export
class SpearmanCorrelation(keras.metrics.Metric):
    """Spearman correlation between gold scores and predicted cosines over a whole pass.

    This is the number STS benchmarks report: the rank correlation of the whole
    split, ties in the gold scores (e.g. Chinese STS-B's integer labels 0-5)
    getting average ranks, so that `model.evaluate` over a split equals
    `scipy.stats.spearmanr` on the concatenated predictions, whatever the batch
    sizes. `keras.metrics.PearsonCorrelation` instead averages per-batch values,
    which is neither rank-based nor corpus-level.

    Every batch is written into two float32 buffers of `capacity` rows (created
    once, so the metric works inside compiled train/test steps: `jax.jit`,
    `tf.function`, XLA, torch) and `result()` ranks the rows seen so far with
    sorts, O(capacity log capacity). Keras calls `result()`
    after each step to update the logs, so a capacity far above the split size
    costs time: the default, 65536 rows (512 KiB of state), holds every common
    STS split (STS-B train has 5,749 pairs); pass a smaller one to save time.

    If more than `capacity` rows arrive between two `reset_state()` calls the
    correlation cannot be computed from what was kept, and `result()` returns
    NaN rather than a value that silently ignores part of the split (the rows
    are still counted, so the NaN persists until `reset_state()`). Keras resets
    metrics at the start of each `evaluate()` and each training epoch.

    The buffers are not merged across replicas: use the metric for
    single-replica evaluation, or `keras_cosent.callbacks.SpearmanEvaluator`.

    Args:
        name: name of the metric, and of its key in the logs. Defaults to
            `"spearman"`.
        capacity: positive int, the most rows one pass may hold. Defaults to
            65536.
        dtype: dtype of the result. The state is always float32.

    Call arguments:
        y_true: gold similarity scores, shape `(batch,)` or `(batch, 1)`.
        y_pred: predicted cosines of shape `(batch,)`, or the pair embeddings of
            shape `(batch, 2, dim)` output by `keras_cosent.models.SiameseEncoder`
            (reduced with `keras_cosent.utils.pair_cosine`).
        sample_weight: optional, read as a mask: rows with weight 0 are not
            stored (they take no capacity) and every other row counts once.
            Weights are not otherwise applied (a weighted rank correlation is
            not what STS reports). Keras passes `sample_weight` only to metrics
            listed in `compile(weighted_metrics=...)`.

    Returns:
        `result()` is a scalar in [-1, 1]; 0 before two rows are seen or when a
        side is constant; NaN past `capacity`.

    Example:

    >>> import keras_cosent
    >>> m = keras_cosent.metrics.SpearmanCorrelation(capacity=16)
    >>> m.update_state([0.0, 1.0, 1.0], [0.1, 0.5, 0.3])
    >>> m.update_state([3.0, 5.0], [0.9, 0.8])
    >>> round(float(m.result()), 4)
    0.8721

    With a pair training model:
    `model.compile(loss=keras_cosent.losses.CoSENTLoss(),
    metrics=[keras_cosent.metrics.SpearmanCorrelation()])`.

    Reference:
        Reimers, Beyer and Gurevych, "Task-Oriented Intrinsic Evaluation of
        Semantic Textual Similarity", COLING 2016 (why STS uses Spearman).
    """

    def __init__(self, name="spearman", capacity=DEFAULT_CAPACITY, dtype=None):
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
            raise ValueError(
                "`capacity` should be a positive int. "
                f"Received: `capacity`={capacity!r}"
            )
        super().__init__(name=name, dtype=dtype)
        self._direction = "up"
        self.capacity = capacity
        # One spare slot past `capacity`: masked rows and rows past capacity are
        # scattered there, which keeps the update a single static-shape scatter.
        self.y_true_buffer = self.add_variable(
            shape=(capacity + 1,), initializer="zeros", dtype="float32", name="y_true_buffer"
        )
        self.y_pred_buffer = self.add_variable(
            shape=(capacity + 1,), initializer="zeros", dtype="float32", name="y_pred_buffer"
        )
        # Rows seen, including those past capacity (how overflow is detected).
        self.count = self.add_variable(shape=(), initializer="zeros", dtype="int32", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true, y_pred, mask = _flatten_inputs(y_true, y_pred, sample_weight)
        keep = ops.cast(mask, "int32")
        count = self.count.value
        position = count + ops.cumsum(keep) - 1
        slot = ops.where(
            ops.logical_and(mask, position < self.capacity), position, self.capacity
        )
        slot = ops.expand_dims(slot, -1)
        self.y_true_buffer.assign(ops.scatter_update(self.y_true_buffer.value, slot, y_true))
        self.y_pred_buffer.assign(ops.scatter_update(self.y_pred_buffer.value, slot, y_pred))
        self.count.assign(count + ops.sum(keep))

    def result(self):
        count = self.count.value
        stored = ops.arange(self.capacity) < count
        rho = spearman_correlation(
            self.y_true_buffer.value[: self.capacity],
            self.y_pred_buffer.value[: self.capacity],
            stored,
        )
        rho = ops.where(count > self.capacity, float("nan"), rho)
        return ops.cast(rho, self.dtype)

    def get_config(self):
        return {"name": self.name, "capacity": self.capacity, "dtype": self.dtype}
