"""Argument and shape checks shared by the losses in `keras_cosent.losses`.

Kept in one place so that every loss words its errors the same way: the name
of the argument, what was expected, and the value received.
"""

import re

import keras
import numpy as np
from keras import ops

from keras_cosent.compat import reduce_loss_values
from keras_cosent.utils.arguments import FLOAT32_EXACT_INTEGERS
from keras_cosent.utils.arguments import check_bool  # noqa: F401  (the losses' import point)
from keras_cosent.utils.arguments import check_finite_float  # noqa: F401
from keras_cosent.utils.arguments import check_non_negative_float  # noqa: F401
from keras_cosent.utils.arguments import check_positive_float  # noqa: F401
from keras_cosent.utils.arguments import first_inexact_integer


def check_one_of(name, value, options):
    """Returns `value`, or raises if it is not one of `options`."""
    # Options are strings or None; anything else (an array, say) is refused
    # before `in` compares it.
    if not ((value is None or isinstance(value, str)) and value in options):
        raise ValueError(
            f"`{name}` should be one of {options}. Received: `{name}`={value!r}"
        )
    return value


def as_sequence(value):
    """`value` as a tuple, or None if it is not a sequence.

    Strings, dicts, numbers and single `keras.losses.Loss` objects are not
    sequences here, so that an argument expecting a list of them can say so
    rather than iterate over characters or fail with "not iterable".
    """
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        return None
    return tuple(value)


def check_pair_embeddings(y_pred, loss_name):
    """Raises, naming the loss, unless `y_pred` is `(batch,)` cosines (or
    `(batch, 1)`) or `(batch, 2, dim)` pairs.

    `keras_cosent.utils.pair_cosine` would silently ignore a third column; a
    pair loss fed (anchor, positive, negative) triplets most likely got the
    wrong loss, so it is refused here.
    """
    shape = tuple(y_pred.shape)
    if len(shape) == 3 and shape[1] is not None and shape[1] != 2:
        raise ValueError(
            f"`{loss_name}` scores pairs: `y_pred` should have shape "
            f"(batch,) or (batch, 2, dim). Received shape {shape}. For "
            "(anchor, positive, negative...) tuples use "
            "`keras_cosent.losses.InfoNCELoss`."
        )
    if len(shape) not in (1, 3) and not (len(shape) == 2 and shape[-1] == 1):
        raise ValueError(
            f"`{loss_name}` scores pairs: `y_pred` should have shape (batch,) with one "
            "cosine per pair, or (batch, 2, dim) with the pair's embeddings. Received "
            f"shape {shape}."
        )


def check_labels_given(y_true, loss_name, labels="labels"):
    """Returns `y_true`, or raises naming the missing `labels` if it is None.

    Converted to a tensor, None fails with each backend's own message (JAX's
    "None is not a valid value for jnp.array", PyTorch's "Invalid dtype:
    object"), which does not say that the labels are missing.
    """
    if y_true is None:
        raise ValueError(
            f"`{loss_name}` reads {labels} from `y_true`, which is missing. "
            f"Received: `y_true`=None"
        )
    first = _first_text(y_true)
    if first is not None:
        # Each backend failed on its own terms ("Invalid dtype: str32", "could
        # not convert string to float"), without naming y_true.
        raise ValueError(
            f"`{loss_name}` reads {labels} from `y_true` as numbers; received text "
            f"(first: {first!r}). Map class names to ids 0, 1, ... first, as "
            "`keras_cosent.data.read_columns(..., classes=True)` does."
        )
    inexact = first_inexact_integer(y_true)
    if inexact is not None:
        raise ValueError(
            f"`{loss_name}` reads {labels} from `y_true` in float32, which cannot tell "
            f"integers beyond 2**24 = {FLOAT32_EXACT_INTEGERS} apart; received "
            f"{inexact[1]} at index {inexact[0]}. Renumber the ids 0, 1, ..."
        )
    return y_true


def check_sample_weight(sample_weight, y_pred, loss_name):
    """Raises unless `sample_weight` is None, one number, or one weight per row of `y_pred`.

    Keras multiplies the weights into the loss's values by broadcasting: a loss
    of one value per batch took any number of weights (their mean rescaled it),
    and one of a value per row failed with the backend's own message.

    Returns `sample_weight`. Where a traced function leaves the batch size
    unknown (TensorFlow's `fit`), the weights come back multiplied by ones of
    `y_pred`'s rows inside a name scope that states the rule: the same
    weights, and a count that differs fails the step (XLA ignores assertions,
    and TensorFlow's graph optimiser removes a reshape) with an error whose
    node names the loss and the rule, where a loss of one value per batch
    would otherwise have taken them.
    """
    if sample_weight is None:
        return None
    shape = _shape(sample_weight)
    if not shape:
        return sample_weight
    rows = _shape(y_pred)[:1]
    rows = rows[0] if rows else None
    if (len(shape) > 2 or (len(shape) == 2 and shape[1] not in (1, None))
            or (shape[0] is not None and rows is not None and shape[0] != rows)):
        raise ValueError(
            f"`{loss_name}` takes one `sample_weight` per row of `y_pred` ({rows}): shape "
            f"(batch,) or (batch, 1). Received shape {shape}."
        )
    if _shape(y_pred) and (shape[0] is None or rows is None):
        rule = _rule_scope(f"{loss_name}_takes_one_sample_weight_per_row_of_y_pred")
        with keras.name_scope(rule):
            sample_weight = ops.convert_to_tensor(sample_weight)
            sample_weight = sample_weight * ops.ones(
                (ops.shape(y_pred)[0],) + (1,) * (len(shape) - 1), sample_weight.dtype)
    return sample_weight


