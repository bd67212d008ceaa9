"""XLA by default on TensorFlow, where Keras' `jit_compile="auto"` leaves it off on CPU."""

import keras


def resolve_jit_compile(model, jit_compile="auto", run_eagerly=False):
    """The `jit_compile` value a keras-cosent model compiles with.

    Keras resolves `jit_compile="auto"` to False on a CPU-only TensorFlow, so a
    transformer runs as a plain graph of hundreds of small unfused kernels. On
    2 CPU cores (the speed benchmark, BENCHMARKS.md) XLA makes a MiniLM train step
    about 4x faster and encoding about 1.9x faster. This turns XLA on for
    TensorFlow when the caller left `"auto"`, unless the model runs eagerly or
    under a `tf.distribute` strategy (where Keras keeps XLA off); every other
    value, and every other backend, is passed through.

    Example:

    >>> import keras
    >>> from keras_cosent.models.xla import resolve_jit_compile
    >>> model = keras.Sequential([keras.layers.Dense(2)])
    >>> resolve_jit_compile(model) == (True if keras.backend.backend() == "tensorflow" else "auto")
    True
    >>> resolve_jit_compile(model, jit_compile=False)
    False
    """
    if (
        jit_compile == "auto"
        and keras.backend.backend() == "tensorflow"
        and not run_eagerly
        and getattr(model, "_distribute_strategy", None) is None
    ):
        return True
    return jit_compile
