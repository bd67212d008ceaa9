"""Each subpackage's `__all__` is its public API: complete, and every name in it resolves."""

import importlib
import inspect
import types

import keras
import pytest

import keras_cosent

SUBPACKAGES = keras_cosent.__all__


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_every_exported_name_resolves(name):
    module = importlib.import_module(f"keras_cosent.{name}")
    assert isinstance(getattr(keras_cosent, name), types.ModuleType)
    if not hasattr(module, "__all__"):  # a plain module such as `runtime`
        return
    missing = [item for item in module.__all__ if not hasattr(module, item)]
    assert not missing, f"keras_cosent.{name}.__all__ names {missing}, which do not resolve"
    assert len(set(module.__all__)) == len(module.__all__), f"repeats in keras_cosent.{name}"


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_every_public_name_imported_from_the_package_is_exported(name):
    module = importlib.import_module(f"keras_cosent.{name}")
    if not hasattr(module, "__path__"):  # a module, not a package: nothing re-exported
        return
    # Every public name bound in the package (classes, functions and constants such
    # as `NO_WEIGHT_DECAY` alike); its submodules are reached by their own path.
    public = {
        key
        for key, value in vars(module).items()
        if not key.startswith("_") and not isinstance(value, types.ModuleType)
    }
    unlisted = sorted(public - set(module.__all__))
    assert not unlisted, f"keras_cosent.{name} binds {unlisted} without listing them in __all__"


def test_every_registered_class_is_exported_by_a_subpackage():
    exported = set()
    for name in SUBPACKAGES:
        module = importlib.import_module(f"keras_cosent.{name}")
        for item in getattr(module, "__all__", ()):
            value = getattr(module, item)
            if inspect.isclass(value):
                exported.add(value)
    registered = [
        (key, value)
        for key, value in keras.saving.get_custom_objects().items()
        if key.startswith("keras_cosent>")
    ]
    assert registered, "no class is registered under the keras_cosent package"
    unexported = sorted(key for key, value in registered if value not in exported)
    assert not unexported, f"registered but in no subpackage's __all__: {unexported}"
