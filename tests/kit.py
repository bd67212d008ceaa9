"""The shared checks every layer, loss and metric passes, in the manner of keras-hub's `TestCase`.

Each `run_*_test` takes the object under test, inputs and an independent
reference value (NumPy or SciPy, computed by the calling test), and checks in
one call what every public layer, loss or metric of the library promises:

- the value equals the reference;
- the object survives Keras serialisation (registered name, config, same value
  from the restored object) and, for layers, a `.keras` round trip inside a
  model;
- under mixed precision (float16 inputs, or a `mixed_float16` dtype policy) the
  result is float32 and equals the float32 value within a stated tolerance:
  float16 keeps 11 significant bits, so inputs rounded to it move a value by
  about 1e-3 relative; the default tolerances are a few times that.

The tests of each class call these alongside their own edge cases.
"""

import keras
import numpy as np

# Tolerances for float16 inputs against the float32 value (see the module docstring).
MIXED_RTOL = 1e-2
MIXED_ATOL = 1e-2


def _numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def _as_float16(x):
    """`x` (an array, or a list of arrays) with its floating arrays rounded to float16."""
    if isinstance(x, (list, tuple)):
        return type(x)(_as_float16(item) for item in x)
    x = np.asarray(x)
    return x.astype("float16") if np.issubdtype(x.dtype, np.floating) else x


def _dtype(x):
    return keras.backend.standardize_dtype(x.dtype)


def _inputs_for(arg):
    """Symbolic `keras.Input`s shaped like `arg` (an array or a list of arrays)."""
    if isinstance(arg, (list, tuple)):
        return [_inputs_for(item) for item in arg]
    arg = np.asarray(arg)
    return keras.Input(shape=arg.shape[1:], dtype=keras.backend.standardize_dtype(arg.dtype))


def _flatten(structure):
    if isinstance(structure, (list, tuple)):
        return [leaf for item in structure for leaf in _flatten(item)]
    return [structure]


def _build_like(layer, built):
    # Keras' deserialisation builds from the build config already.
    if not layer.built and built.get_build_config():
        layer.build_from_config(built.get_build_config())


def check_serialization(obj):
    """`obj` round-trips through Keras serialisation under its `keras_cosent>` name."""
    config = keras.saving.serialize_keras_object(obj)
    assert config["registered_name"] == f"keras_cosent>{type(obj).__name__}", config
    restored = keras.saving.deserialize_keras_object(config)
    assert type(restored) is type(obj)
    assert restored.get_config() == obj.get_config()
    return restored


def run_layer_test(layer, args, expected, *, atol=1e-5, mixed_atol=MIXED_ATOL,
                   output_dtype="float32", tmp_path=None):
    """Checks a layer against `expected`, and its serialisation, saving and mixed precision.

    Args:
        layer: the layer, as the test constructed it.
        args: tuple of the positional call arguments (arrays, or lists of arrays).
        expected: NumPy reference of the output.
        atol: tolerance of the float32 output against `expected`.
        mixed_atol: tolerance of the output under the `mixed_float16` policy,
            inputs rounded to float16, against `expected`.
        output_dtype: the dtype the layer promises (float32 for poolings under
            any policy); None for the policy's compute dtype.
        tmp_path: a directory for the `.keras` round trip; None skips it.
    """
    output = layer(*args)
    np.testing.assert_allclose(_numpy(output), expected, atol=atol, rtol=0)
    if output_dtype is not None:
        assert _dtype(output) == output_dtype

    restored = check_serialization(layer)
    _build_like(restored, layer)
    if layer.weights:
        restored.set_weights(layer.get_weights())
    np.testing.assert_allclose(_numpy(restored(*args)), _numpy(output), atol=1e-6, rtol=0)

    if tmp_path is not None:
        inputs = [_inputs_for(arg) for arg in args]
        model = keras.Model(_flatten(inputs), layer(*inputs))
        path = str(tmp_path / f"{layer.name}.keras")
        model.save(path)
        reloaded = keras.saving.load_model(path)
        np.testing.assert_allclose(
            _numpy(reloaded(_flatten(args))), _numpy(output), atol=1e-6, rtol=0
        )

    config = layer.get_config()
    config["dtype"] = "mixed_float16"
    mixed = type(layer).from_config(config)
    _build_like(mixed, layer)
    if layer.weights:
        mixed.set_weights(layer.get_weights())
    mixed_output = mixed(*_as_float16(args))
    expected_dtype = output_dtype or "float16"
    assert _dtype(mixed_output) == expected_dtype
    np.testing.assert_allclose(
        _numpy(mixed_output).astype("float64"), expected, atol=mixed_atol, rtol=0
    )
    return output


def run_loss_test(loss, y_true, y_pred, expected, *, rtol=1e-5, atol=1e-6,
                  mixed_rtol=MIXED_RTOL, mixed_atol=MIXED_ATOL):
    """Checks a loss against `expected`, its serialisation, and float16 inputs.

    Args:
        loss: the `keras.losses.Loss` under test.
        y_true, y_pred: NumPy inputs (y_pred float32).
        expected: the reference value (a float).
        rtol, atol: tolerances of the float32 value.
        mixed_rtol, mixed_atol: tolerances of the value from `y_pred` rounded to
            float16 (what a `mixed_float16` model emits) against `expected`; the
            value must still be float32.
    """
    value = loss(y_true, y_pred)
    assert _dtype(value) == "float32"
    np.testing.assert_allclose(float(_numpy(value)), expected, rtol=rtol, atol=atol)

    restored = check_serialization(loss)
    np.testing.assert_allclose(
        float(_numpy(restored(y_true, y_pred))), float(_numpy(value)), rtol=1e-6, atol=1e-7
    )

    half = loss(y_true, _as_float16(y_pred))
    assert _dtype(half) == "float32", "the loss must compute in float32 under mixed precision"
    np.testing.assert_allclose(float(_numpy(half)), expected, rtol=mixed_rtol, atol=mixed_atol)
    return float(_numpy(value))


def run_metric_test(metric, batches, expected, *, atol=1e-5, mixed_atol=MIXED_ATOL):
    """Checks a stateful metric over `batches` against `expected`, and its serialisation.

    Args:
        metric: the `keras.metrics.Metric` under test.
        batches: list of `(y_true, y_pred)` NumPy batches of one evaluation pass.
        expected: the reference value over the whole pass.
        atol: tolerance of the float32 result.
        mixed_atol: tolerance with `y_pred` rounded to float16 (result float32).
    """

    def result_over(m, cast=lambda x: x):
        m.reset_state()
        for y_true, y_pred in batches:
            m.update_state(y_true, cast(y_pred))
        return m.result()

    result = result_over(metric)
    assert _dtype(result) == "float32"
    np.testing.assert_allclose(float(_numpy(result)), expected, atol=atol, rtol=0)
    # reset_state forgets the previous pass: the same pass gives the same value.
    np.testing.assert_allclose(float(_numpy(result_over(metric))), float(_numpy(result)),
                               atol=1e-7, rtol=0)

    restored = check_serialization(metric)
    np.testing.assert_allclose(float(_numpy(result_over(restored))), float(_numpy(result)),
                               atol=1e-7, rtol=0)

    half = result_over(metric, _as_float16)
    assert _dtype(half) == "float32"
    np.testing.assert_allclose(float(_numpy(half)), expected, atol=mixed_atol, rtol=0)
    return float(_numpy(result))
