"""The dropout generators' states of a model: its variables that are state, not weights.

Keras' layers draw their dropout masks from `keras.random.SeedGenerator`s whose
state is a non-trainable variable outside `model.weights` (on JAX and
TensorFlow each draw advances it). `ResumableTraining` saves and restores them,
the cached (GradCache) step replays them, and `train --staged` puts them back at
each stage, so that a stage draws the masks a fresh run of it would.
"""


def seed_states(model):
    """The model's non-trainable variables that are not weights: the states of
    its layers' `SeedGenerator`s, in a fixed order.

    Example:

    >>> import keras
    >>> from keras_cosent.utils.seed_states import seed_states
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dropout(0.1)])
    >>> len(seed_states(model))
    1
    """
    weights = {id(v) for v in model.weights}
    return [v for v in model.non_trainable_variables if id(v) not in weights]
