"""Reading a scalar variable's value on the host, on every backend."""

import keras


def scalar(variable):
    """The value of a scalar `keras.Variable` (or backend tensor) as a Python number.

    Not through NumPy: `np.array` of a Keras variable warns under NumPy 2 (its
    `__array__` takes no `copy`), and `int()` refuses TensorFlow's
    `MirroredVariable`, the variable under several devices (`tf.distribute`),
    which `numpy()` reads.

    Example:

    >>> import keras
    >>> from keras_cosent.utils.scalars import scalar
    >>> scalar(keras.Variable(2.5))
    2.5
    """
    value = getattr(variable, "value", variable)
    if keras.backend.backend() == "tensorflow":
        value = value.numpy()
    return value.item()