def _rule_scope(rule):
    """`rule` as a TensorFlow name scope: characters other than `[A-Za-z0-9_.-]` become `_`."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", rule)


def _shape(value):
    """A tensor's, array's or nested list's shape, as a tuple."""
    shape = getattr(value, "shape", None)
    return tuple(np.shape(value) if shape is None else shape)


def _first_text(y_true):
    """The first string label of a host `y_true` (str, list, NumPy array), else None."""
    if isinstance(y_true, (str, bytes)):
        return y_true
    if isinstance(y_true, np.ndarray) and y_true.dtype.kind not in "USO":
        return None  # numbers: nothing to walk through
    if isinstance(y_true, (list, tuple, np.ndarray)):
        for value in np.asarray(y_true, dtype=object).ravel():
            if isinstance(value, (str, bytes)):
                return value
    return None


class LabelsCheckedLoss(keras.losses.Loss):
    """A `keras.losses.Loss` that checks `y_true` before Keras converts it.

    The base of keras-cosent's losses. Keras' `Loss.__call__` converts
    `y_true` to a tensor before `call`, so None fails there with a backend's
    own message. Subclasses say what they read from `y_true` with
    `labels_read`: a loss that reads labels then refuses a missing `y_true` by
    name; one that ignores them takes None, as its functional form does, and
    gets a zero in its place, never read (keras-cosent's training feeds these
    losses zeros).
    """

    def labels_read(self):
        """`(loss name, what it reads from y_true)`; None for the second if nothing."""
        return type(self).__name__, "labels"

    def _checked_labels(self, y_true):
        loss_name, labels = self.labels_read()
        if labels is not None:
            check_labels_given(y_true, loss_name, labels)
        elif y_true is None:
            y_true = 0.0
        return y_true

    def __call__(self, y_true, y_pred, sample_weight=None):
        sample_weight = check_sample_weight(sample_weight, y_pred, type(self).__name__)
        return super().__call__(self._checked_labels(y_true), y_pred, sample_weight=sample_weight)


class WeightsPassingLoss(LabelsCheckedLoss):
    """A loss made of other losses, which passes `sample_weight` on to each of them.

    Each inner loss then weighs its own rows (anchors, pairs) as it does on its
    own; Keras would instead multiply the combined scalar by every weight and
    average, which for a loss of one value per batch scales it by the mean
    weight whatever rows the weights were given to. Subclasses implement
    `call(y_true, y_pred, sample_weight=None)`.
    """

    def __call__(self, y_true, y_pred, sample_weight=None):
        if sample_weight is None:
            return super().__call__(y_true, y_pred)
        sample_weight = check_sample_weight(sample_weight, y_pred, type(self).__name__)
        # Converted as Keras' `Loss.__call__` converts them before `call`.
        y_true, y_pred, sample_weight = keras.tree.map_structure(
            lambda x: ops.convert_to_tensor(x, dtype=self.dtype),
            (self._checked_labels(y_true), y_pred, sample_weight))
        values = self.call(y_true, y_pred, sample_weight=sample_weight)
        # Reduced by this loss's own `reduction`, as `Loss.__call__` reduces: an
        # inner loss with `reduction="none"` makes `call` return one value per row.
        return ops.cast(reduce_loss_values(values, sample_weight, self.reduction), self.dtype)


def labels_read_by(loss):
    """What `loss` reads from `y_true` (see `LabelsCheckedLoss.labels_read`).

    A Keras loss of another kind is taken to read its labels.
    """
    if isinstance(loss, LabelsCheckedLoss):
        return loss.labels_read()
    return type(loss).__name__, "labels"


def nan_if_unlabelled(value, labels):
    """`value`, or NaN in its place when any of the float `labels` is NaN.

    A NaN label is a missing one. Compared (same class, same group, above a
    threshold) it reads as False, so the loss would be a finite number that
    quietly treats the row as unmatched; like CoSENT and the other losses of
    scores, a loss that compares labels is NaN instead, which fit stops on.
    """
    if not keras.backend.is_float_dtype(labels.dtype):
        return value
    return ops.where(ops.any(ops.isnan(labels)), float("nan"), value)


def flat_labels(y_true, batch_values, loss_name, rows="pairs"):
    """Flattens `(batch,)` or `(batch, 1)` labels, checking the shape and batch size."""
    check_labels_given(y_true, loss_name, f"one label per {rows[:-1]}")
    y_true = ops.convert_to_tensor(y_true)
    shape = tuple(y_true.shape)
    if len(shape) > 2 or (len(shape) == 2 and shape[1] not in (1, None)):
        # A (2, 2) matrix for 4 pairs has the right size but is not one label
        # per row: flattening it would pair labels with rows by accident.
        raise ValueError(
            f"`{loss_name}` expects one label per {rows[:-1]}: `y_true` should have shape "
            f"(batch,) or (batch, 1). Received shape {shape}."
        )
    labels = ops.reshape(y_true, (-1,))
    n_labels, n_values = labels.shape[0], batch_values.shape[0]
    if n_labels is not None and n_values is not None and n_labels != n_values:
        raise ValueError(
            f"`{loss_name}` expects one label per {rows[:-1]}: `y_true` of shape "
            f"{tuple(y_true.shape)} does not match {n_values} {rows} in `y_pred`."
        )
    if n_labels is None or n_values is None:
        # A traced step of unknown batch size (TensorFlow's `fit`): the same
        # labels, and a count that differs fails at a node that states the
        # rule, where CoSENT would rank the pairs that have a label
        # (see `check_sample_weight`).
        with keras.name_scope(_rule_scope(f"{loss_name}_expects_one_label_per_{rows[:-1]}")):
            labels = labels * ops.ones(ops.shape(batch_values)[:1], labels.dtype)
    return labels
