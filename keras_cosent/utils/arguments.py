"""Argument checks shared across the library, worded one way: the argument's name,
what was expected, and the value received.

Bools are refused where an int or a number goes (`True` is an `int` in Python),
and NumPy scalars are accepted where Python ones are.
"""

import math
import numbers

import numpy as np


def is_int(value):
    """True for a Python or NumPy integer; bools (an int subclass) are not ints here."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def is_number(value):
    """True for a Python or NumPy real number; bools are not numbers here."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


# Integers up to 2**24 are exact in float32, the dtype Keras losses read `y_true`
# in; beyond it neighbours round to one value (2**24 + 1 reads as 2**24).
FLOAT32_EXACT_INTEGERS = 2**24


def first_inexact_integer(values):
    """`(index, value)` of the first integer label float32 cannot hold exactly, else None.

    Only NumPy integer arrays (and lists of ints) are looked at: two class or
    group ids beyond 2**24 may compare equal once a loss reads them as float32.
    """
    values = np.asarray(values) if isinstance(values, (list, tuple)) else values
    if not isinstance(values, np.ndarray) or values.dtype.kind not in "iu" or not values.size:
        return None
    flat = values.ravel()
    beyond = np.flatnonzero(np.abs(flat.astype("float64")) > FLOAT32_EXACT_INTEGERS)
    return (int(beyond[0]), flat[beyond[0]].item()) if beyond.size else None


def is_log_name(value):
    """True for a non-empty string of letters, digits, '_' or '-': a name that a
    log key (`loss_<name>`) can hold and that no spec separator (':', ',') splits."""
    return isinstance(value, str) and value.replace("_", "").replace("-", "").isalnum()


def check_positive_int(name, value):
    """Returns `value` as an int, or raises if it is not an int >= 1."""
    if not is_int(value) or value < 1:
        raise ValueError(f"`{name}` should be a positive int. Received: `{name}`={value!r}")
    return int(value)


def check_non_negative_int(name, value):
    """Returns `value` as an int, or raises if it is not an int >= 0."""
    if not is_int(value) or value < 0:
        raise ValueError(f"`{name}` should be an int >= 0. Received: `{name}`={value!r}")
    return int(value)


def check_bool(name, value, allow_none=False):
    """Returns `value`, or raises if it is not a bool (nor None, when allowed).

    A truthy string such as `"no"` would otherwise switch the option on.
    """
    if isinstance(value, (bool, np.bool_)) or (allow_none and value is None):
        return None if value is None else bool(value)
    expected = "a bool (True or False) or None" if allow_none else "a bool (True or False)"
    raise ValueError(f"`{name}` should be {expected}. Received: `{name}`={value!r}")


def check_seed(name, value):
    """Returns `value` as an int, or a seed drawn at random when it is None; raises
    unless it is None or an int in [0, 2**32), the range NumPy's generators take."""
    if value is None:
        return int(np.random.randint(0, 2**31 - 1))
    if not is_int(value) or not 0 <= value < 2**32:
        raise ValueError(
            f"`{name}` should be None or an int in [0, 2**32). Received: `{name}`={value!r}"
        )
    return int(value)


# The largest finite float32: labels and float arguments end up in float32.
FLOAT32_MAX = float(np.finfo(np.float32).max)
FLOAT32_TINY = float(np.finfo(np.float32).tiny)
# The smallest number float32 rounds to inf: FLOAT32_MAX plus half a step. Below it a
# value rounds to FLOAT32_MAX at most (3.4028235e38, as NumPy prints the maximum).
FLOAT32_OVERFLOW = 2.0**128 - 2.0**103


def check_positive_float(name, value):
    """Returns `value` as a float, or raises if it is not a number > 0 that float32
    holds as a normal number.

    Every such argument (a scale, a temperature, a learning rate) ends up in a
    float32 computation, where a value above float32's maximum is inf and one
    below its smallest normal value is 0 or subnormal.
    """
    if not is_number(value) or not _finite(value) or value <= 0:
        raise ValueError(
            f"`{name}` should be a positive float. Received: `{name}`={value!r}"
        )
    if not FLOAT32_TINY <= float(value) < FLOAT32_OVERFLOW:  # a NumPy float32 overflows
        # Above the maximum it is inf in float32; below the smallest normal float32 it
        # is 0 or subnormal, and a temperature that small divides into inf or NaN.
        raise ValueError(
            f"`{name}` should be a positive float from float32's smallest normal value "
            f"{FLOAT32_TINY:.4g} to its maximum {FLOAT32_MAX:.4g} (it is computed in "
            f"float32). Received: `{name}`={value!r}"
        )
    return float(value)


def check_finite_float(name, value):
    """Returns `value` as a float, or raises if it is not a finite number."""
    if not is_number(value) or not _finite(value):
        raise ValueError(
            f"`{name}` should be a finite float. Received: `{name}`={value!r}"
        )
    return float(value)


def _finite(value):
    """math.isfinite, False for an int too large for a float (not an OverflowError)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def check_non_negative_float(name, value):
    """Returns `value` as a float, or raises if it is not a number >= 0 that float32
    holds (a weight decay, a margin, a loss weight: computed in float32, where a
    value above float32's maximum is inf)."""
    value = check_finite_float(name, value)
    if value < 0:
        raise ValueError(f"`{name}` should be a float >= 0. Received: `{name}`={value!r}")
    if value >= FLOAT32_OVERFLOW:
        raise ValueError(
            f"`{name}` should be a float from 0 to float32's maximum {FLOAT32_MAX:.4g} (it "
            f"is computed in float32). Received: `{name}`={value!r}"
        )
    return value
