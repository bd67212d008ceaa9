"""Several embedding losses on the same batch: `L = sum_i alpha_i * L_i`.

`JointLoss` holds named, weighted terms. A term may count only the rows whose
label is above a threshold (`positive_above`): InfoNCE on the pairs of an STS
batch scored above 2.5, say, while CoSENT ranks all of them; the other rows'
sentences stay in the batch as negatives. `SiameseEncoder` logs every term as
`loss_<name>` next to the total (`JointLoss.terms`).
"""

import keras
from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.losses._validation import WeightsPassingLoss
from keras_cosent.losses._validation import as_sequence
from keras_cosent.losses._validation import check_finite_float
from keras_cosent.losses._validation import check_non_negative_float
from keras_cosent.losses._validation import flat_labels
from keras_cosent.losses._validation import labels_read_by
from keras_cosent.losses._validation import nan_if_unlabelled
from keras_cosent.utils.arguments import is_log_name


def _check_losses(losses):
    """`losses` as a list of `keras.losses.Loss` (config dicts deserialised)."""
    checked = as_sequence(losses)
    if checked is not None:
        checked = [keras.losses.deserialize(l) if isinstance(l, dict) else l for l in checked]
    if not checked or any(not isinstance(l, keras.losses.Loss) for l in checked):
        raise ValueError(
            "`losses` should be a non-empty list of keras.losses.Loss instances "
            "(wrap a single loss in a list). "
            f"Received: `losses`={losses!r}"
        )
    return checked


def _one_per_loss(argument, value, count):
    """`value` as a list of `count` entries, one per loss, or a ValueError naming it.

    A string is one value, not a list of one-letter entries.
    """
    checked = as_sequence(value)
    if checked is None or len(checked) != count:
        raise ValueError(
            f"`{argument}` should be a list with one entry per loss ({count}). "
            f"Received: `{argument}`={value!r}"
        )
    return list(checked)


def _check_name(name):
    if not is_log_name(name):
        raise ValueError(
            "`names` entries should be non-empty strings of letters, digits, '_' or '-'. "
            f"Received: {name!r}"
        )
    return name


@keras_cosent_export
class JointLoss(WeightsPassingLoss):
    """Weighted sum of several losses computed on the same `y_true` and `y_pred`.

    Each term `i` is `weights[i] * losses[i](y_true, y_pred)`. With
    `positive_above[i] = t`, term `i` is the mean of `losses[i]`'s per-row
    values over the rows with `y_true > t` only (0 when the batch has none);
    the loss must then return one value per row (`InfoNCELoss`,
    `CosineMSELoss`, `TripletLoss`...), not a batch-level scalar (`CoSENTLoss`).
    A `sample_weight` goes to every term, which weighs its rows as its loss
    does alone; a term with `positive_above` takes the sum of its weighted
    rows over their count.

    Args:
        losses: non-empty list of `keras.losses.Loss` instances, all taking the
            batch's `(y_true, y_pred)`.
        weights: one finite float >= 0 per loss, at least one of them
            positive (`None`: 1 for each); a weight of 0 logs a term
            without training on it.
        names: one short name per loss, used in the logs (`loss_<name>`);
            `None` takes each loss's `name` without a `_loss` suffix.
        positive_above: `None`, or one entry per loss: `None` (all rows) or a
            label threshold.
        name: name of the loss instance.
        reduction: Keras reduction (on the scalar sum).

    Example:

    >>> import numpy as np
    >>> import keras_cosent
    >>> loss = keras_cosent.losses.JointLoss(
    ...     [keras_cosent.losses.InfoNCELoss(), keras_cosent.losses.CoSENTLoss()],
    ...     weights=[1.0, 0.5], positive_above=[2.5, None])
    >>> loss.names
    ('infonce', 'cosent')
    >>> scores = np.array([4.0, 1.0, 5.0], "float32")
    >>> pairs = np.random.default_rng(0).normal(size=(3, 2, 8)).astype("float32")
    >>> terms = loss.terms(scores, pairs)
    >>> total = 1.0 * float(terms["infonce"]) + 0.5 * float(terms["cosent"])
    >>> bool(np.isclose(float(loss(scores, pairs)), total))
    True
    """

    def __init__(
        self,
        losses,
        weights=None,
        names=None,
        positive_above=None,
        name="joint_loss",
        reduction="sum_over_batch_size",
    ):
        super().__init__(name=name, reduction=reduction)
        losses = _check_losses(losses)
        count = len(losses)

        def per_loss(value, default, argument):
            return [default] * count if value is None else _one_per_loss(argument, value, count)

        weights = [
            check_non_negative_float("weights", w) for w in per_loss(weights, 1.0, "weights")
        ]
        if not any(weights):
            raise ValueError(
                "`weights` should give at least one loss a positive weight. "
                f"Received: `weights`={weights!r}"
            )
        names = per_loss(names, None, "names")
        names = [
            _check_name(n if n is not None else l.name.removesuffix("_loss"))
            for n, l in zip(names, losses)
        ]
        if len(set(names)) != count:
            raise ValueError(f"`names` should be distinct. Received: `names`={names!r}")
        thresholds = [
            None if t is None else check_finite_float("positive_above", t)
            for t in per_loss(positive_above, None, "positive_above")
        ]
        self.losses = list(losses)
        self.weights = tuple(weights)
        self.names = tuple(names)
        self.positive_above = tuple(thresholds)

    def _term(self, loss, threshold, y_true, y_pred, sample_weight=None):
        if threshold is None:
            if sample_weight is None:
                return ops.cast(loss(y_true, y_pred), "float32")
            return ops.cast(loss(y_true, y_pred, sample_weight=sample_weight), "float32")
        per_row = ops.cast(loss.call(y_true, y_pred), "float32")
        if len(per_row.shape) != 1:
            raise ValueError(
                f"`JointLoss` term {loss.name!r} has a `positive_above` threshold, so it must "
                f"return one value per row; it returned shape {tuple(per_row.shape)}."
            )
        labels = ops.cast(
            flat_labels(y_true, per_row, "JointLoss(positive_above=...)", rows="rows"), "float32"
        )
        selected = ops.cast(labels > threshold, "float32")
        count = ops.sum(selected)
        if sample_weight is not None:
            # Weighted as Keras weighs rows: the sum over the rows counted, divided
            # by how many there are.
            per_row = per_row * ops.reshape(ops.cast(sample_weight, "float32"), (-1,))
        return nan_if_unlabelled(ops.sum(per_row * selected) / ops.maximum(count, 1.0), labels)

    def labels_read(self):
        if any(threshold is not None for threshold in self.positive_above):
            return "JointLoss(positive_above=...)", "labels"
        for loss in self.losses:
            read = labels_read_by(loss)
            if read[1] is not None:
                return read
        return "JointLoss", None

    def terms(self, y_true, y_pred, sample_weight=None):
        """Each term's value before weighting, as a dict `{name: float32 scalar}`."""
        return {
            name: self._term(loss, threshold, y_true, y_pred, sample_weight)
            for name, loss, threshold in zip(self.names, self.losses, self.positive_above)
        }

    def call(self, y_true, y_pred, sample_weight=None):
        terms = self.terms(y_true, y_pred, sample_weight)
        return sum(weight * terms[name] for name, weight in zip(self.names, self.weights))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "losses": [keras.losses.serialize(loss) for loss in self.losses],
                "weights": list(self.weights),
                "names": list(self.names),
                "positive_above": list(self.positive_above),
            }
        )
        return config
