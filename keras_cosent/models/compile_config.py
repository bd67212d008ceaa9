"""Compile arguments of the models that override `compile`, kept through `.keras` files.

Keras saves the arguments a model was compiled with and, on
`keras.saving.load_model`, compiles it again with them, but only for models
that do not override `compile`: for the others it warns and returns the model
uncompiled (no loss, no optimizer, its optimizer state dropped), as it cannot
know what the override does. keras-cosent's overrides only add to Keras'
`compile` (XLA on TensorFlow, loss-term trackers, checks), so recompiling with
the saved arguments is what Keras would otherwise do.

The loss trackers those overrides make are held out of Keras' automatic
tracking (`loss_trackers`), as Keras' `compile` holds its own: a built model
refuses new tracked state, and a loaded (or trained) model is built before it is
compiled (again).
"""

import keras

from keras_cosent import compat


def record_jit_compile(model, jit_compile):
    """Saves the `jit_compile` the caller gave rather than the one resolved for this backend.

    Called after Keras' `compile`: `"auto"` resolves to XLA on TensorFlow
    only, so a file saved there and loaded on PyTorch resolves it afresh
    instead of asking PyTorch for `torch.compile`.
    """
    arguments = compat.compile_arguments(model)
    if arguments is not None:
        arguments["jit_compile"] = jit_compile


def compile_from_config(model, config):
    """Compiles `model` (through its own `compile`) with a saved compile config.

    As Keras' `Trainer.compile_from_config` does for models that keep its
    `compile`: the optimizer is built, so that the saved optimizer variables
    load into it.
    """
    model.compile(**keras.saving.deserialize_keras_object(config))
    if getattr(model, "optimizer", None) is not None and model.built:
        model.optimizer.build(model.trainable_variables)


class _Untracked:
    """A read-only sequence that Keras' attribute tracking does not look into."""

    def __init__(self, items):
        self._items = list(items)

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)

    def __getitem__(self, index):
        return self._items[index]


def loss_trackers(names):
    """`Mean` trackers logged as `loss_<name>`, in a sequence a model's attribute can hold.

    The model lists them in its `metrics` (`untracked_metrics`), which Keras
    resets and, on JAX, threads through its stateless steps.
    """
    return _Untracked(keras.metrics.Mean(name=f"loss_{name}") for name in names)


def untracked_metrics(model):
    """The trackers of every `loss_trackers` sequence `model`'s attributes hold."""
    return [metric for value in vars(model).values() if isinstance(value, _Untracked)
            for metric in value]
