"""Dropout masks from ThreeFry rather than Philox in XLA-compiled TensorFlow steps.

Keras' TensorFlow dropout draws its mask with `tf.nn.experimental.stateless_dropout`,
whose default bit generator is Philox. Inside a step compiled by XLA (which
`keras_cosent` turns on for TensorFlow, see `keras_cosent.models.xla`), XLA's CPU
back end expands Philox into slow element-wise code: in a MiniLM training step
on 2 cores, the 19 dropout masks (3 per layer and the embeddings) took 73 ms of a
581 ms step (`bench/profile_train.py --stack tensorflow`, the
`concatenate_bitcast_fusion` instructions), and drawing one (32, 32, 384) mask
took over 200 ms alone, against about 2 ms with ThreeFry, the generator JAX uses
(ad hoc, on a shared machine).
Same dropout (each unit zeroed with probability `rate`, the rest scaled by
`1 / (1 - rate)`), from another counter-based generator.

`use_threefry_dropout()` makes Keras' TensorFlow dropout ask for ThreeFry while it
is traced into an XLA computation, and leaves it unchanged everywhere else
(eager code and plain graphs, where TensorFlow's CPU kernels only have Philox):
nothing changes outside XLA, and nothing changes on JAX or PyTorch.

It lives with the recipes, not in `keras_cosent`, because it calls TensorFlow
(and replaces a Keras backend function) where library code uses `keras.ops` only.
`keras-cosent train` calls it; library users on TensorFlow call it once before
their first `fit`. Imported lazily, after the Keras backend is chosen.
"""

import keras

_ORIGINAL_DROPOUT = None


def use_threefry_dropout():
    """Use ThreeFry for Keras' dropout masks inside XLA on TensorFlow; idempotent.

    Affects functions traced after the call (a model already trained in this
    process keeps the training function it compiled).

    Returns:
        True if Keras' TensorFlow dropout now takes ThreeFry under XLA, False
        where it does not apply (JAX and PyTorch backends).

    Example:

    >>> import keras
    >>> from recipes.xla_dropout import use_threefry_dropout
    >>> use_threefry_dropout() == (keras.backend.backend() == "tensorflow")
    True
    """
    global _ORIGINAL_DROPOUT
    if keras.backend.backend() != "tensorflow":
        return False
    from keras.src.backend.tensorflow import random as tf_random

    if _ORIGINAL_DROPOUT is None:
        _ORIGINAL_DROPOUT = tf_random.dropout
        tf_random.dropout = _dropout
    return True


def _in_xla_context():
    from tensorflow.python.framework import ops
    from tensorflow.python.ops import control_flow_util

    return control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph())


def _dropout(inputs, rate, noise_shape=None, seed=None):
    """Keras' TensorFlow `dropout`, with `rng_alg="threefry"` when traced for XLA."""
    import tensorflow as tf

    if rate in (0.0, 1.0) or tf.executing_eagerly() or not _in_xla_context():
        return _ORIGINAL_DROPOUT(inputs, rate, noise_shape=noise_shape, seed=seed)
    from keras.src.backend.tensorflow import random as tf_random

    # The same steps as Keras' own `dropout`; only the bit generator differs.
    seed = tf_random._cast_seed(tf_random.draw_seed(seed))
    noise_shape = tf_random._get_concrete_noise_shape(inputs, noise_shape)
    return tf.nn.experimental.stateless_dropout(
        inputs, rate=rate, noise_shape=noise_shape, seed=seed, rng_alg="threefry"
    )
