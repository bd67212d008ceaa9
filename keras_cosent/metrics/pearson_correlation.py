"""Corpus-level Pearson correlation: the pure function and the streaming metric.

STS benchmarks report one correlation over the whole split. `pearson_correlation`
computes it on tensors that hold the whole split; `PearsonCorrelation` gets the
same value from batches by merging centred co-moments, so it needs no buffer and
has no size limit. The moment helpers here are also what
`keras_cosent.metrics.spearman_correlation` uses on ranks.
"""

import keras
from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.utils import pair_cosine


def _as_vector(x, arg_name):
    x = ops.cast(ops.convert_to_tensor(x), "float32")
    if len(x.shape) == 2 and x.shape[-1] == 1:
        x = ops.squeeze(x, axis=-1)
    if len(x.shape) != 1:
        raise ValueError(
            f"`{arg_name}` should be a vector of shape (n,). "
            f"Received: `{arg_name}` of shape {tuple(x.shape)}."
        )
    return x


def _as_mask(mask, like, arg_name="mask", like_name="x"):
    """Reads `mask` (bool or 0/1 weights) as a boolean vector shaped like `like`."""
    if mask is None:
        return ops.ones_like(like, dtype="bool")
    mask = ops.convert_to_tensor(mask)
    if mask.dtype != "bool":
        mask = ops.not_equal(mask, 0)
    mask = ops.reshape(mask, (-1,))
    _check_same_length(like, mask, like_name, arg_name)
    return mask


def _check_same_length(a, b, a_name, b_name):
    if a.shape[0] is not None and b.shape[0] is not None and a.shape[0] != b.shape[0]:
        raise ValueError(
            f"`{a_name}` and `{b_name}` should have the same length. Received: "
            f"`{a_name}` of shape {tuple(a.shape)}, `{b_name}` of shape {tuple(b.shape)}."
        )


def _moments(x, y, mask):
    """Count, means and centred (co-)moments of the rows of `x`, `y` where `mask`.

    Centring before multiplying (two passes) keeps float32 accurate where
    `sum(x * y) - n * mean_x * mean_y` would cancel catastrophically.
    """
    weight = ops.cast(mask, "float32")
    n = ops.sum(weight)
    mean_x = ops.divide_no_nan(ops.sum(ops.where(mask, x, 0.0)), n)
    mean_y = ops.divide_no_nan(ops.sum(ops.where(mask, y, 0.0)), n)
    # `where` rather than multiplying by the mask: masked slots may hold inf.
    dx = ops.where(mask, x - mean_x, 0.0)
    dy = ops.where(mask, y - mean_y, 0.0)
    return n, mean_x, mean_y, ops.sum(dx * dx), ops.sum(dy * dy), ops.sum(dx * dy)


def _merge_moments(a, b):
    """Moments of the union of two disjoint sets of rows (Chan et al., 1979)."""
    n_a, mean_x_a, mean_y_a, m2_x_a, m2_y_a, c_a = a
    n_b, mean_x_b, mean_y_b, m2_x_b, m2_y_b, c_b = b
    n = n_a + n_b
    delta_x = mean_x_b - mean_x_a
    delta_y = mean_y_b - mean_y_a
    share_b = ops.divide_no_nan(n_b, n)
    # n_a * n_b / n, written so that it does not overflow for large counts.
    cross = n_a * share_b
    return (
        n,
        mean_x_a + delta_x * share_b,
        mean_y_a + delta_y * share_b,
        m2_x_a + m2_x_b + delta_x * delta_x * cross,
        m2_y_a + m2_y_b + delta_y * delta_y * cross,
        c_a + c_b + delta_x * delta_y * cross,
    )


def _extremes(x, mask):
    """Smallest and largest of the rows of `x` where `mask` (inf and -inf if none)."""
    # Padded with one sentinel: the min of no rows at all fails on PyTorch.
    inf = float("inf")
    return (ops.min(ops.pad(ops.where(mask, x, inf), [(0, 1)], constant_values=inf)),
            ops.max(ops.pad(ops.where(mask, x, -inf), [(0, 1)], constant_values=-inf)))


def _correlation_from_moments(m2_x, m2_y, c_xy, constant):
    # sqrt of each factor separately: m2_x * m2_y overflows float32 for ranks of
    # very large splits. A constant side gives 0, not NaN. Its variance is not
    # exactly 0 in float32 (the running mean is rounded), and the ratio of
    # those rounding residues is arbitrary: `constant` comes from the side's
    # smallest and largest values instead.
    # NaN or inf among the values makes the moments NaN: that stays NaN even
    # when the other side is constant, as in `spearman_correlation`, so that a
    # diverged model's scores never read as a correlation of 0.
    r = ops.divide_no_nan(c_xy, ops.sqrt(m2_x) * ops.sqrt(m2_y))
    r = ops.where(constant, 0.0, ops.clip(r, -1.0, 1.0))
    broken = ops.logical_or(ops.isnan(c_xy), ops.logical_or(ops.isnan(m2_x), ops.isnan(m2_y)))
    return ops.where(broken, float("nan"), r)


def _is_constant(low_x, high_x, low_y, high_y):
    return ops.logical_or(high_x <= low_x, high_y <= low_y)


