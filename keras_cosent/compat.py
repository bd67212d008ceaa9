"""Every private Keras, keras-hub and TensorFlow name keras-cosent touches, in one place.

Keras and keras-hub keep no promise about names outside their public API, and a
few things keras-cosent does have no public spelling: walking a model's nested
layers, reading and setting an attention layer's dropout rate, reading a compiled
model's loss tracker and saved compile arguments, reading keras-hub's feed-forward
layer and its preset file helpers, replacing the TensorFlow backend's dropout and
`PyDataset` adapter, reducing a loss's values as `keras.losses.Loss` does, turning
off Keras' per-replica loss scaling while a loss over a gathered global batch is
computed, and reading TensorFlow's graph context, op registry and whether it has
run an op yet. Each is reached through one function here, so that an upgrade that
renames one breaks in this file, with `PrivateAPIError` naming the symbol, the
installed version and the version it was written against, rather than with an
`AttributeError` deep inside a training run.

`check_private_api()` tries every symbol the current backend uses and returns the
ones that are gone; `tests/test_compat.py` fails with that list.
"""

import importlib
import sys
import threading

# The releases each private name below was read from (setup.cfg pins them).
WRITTEN_AGAINST = {"keras": "3.15", "keras_hub": "0.32", "tensorflow": "2.21", "jax": "0.10"}


class PrivateAPIError(RuntimeError):
    """A private name keras-cosent relies on is missing from the installed package."""


def _version(package):
    try:
        return importlib.import_module(package).__version__
    except Exception:  # noqa: BLE001 - only used to word an error message
        return "not installed"


def _missing(package, symbol, error=None):
    reason = f" ({type(error).__name__}: {error})" if error is not None else ""
    return PrivateAPIError(
        f"keras-cosent needs the private {package} name `{symbol}`, which the installed "
        f"{package} {_version(package)} does not have{reason}; keras-cosent was written "
        f"against {package} {WRITTEN_AGAINST[package]}.x. Install that version, or update "
        "keras_cosent/compat.py."
    )


def _import(package, module, attribute=None):
    symbol = module if attribute is None else f"{module}.{attribute}"
    try:
        value = importlib.import_module(module)
        if attribute is not None:
            value = getattr(value, attribute)
    except (ImportError, AttributeError) as error:
        raise _missing(package, symbol, error) from error
    return value


def _attribute(package, obj, name, owner):
    try:
        return getattr(obj, name)
    except AttributeError as error:
        raise _missing(package, f"{owner}.{name}", error) from error


# === Keras ===


def flatten_layers(layer, include_self=False):
    """Every layer nested in `layer`, depth first (`Layer._flatten_layers`)."""
    method = _attribute("keras", layer, "_flatten_layers", "keras.layers.Layer")
    return list(method(include_self=include_self))


def attention_dropout(layer):
    """The dropout rate of a `keras.layers.MultiHeadAttention` (`_dropout`)."""
    return _attribute("keras", layer, "_dropout", "keras.layers.MultiHeadAttention")


def set_attention_dropout(layer, rate):
    """Sets the dropout rate a built `MultiHeadAttention` applies to its weights."""
    attention_dropout(layer)  # fails with a clear message if the name is gone
    layer._dropout = rate


def optimizer_learning_rate(optimizer):
    """What a Keras optimizer computes its rate from: a variable or a schedule (`_learning_rate`).

    The public `learning_rate` property gives only the current value.
    """
    return _attribute("keras", optimizer, "_learning_rate", "keras.optimizers.Optimizer")


def loss_tracker(model):
    """The `Mean` metric a compiled model logs as `loss` (`Trainer._loss_tracker`).

    A custom `train_step` that computes the loss itself must update it, as
    Keras' own steps do.
    """
    tracker = _attribute("keras", model, "_loss_tracker", "keras.Model")
    if tracker is None:
        raise ValueError("The model is not compiled: it has no loss tracker. Call `compile` first.")
    return tracker


