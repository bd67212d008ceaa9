"""Argument and shape checks shared by the losses in `keras_cosent.losses`.

Kept in one place so that every loss words its errors the same way: the name
of the argument, what was expected, and the value received.
"""

import math
import numbers

from keras import ops


def check_positive_float(name, value):
    """Returns `value` as a float, or raises if it is not a finite number > 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            f"`{name}` should be a positive float. Received: `{name}`={value!r}"
        )
    return float(value)


def check_finite_float(name, value):
    """Returns `value` as a float, or raises if it is not a finite number."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
    ):
        raise ValueError(
            f"`{name}` should be a finite float. Received: `{name}`={value!r}"
        )
    return float(value)


def check_non_negative_float(name, value):
    """Returns `value` as a float, or raises if it is not a finite number >= 0."""
    value = check_finite_float(name, value)
    if value < 0:
        raise ValueError(f"`{name}` should be a float >= 0. Received: `{name}`={value!r}")
    return value


def check_bool(name, value):
    """Returns `value`, or raises if it is not a Python bool."""
    if not isinstance(value, bool):
        raise ValueError(
            f"`{name}` should be a bool (True or False). "
            f"Received: `{name}`={value!r}"
        )
    return value


def check_pair_embeddings(y_pred, loss_name):
    """Raises unless `y_pred` is `(batch,)` cosines or `(batch, 2, dim)` pairs.

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


def flat_labels(y_true, batch_values, loss_name, rows="pairs"):
    """Flattens `(batch,)` or `(batch, 1)` labels, checking the batch size."""
    y_true = ops.convert_to_tensor(y_true)
    labels = ops.reshape(y_true, (-1,))
    n_labels, n_values = labels.shape[0], batch_values.shape[0]
    if n_labels is not None and n_values is not None and n_labels != n_values:
        raise ValueError(
            f"`{loss_name}` expects one label per {rows[:-1]}: `y_true` of shape "
            f"{tuple(y_true.shape)} does not match {n_values} {rows} in `y_pred`."
        )
    return labels
