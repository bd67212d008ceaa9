"""XLA by default on TensorFlow, where Keras' `jit_compile="auto"` leaves it off on CPU."""

import os
import sys
import warnings

import keras

from keras_cosent import compat

# Below this share of Linux's memory-map limit left, new models compile without XLA.
MAP_RESERVE = 0.1

_warned = False


def memory_maps():
    """`(used, limit)`: this process's memory maps and Linux's `vm.max_map_count`.

    None where either cannot be read (not Linux).
    """
    try:
        with open("/proc/sys/vm/max_map_count", encoding="ascii") as f:
            limit = int(f.read())
        with open("/proc/self/maps", "rb") as f:
            used = sum(1 for _ in f)
    except (OSError, ValueError):
        return None
    return used, limit


def resolve_jit_compile(model, jit_compile="auto", run_eagerly=False):
    """The `jit_compile` value a keras-cosent model compiles with.

    Keras resolves `jit_compile="auto"` to False on a CPU-only TensorFlow, so a
    transformer runs as a plain graph of hundreds of small unfused kernels. On
    2 CPU cores (the speed benchmark, BENCHMARKS.md) XLA makes a MiniLM train step
    about 4x faster and encoding about 1.9x faster. This turns XLA on for
    TensorFlow when the caller left `"auto"`, unless the model runs eagerly or
    under a `tf.distribute` strategy (where Keras keeps XLA off); every other
    value, and every other backend, is passed through.

    TensorFlow keeps every XLA-compiled program until the process ends
    (tensorflow/tensorflow#64170): each model trained adds its programs, about
    100 MB and 600 memory maps for a small one trained and evaluated. Once the
    process holds Linux's `vm.max_map_count` maps (65,530 by default, about a
    hundred trainings in one process), XLA's compiler fails and the process dies
    with a segmentation fault. So `"auto"` turns XLA off, with one warning, once
    fewer than `MAP_RESERVE` (10%) of the maps are left: a sweep that trains
    many models in one process goes on, slower. `keras-cosent train` trains one
    model per process and never comes near.

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
        and compat.distribute_strategy(model) is None
    ):
        return not _maps_running_out()
    return jit_compile


def _maps_running_out():
    global _warned
    maps = memory_maps()
    if maps is None:
        return False
    used, limit = maps
    if limit - used >= MAP_RESERVE * limit:
        return False
    if not _warned:
        _warned = True
        warnings.warn(
            f"This process holds {used:,} of the {limit:,} memory maps that Linux allows "
            "(vm.max_map_count). TensorFlow keeps every XLA-compiled program until the "
            "process ends (tensorflow/tensorflow#64170), and XLA's compiler crashes the "
            "process once the maps run out, so models compile without XLA from now on "
            "(slower). Train each model in its own process to keep XLA.",
            stacklevel=_user_stacklevel(),
        )
    return True


def _user_stacklevel():
    """The `stacklevel` at which its caller's warning names the user's line.

    The guard runs from `compile`, from an encoder's constructor (reached
    through `keras.saving.load_model` or a keras-hub preset) and from direct
    calls, at depths that differ: the warning points at the first frame outside
    keras-cosent, Keras and keras-hub, the line that started it.
    """
    # keras-hub only where it is loaded (then its frames can be on the stack):
    # importing it here would load it, and TensorFlow, on every backend.
    loaded = [module.__file__ for module in (keras, sys.modules.get("keras_hub")) if module]
    packages = tuple(
        os.path.dirname(os.path.abspath(path)) + os.sep
        for path in (os.path.dirname(__file__), *loaded)
    )
    frame, level = sys._getframe(1), 1  # the caller of warnings.warn is level 1
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(
            packages):
        frame, level = frame.f_back, level + 1
    return level
