"""`scalar`: a scalar variable's value as a Python number, on every backend, without NumPy."""

import contextlib
import warnings

import keras
import pytest

from keras_cosent.utils.scalars import scalar


def _distributed_scope():
    """A one-device MirroredStrategy on TensorFlow, whose variables are MirroredVariables."""
    if keras.backend.backend() != "tensorflow":
        return contextlib.nullcontext()
    import tensorflow as tf

    return tf.distribute.MirroredStrategy(["/cpu:0"]).scope()


@pytest.mark.parametrize("value, dtype", [(2.5, "float32"), (7, "int32")])
def test_reads_a_variable_as_a_python_number_without_warnings(value, dtype):
    with _distributed_scope():
        variable = keras.Variable(value, dtype=dtype, trainable=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy 2's warning about np.array of a variable
        got = scalar(variable)
    assert got == value and type(got) is type(value)


def test_reads_a_computed_tensor():
    # An optimizer's `iterations` under gradient accumulation is one.
    iterations = keras.Variable(7, dtype="int32", trainable=False)
    assert scalar(keras.ops.floor_divide(iterations, 2)) == 3
