"""The decorator that makes a public class serialisable as `keras_cosent>Name`.

Every public layer, loss, metric and model in the package is registered here, so
that `keras.saving.load_model` can rebuild it from a `.keras` file without
`custom_objects`.
"""

import keras


def keras_cosent_export(cls):
    """Registers `cls` with Keras serialisation under the `keras_cosent` package."""
    return keras.saving.register_keras_serializable(package="keras_cosent")(cls)