def pearson_correlation(x, y, mask=None):
    """Pearson correlation of two vectors, computed in float32 with keras.ops.

    Args:
        x: vector of shape `(n,)` (or `(n, 1)`).
        y: vector of the same length.
        mask: optional boolean (or 0/1) vector; rows where it is false/0 are
            left out. Defaults to every row.

    Returns:
        A float32 scalar tensor in [-1, 1]; 0 when fewer than two rows are left
        or one side is constant (where SciPy would return NaN); NaN when a
        value is NaN or inf, constant side or not.

    Example:

    >>> import keras_cosent
    >>> r = keras_cosent.metrics.pearson_correlation([1.0, 2.0, 3.0], [1.0, 2.0, 4.0])
    >>> round(float(r), 4)
    0.982
    """
    x = _as_vector(x, "x")
    y = _as_vector(y, "y")
    _check_same_length(x, y, "x", "y")
    mask = _as_mask(mask, x)
    _, _, _, m2_x, m2_y, c_xy = _moments(x, y, mask)
    constant = _is_constant(*_extremes(x, mask), *_extremes(y, mask))
    return _correlation_from_moments(m2_x, m2_y, c_xy, constant)


def _flatten_inputs(y_true, y_pred, sample_weight):
    """Gold scores, predicted cosines and the keep-mask of one batch, as vectors."""
    y_pred = pair_cosine(y_pred)
    y_true = _as_vector(ops.cast(ops.convert_to_tensor(y_true), "float32"), "y_true")
    _check_same_length(y_true, y_pred, "y_true", "y_pred")
    mask = _as_mask(sample_weight, y_pred, "sample_weight", "y_pred")
    return y_true, y_pred, mask


@keras_cosent_export
class PearsonCorrelation(keras.metrics.Metric):
    """Pearson correlation between gold scores and predicted cosines over a whole pass.

    Unlike `keras.metrics.PearsonCorrelation`, which averages one correlation
    per batch (a number that depends on the batch size and differs from what STS
    benchmarks report), this metric accumulates the centred co-moments of every
    batch and merges them, so `result()` after an evaluation pass is the Pearson
    correlation of the concatenated split, equal to `scipy.stats.pearsonr` up to
    float32 rounding (1e-7 on cosines and STS scores; the running means are
    float32 too, so values whose spread is a millionth of their size, 1e4 give
    or take 0.01, lose up to 1e-2 over a hundred batches). The state is ten
    scalars (the moments, and each side's smallest and largest value, which
    tell a constant side exactly): there is no size limit.

    Args:
        name: name of the metric, and of its key in the logs. Defaults to
            `"pearson"`.
        dtype: dtype of the result. The state is always float32.

    Call arguments:
        y_true: gold similarity scores, shape `(batch,)` or `(batch, 1)`.
        y_pred: predicted cosines of shape `(batch,)`, or the pair embeddings of
            shape `(batch, 2, dim)` output by `keras_cosent.models.SiameseEncoder`
            (reduced with `keras_cosent.utils.pair_cosine`).
        sample_weight: optional, read as a mask: rows with weight 0 are ignored
            and every other row counts once. Weights are not otherwise applied
            (STS correlations are unweighted). Keras passes `sample_weight` only
            to metrics listed in `compile(weighted_metrics=...)`.

    Returns:
        `result()` is a scalar in [-1, 1]; 0 before two rows are seen or when a
        side is constant; NaN once a NaN or inf value has been seen.

    Example:

    >>> import keras_cosent
    >>> m = keras_cosent.metrics.PearsonCorrelation()
    >>> m.update_state([0.0, 1.0], [0.1, 0.5])
    >>> m.update_state([2.0, 3.0, 5.0], [0.2, 0.9, 0.8])
    >>> round(float(m.result()), 4)
    0.772

    With a pair training model:
    `model.compile(loss=keras_cosent.losses.CoSENTLoss(),
    metrics=[keras_cosent.metrics.PearsonCorrelation()])`.

    Reference:
        Chan, Golub and LeVeque, "Updating formulae and a pairwise algorithm for
        computing sample variances", 1979 (the co-moment merge).
    """

    def __init__(self, name="pearson", dtype=None):
        super().__init__(name=name, dtype=dtype)
        # Metric should be maximised (used by callbacks with mode="auto").
        self._direction = "up"
        self._state = [
            self.add_variable(shape=(), initializer="zeros", dtype="float32", name=n)
            for n in ("count", "mean_true", "mean_pred", "m2_true", "m2_pred", "comoment")
        ]
        # Meaningful once `count` > 0 (zeros after `reset_state`, as the rest).
        self._extremes = [
            self.add_variable(shape=(), initializer="zeros", dtype="float32", name=n)
            for n in ("min_true", "max_true", "min_pred", "max_pred")
        ]

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true, y_pred, mask = _flatten_inputs(y_true, y_pred, sample_weight)
        batch = _moments(y_true, y_pred, mask)
        seen = self._state[0].value > 0
        batch_extremes = _extremes(y_true, mask) + _extremes(y_pred, mask)
        for i, (variable, value) in enumerate(zip(self._extremes, batch_extremes)):
            keep = ops.minimum if i % 2 == 0 else ops.maximum
            variable.assign(ops.where(seen, keep(variable.value, value), value))
        merged = _merge_moments([v.value for v in self._state], batch)
        for variable, value in zip(self._state, merged):
            variable.assign(value)

    def result(self):
        _, _, _, m2_true, m2_pred, comoment = (v.value for v in self._state)
        constant = _is_constant(*(v.value for v in self._extremes))
        return ops.cast(_correlation_from_moments(m2_true, m2_pred, comoment, constant),
                        self.dtype)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}