def compile_arguments(model):
    """The arguments Keras keeps from a model's last `compile`, for saving
    (`Trainer._compile_config.config`): a dict, or None before `compile`."""
    config = getattr(model, "_compile_config", None)
    return None if config is None else _attribute("keras", config, "config",
                                                  "keras.Model._compile_config")


def distribute_strategy(model):
    """The `tf.distribute` strategy a TensorFlow-backend model runs under, or None."""
    return getattr(model, "_distribute_strategy", None)


_unscaled = threading.local()


def unscaled_replica_losses():
    """A context in which Keras does not divide losses by the replica count (this thread).

    Under a `tf.distribute` strategy, `keras.losses.Loss` divides mean-reduced
    per-example losses by `num_replicas_in_sync` (`losses.loss.
    scale_loss_for_distribution`) but not losses that are already scalars, and
    a loss nested in another one (`MatryoshkaLoss`, `JointLoss`) may be divided
    even when its wrapper returns a scalar. A loss computed over a gathered
    global batch is scaled by `keras_cosent.distributed` instead, so inside
    this context Keras' scaling is the identity. The function is wrapped once,
    and reads a thread-local flag: MirroredStrategy traces each replica in its
    own thread.
    """
    module = _import("keras", "keras.src.losses.loss")
    original = _attribute("keras", module, "scale_loss_for_distribution", "keras.src.losses.loss")
    if not getattr(original, "_keras_cosent_wrapped", False):

        def scale_loss_for_distribution(value):
            if getattr(_unscaled, "active", False):
                return value
            return original(value)

        scale_loss_for_distribution._keras_cosent_wrapped = True
        module.scale_loss_for_distribution = scale_loss_for_distribution
    return _UnscaledContext()


def reduce_loss_values(values, sample_weight, reduction):
    """`values` reduced as `keras.losses.Loss` reduces a loss's values (`reduce_values`).

    A scalar comes back as it is; `reduction="mean_with_sample_weight"` divides
    by the sum of `sample_weight`; mean reductions are divided by the replica
    count under a `tf.distribute` strategy, as Keras' own are.
    """
    reduce_values = _import("keras", "keras.src.losses.loss", "reduce_values")
    return reduce_values(values, sample_weight=sample_weight, reduction=reduction)


class _UnscaledContext:
    def __enter__(self):
        self.previous = getattr(_unscaled, "active", False)
        _unscaled.active = True

    def __exit__(self, *exc_info):
        _unscaled.active = self.previous


def tensorflow_random_module():
    """Keras' TensorFlow random backend module (holds `dropout`, `draw_seed`, ...)."""
    module = _import("keras", "keras.src.backend.tensorflow.random")
    for name in ("dropout", "draw_seed", "_cast_seed", "_get_concrete_noise_shape"):
        _attribute("keras", module, name, "keras.src.backend.tensorflow.random")
    return module


def py_dataset_adapter():
    """Keras' `PyDatasetAdapter` class, which feeds a `PyDataset` to `fit`."""
    cls = _import(
        "keras", "keras.src.trainers.data_adapters.py_dataset_adapter", "PyDatasetAdapter"
    )
    _attribute("keras", cls, "get_tf_dataset", "PyDatasetAdapter")
    return cls


# === keras-hub ===


def feedforward_intermediate_dense(layer):
    """The first feed-forward `Dense` of a built keras-hub `TransformerEncoder`, or None."""
    if not getattr(layer, "built", False):
        return None
    return _attribute(
        "keras_hub", layer, "_feedforward_intermediate_dense",
        "keras_hub.layers.TransformerEncoder",
    )


def hub_file_exists(preset, filename):
    """Whether a keras-hub preset handle (`hf://...`, `kaggle://...`) has `filename`."""
    utils = _import("keras_hub", "keras_hub.src.utils.preset_utils")
    return _attribute("keras_hub", utils, "check_file_exists", "preset_utils")(preset, filename)


def hub_load_json(preset, filename):
    """Reads a JSON file of a keras-hub preset handle through keras-hub's cache."""
    utils = _import("keras_hub", "keras_hub.src.utils.preset_utils")
    return _attribute("keras_hub", utils, "load_json", "preset_utils")(preset, filename)


# === TensorFlow ===


def in_xla_context():
    """True while TensorFlow traces the current graph into an XLA computation."""
    ops = _import("tensorflow", "tensorflow.python.framework.ops")
    util = _import("tensorflow", "tensorflow.python.ops.control_flow_util")
    return util.GraphOrParentsInXlaContext(ops.get_default_graph())


def tensorflow_op_def_registry():
    """TensorFlow's registry of op definitions (`op_def_registry.get(name)`)."""
    return _import("tensorflow", "tensorflow.python.framework.op_def_registry")


def tensorflow_started():
    """Whether TensorFlow has created its eager context, and with it its devices and
    their allocators: at its first op. False while TensorFlow is not imported (this
    never imports it)."""
    if "tensorflow" not in sys.modules:
        return False
    context = _import("tensorflow", "tensorflow.python.eager.context", "context")()
    return bool(_attribute("tensorflow", context, "_initialized",
                           "tensorflow.python.eager.context.Context"))


# === JAX ===


def jax_backend_started():
    """Whether JAX has created its XLA backends (and with them its worker threads)."""
    bridge = _import("jax", "jax._src.xla_bridge")
    return bool(_attribute("jax", bridge, "_backends", "jax._src.xla_bridge"))


# === The check ===


def _check_keras():
    import keras

    dense = keras.layers.Dense(1)
    flatten_layers(keras.Sequential([dense]))
    attention = keras.layers.MultiHeadAttention(num_heads=1, key_dim=2, dropout=0.1)
    if attention_dropout(attention) != 0.1:
        raise _missing("keras", "keras.layers.MultiHeadAttention._dropout (the rate)")
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(loss="mse")
    if getattr(model, "_loss_tracker", None) is None:
        raise _missing("keras", "keras.Model._loss_tracker (the `loss` Mean)")
    if "jit_compile" not in (compile_arguments(model) or {}):
        raise _missing("keras", "keras.Model._compile_config (the saved compile arguments)")
    _import("keras", "keras.src.losses.loss", "reduce_values")
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
    if optimizer_learning_rate(keras.optimizers.SGD(schedule)) is not schedule:
        raise _missing("keras", "keras.optimizers.Optimizer._learning_rate (the schedule)")


def _check_keras_hub():
    import keras_hub

    layer = keras_hub.layers.TransformerEncoder(intermediate_dim=4, num_heads=1)
    layer.build((1, 2, 4))
    if feedforward_intermediate_dense(layer) is None:
        raise _missing("keras_hub", "TransformerEncoder._feedforward_intermediate_dense")
    _import("keras_hub", "keras_hub.src.utils.preset_utils", "check_file_exists")
    _import("keras_hub", "keras_hub.src.utils.preset_utils", "load_json")


def _check_tensorflow():
    with unscaled_replica_losses():
        pass
    tensorflow_random_module()
    py_dataset_adapter()
    in_xla_context()
    tensorflow_op_def_registry()
    tensorflow_started()


def check_private_api():
    """Tries every private name keras-cosent uses under the current backend.

    Returns:
        A list of `PrivateAPIError`s, one per missing name; empty when all are there.

    Example:

    >>> import keras_cosent
    >>> keras_cosent.compat.check_private_api()
    []
    """
    import keras

    checks = [_check_keras, _check_keras_hub]
    if keras.backend.backend() == "tensorflow":
        checks.append(_check_tensorflow)
    if keras.backend.backend() == "jax":
        checks.append(jax_backend_started)
    errors = []
    for check in checks:
        try:
            check()
        except PrivateAPIError as error:
            errors.append(error)
    return errors
