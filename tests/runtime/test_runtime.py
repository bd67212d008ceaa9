"""`keras_cosent.runtime`: each piece does what it says, only when enabled, and comes off again.

Process-wide settings (glibc's allocator, importing the library) are checked in
child processes; the Keras function replacements in this process, each test
leaving them as it found them.
"""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from keras_cosent import compat
from keras_cosent import runtime
from tests import backends

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ON_TF = keras.backend.backend() == "tensorflow"
tf_only = pytest.mark.skipif(not ON_TF, reason="the piece applies to TensorFlow only")
glibc_only = pytest.mark.skipif(not runtime.on_glibc(), reason="mallopt settings are glibc's")
RATE = 0.1


def once_in(backend):
    """For a check made in a child process that names its own backend. The checks
    of JAX's piece run in the TensorFlow process, since JAX's own process is the
    longest of the suite."""
    return backends.once_in(backend, "a child-process check that names its own backend")


@pytest.fixture(autouse=True)
def _restore():
    yield
    runtime.disable()


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not runtime.user_set_allocator({k: v}) and k != runtime.TF_CPU_ALLOCATOR_ENV}
    env["PYTHONPATH"] = ROOT
    env.update(extra)
    return env


# The glibc pieces' children load `keras_cosent/runtime.py` on its own (it imports
# only the standard library at the top, and the glibc pieces import nothing more
# when named with `backend=`): what they measure is glibc's, and importing
# Keras with a framework would cost each child seconds of start-up.
RUNTIME_ALONE = textwrap.dedent("""
    import importlib.util
    _spec = importlib.util.spec_from_file_location("runtime", "keras_cosent/runtime.py")
    runtime = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(runtime)
""")


def run_child(code, *args, **env):
    out = subprocess.run([sys.executable, "-c", code, *args], env=clean_env(**env), cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


# === Importing the library changes nothing ===


def test_importing_keras_cosent_changes_no_environment_variable_and_no_keras_function():
    code = textwrap.dedent("""
        import json, os, sys, keras
        before_env = dict(os.environ)  # before any part of keras_cosent is imported
        from keras_cosent import compat
        functions = []
        if keras.backend.backend() == "tensorflow":
            functions = [(compat.tensorflow_random_module(), "dropout"),
                         (compat.py_dataset_adapter(), "get_tf_dataset")]
        before = [getattr(owner, name) for owner, name in functions]
        import keras_cosent
        keras_cosent.models.SentenceEncoder  # touch the package
        same_functions = all(getattr(o, n) is f for (o, n), f in zip(functions, before))
        print(json.dumps({"env": dict(os.environ) == before_env, "functions": same_functions,
                          "active": any(p["on"] for p in keras_cosent.runtime.active().values()),
                          "loaded": sorted(m for m in ("keras_hub", "tensorflow")
                                           if m in sys.modules)}))
    """)
    backend = keras.backend.backend()
    result = json.loads(run_child(code, KERAS_BACKEND=backend))
    # Nor does it load keras-hub, or TensorFlow on the other backends (whose
    # import sets environment variables of its own): both load on first use.
    loaded = ["tensorflow"] if backend == "tensorflow" else []
    assert result == {"env": True, "functions": True, "active": False, "loaded": loaded}


# === tf_bfc_allocator ===


@pytest.mark.parametrize("started_since", [False, True])
def test_bfc_allocator_sets_the_variable_and_takes_it_back(monkeypatch, started_since):
    monkeypatch.delenv(runtime.TF_CPU_ALLOCATOR_ENV, raising=False)
    monkeypatch.setattr(compat, "tensorflow_started", lambda: False)
    record = runtime.enable(["tf_bfc_allocator"], backend="tensorflow")
    assert record["tf_bfc_allocator"] == {"on": True, "detail": "TF_CPU_ALLOCATOR_USE_BFC=true"}
    assert os.environ[runtime.TF_CPU_ALLOCATOR_ENV] == "true"
    monkeypatch.setattr(compat, "tensorflow_started", lambda: started_since)
    after = runtime.disable()["tf_bfc_allocator"]
    assert runtime.TF_CPU_ALLOCATOR_ENV not in os.environ
    if started_since:
        # TensorFlow reads the variable at its first op and keeps that allocator:
        # "turned off" was untrue (its memory figures stayed the pool's).
        assert after["on"] is False
        assert "has run an op since: the pooling allocator stays for the life of the " \
               "process" in after["detail"]
    else:
        assert after == {"on": False, "detail": "turned off"}


@once_in("tensorflow")
def test_bfc_allocator_is_on_until_tensorflows_first_op_and_too_late_after():
    # As the command line does: TensorFlow imported (keras-hub's tokenizers need
    # it) but no op run yet. The record said "in effect only if it had run no op
    # yet" on every TensorFlow run, which a user could not check.
    code = textwrap.dedent("""
        import json, os
        os.environ["KERAS_BACKEND"] = "tensorflow"
        import tensorflow as tf
        from keras_cosent import compat, runtime
        tf.config.list_physical_devices("GPU")
        before = compat.tensorflow_started()
        first = runtime.enable(["tf_bfc_allocator"], backend="tensorflow")["tf_bfc_allocator"]
        tf.constant(1.0) + 1
        started = compat.tensorflow_started()
        off = runtime.disable(["tf_bfc_allocator"])["tf_bfc_allocator"]
        again = runtime.enable(["tf_bfc_allocator"], backend="tensorflow")["tf_bfc_allocator"]
        print(json.dumps([before, first, started, off, again,
                          os.environ.get("TF_CPU_ALLOCATOR_USE_BFC")]))
    """)
    before, first, started, off, again, variable = json.loads(run_child(code))
    assert (before, started) == (False, True)
    assert first == {"on": True, "detail": "TF_CPU_ALLOCATOR_USE_BFC=true"}
    assert off["on"] is False and "the pooling allocator stays" in off["detail"]
    # Set after the first op, the variable would change nothing: it is not set.
    assert again == {"on": False, "detail": "too late: TensorFlow has run an op (its CPU "
                                            "allocator is chosen for the life of the process)"}
    assert variable is None


@pytest.mark.parametrize("value, on", [("false", False), ("0", False), ("TRUE", True),
                                       ("1", True)])
def test_the_users_allocator_choice_wins(monkeypatch, value, on):
    # Recorded as TensorFlow reads it (tensorflow/core/util/env_var.cc, ReadBoolFromEnvVar:
    # "true"/"1" and "false"/"0", any case): "1" was recorded off, and TensorFlow pooled.
    monkeypatch.setenv(runtime.TF_CPU_ALLOCATOR_ENV, value)
    record = runtime.enable(["tf_bfc_allocator"], backend="tensorflow")["tf_bfc_allocator"]
    assert record["on"] is on and record["detail"] == f"set by the user: {value}"
    runtime.disable()
    assert os.environ[runtime.TF_CPU_ALLOCATOR_ENV] == value


def test_pieces_of_another_backend_stay_off_and_unknown_names_are_refused():
    record = runtime.enable(backend="torch")
    on = {name for name, piece in record.items() if piece["on"]}
    assert on == ({"glibc_mmap_threshold"} if runtime.on_glibc() else set()), record
    assert "tensorflow backend only" in record["tf_threefry_dropout"]["detail"]
    with pytest.raises(ValueError, match="'fast_mode'"):
        runtime.enable(["fast_mode"])


@pytest.mark.parametrize("kwargs, says", [
    # A misspelt backend matched no piece: every one came back off, without a word.
    ({"backend": "pytorch"}, r"`backend` should be one of \('tensorflow', 'jax', 'torch'.*"
                             r"Received: `backend`='pytorch'"),
    ({"pieces": 5}, r"`pieces` should be a piece name, a list of them, or None\. "
                    r"Received: `pieces`=5"),
    ({"pieces": [None]}, r"Received: `pieces`=\[None\]"),
])
def test_a_bad_backend_or_pieces_argument_is_refused_before_any_change(kwargs, says):
    before = runtime.active()
    with pytest.raises(ValueError, match=says):
        runtime.enable(**kwargs)
    assert runtime.active() == before


# === glibc_pool ===

# One worker thread allocates, fills and frees a block as large as a JAX MiniLM
# step's temporaries, three times per phase, and counts each round's page faults.
STEPS = RUNTIME_ALONE + textwrap.dedent("""
    import ctypes, json, resource, sys, threading
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = (ctypes.c_size_t,)
    libc.free.argtypes = (ctypes.c_void_p,)
    size = 232 * 2**20

    def rounds():
        faults = []
        def steps():
            for _ in range(3):
                before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                block = libc.malloc(size)
                ctypes.memset(block, 1, size)
                libc.free(block)
                faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        worker = threading.Thread(target=steps)
        worker.start()
        worker.join()
        return faults

    phases = {}
    if sys.argv[1] == "pool":
        phases["pool"] = runtime.enable(["glibc_pool"], backend="jax")["glibc_pool"]["on"]
        phases["pooled"] = rounds()
        runtime.disable()
    phases["default"] = rounds()
    print(json.dumps(phases))
""")


@glibc_only
@once_in("tensorflow")
def test_default_glibc_maps_a_freed_large_block_afresh_each_time():
    # The reference behaviour the piece works around: every round faults the
    # whole block in again (about 59,000 pages of 4 KiB).
    faults = json.loads(run_child(STEPS, "default"))["default"]
    assert faults[0] > 1000 and min(faults[1:]) > faults[0] / 2, faults


@glibc_only
@once_in("tensorflow")
def test_pooled_glibc_reuses_the_freed_block_until_disabled():
    phases = json.loads(run_child(STEPS, "pool"))
    assert phases["pool"] is True
    pooled = phases["pooled"]
    assert pooled[0] > 1000 and max(pooled[1:]) < pooled[0] / 20, pooled
    # After `disable`, glibc's defaults again: the block is mapped afresh each round.
    default = phases["default"]
    assert min(default[1:]) > pooled[0] / 2, phases


@glibc_only
@once_in("tensorflow")
def test_the_users_glibc_settings_win():
    code = RUNTIME_ALONE + "print(runtime.enable(['glibc_pool'], backend='jax')['glibc_pool']['on'])"
    # Which variables count as the user's is `user_set_allocator`'s (tested below).
    assert run_child(code) == "True"
    assert run_child(code, MALLOC_ARENA_MAX="4") == "False"


# === glibc_mmap_threshold ===

# Allocates, fills and frees an 8 MiB block, then a 4 MiB one twice inside
# `cached_step_allocations()` and twice after it, and says each time whether
# glibc served it from a mapping of its own (mallinfo2's `hblkhd`: bytes in such
# mappings) while it was held.
MAPPED = RUNTIME_ALONE + textwrap.dedent("""
    import ctypes, json, sys

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = (ctypes.c_size_t,)
    libc.free.argtypes = (ctypes.c_void_p,)
    libc.mallinfo2.restype = Mallinfo2
    record = {}
    if sys.argv[1] == "on":
        record["piece"] = runtime.enable(["glibc_mmap_threshold"], backend="torch")[
            "glibc_mmap_threshold"]

    def mapped_while_held(size):
        before = libc.mallinfo2().hblkhd
        block = libc.malloc(size)
        ctypes.memset(block, 1, size)
        held = libc.mallinfo2().hblkhd
        libc.free(block)
        return held - before >= size

    record["mapped"] = [mapped_while_held(8 * 2**20)]
    with runtime.cached_step_allocations():
        record["mapped"] += [mapped_while_held(4 * 2**20) for _ in range(2)]
    record["mapped"] += [mapped_while_held(4 * 2**20) for _ in range(2)]
    print(json.dumps(record))
""")


@glibc_only
@once_in("torch")
def test_default_glibc_moves_a_freed_large_block_to_the_heap():
    # The reference behaviour the piece works around: glibc maps the first large
    # block on its own, then raises its threshold to the freed block's size and
    # serves smaller ones from the heap, where longer-lived small blocks can pin
    # the freed space (the cached PyTorch step's growth). With the piece off,
    # `cached_step_allocations` changes nothing.
    record = json.loads(run_child(MAPPED, "off"))
    assert record["mapped"] == [True] + [False] * 4, record


@glibc_only
@once_in("torch")
def test_cached_step_allocations_map_large_blocks_on_their_own_only_inside():
    record = json.loads(run_child(MAPPED, "on"))
    assert record["piece"]["on"] is True, record
    # After the step: from the heap, as glibc's own threshold would have them.
    assert record["mapped"] == [True, True, True, False, False], record
    user = json.loads(run_child(MAPPED, "on", MALLOC_ARENA_MAX="2"))
    assert user["piece"]["on"] is False and user["mapped"] == [True] + [False] * 4, user


def test_user_set_allocator_reads_the_environment():
    assert not runtime.user_set_allocator({"PATH": "/bin", "MALLOC_CHECK": "1"})
    assert not runtime.user_set_allocator({"GLIBC_TUNABLES": "glibc.pthread.rseq=0"})
    assert runtime.user_set_allocator({"MALLOC_TRIM_THRESHOLD_": "0"})
    assert runtime.user_set_allocator({"GLIBC_TUNABLES": "a=0:glibc.malloc.tcache_count=0"})


@glibc_only
def test_the_cli_enables_what_applies_to_its_backend():
    backend = keras.backend.backend()
    code = textwrap.dedent("""
        import json
        from recipes.context import Environment
        Environment(%r).activate_backend()
        from keras_cosent import runtime
        print(json.dumps(runtime.active()))
    """ % backend)
    record = json.loads(run_child(code))
    on = {name: piece["on"] for name, piece in record.items()}
    assert on == {name: owner == backend for name, owner in runtime.PIECES.items()}
    if backend == "tensorflow":
        # Before TensorFlow's first op, so the allocator is in effect.
        assert record["tf_bfc_allocator"]["detail"] == "TF_CPU_ALLOCATOR_USE_BFC=true"


@once_in("tensorflow")
def test_the_cli_can_be_told_not_to_tune():
    code = textwrap.dedent("""
        import json
        from recipes.context import Environment
        Environment("jax", tuning=False).activate_backend()
        from keras_cosent import runtime
        print(json.dumps(any(v["on"] for v in runtime.active().values())))
    """)
    assert run_child(code) == "false"


# === tf_threefry_dropout ===


def _x():
    return np.random.default_rng(0).uniform(1.0, 2.0, size=(64, 32, 48)).astype("float32")


def _keras_dropout(x, seed):
    return keras.random.dropout(x, RATE, seed=seed)


@tf_only
def test_under_xla_the_mask_comes_from_threefry_and_disable_restores_philox():
    import tensorflow as tf

    module = compat.tensorflow_random_module()
    original = module.dropout
    x = _x()

    def threefry_reference(x, seed):
        seed = module._cast_seed(module.draw_seed(seed))
        return tf.nn.experimental.stateless_dropout(x, rate=RATE, seed=seed, rng_alg="threefry")

    def philox(x, seed):
        return original(x, RATE, seed=seed)

    assert runtime.enable(["tf_threefry_dropout"])["tf_threefry_dropout"]["on"]
    assert module.dropout is not original
    xla = {f.__name__: tf.function(f, jit_compile=True)
           for f in (_keras_dropout, philox, threefry_reference)}
    ours = xla["_keras_dropout"](x, 7).numpy()
    np.testing.assert_array_equal(ours, xla["threefry_reference"](x, 7).numpy())
    assert not np.array_equal(ours != 0, xla["philox"](x, 7).numpy() != 0)
    # Dropout's contract: kept units scaled by 1 / (1 - rate), each dropped with
    # probability `rate` (within 5 binomial standard deviations).
    kept = ours != 0
    np.testing.assert_allclose(ours[kept], x[kept] / (1 - RATE), rtol=1e-6)
    n = x.size
    assert abs((n - kept.sum()) - RATE * n) < 5 * np.sqrt(n * RATE * (1 - RATE))
    # Outside XLA, Keras' own dropout.
    np.testing.assert_array_equal(_keras_dropout(x, 3).numpy(), original(x, RATE, seed=3).numpy())

    runtime.disable(["tf_threefry_dropout"])
    assert module.dropout is original
    again = tf.function(_keras_dropout, jit_compile=True)(x, 7).numpy()
    np.testing.assert_array_equal(again != 0, xla["philox"](x, 7).numpy() != 0)


@tf_only
def test_a_keras_dropout_layer_trains_under_xla_with_threefry():
    runtime.enable(["tf_threefry_dropout"])
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((48,)), keras.layers.Dropout(0.5), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    x = np.random.default_rng(1).normal(size=(256, 48)).astype("float32")
    history = model.fit(x, x[:, :1] * 0.5, epochs=3, batch_size=64, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]


# === tf_data_autotune_off ===


class _Batches(keras.utils.PyDataset):
    def __len__(self):
        return 3

    def __getitem__(self, i):
        x = np.full((4, 3), i, "float32")
        return x, x[:, :1]


@tf_only
def test_pydataset_input_runs_without_autotuning_until_disabled():
    adapter_cls = compat.py_dataset_adapter()
    original = adapter_cls.get_tf_dataset

    def autotune(get_tf_dataset):
        return get_tf_dataset(adapter_cls(_Batches(), shuffle=False)).options().autotune.enabled

    assert autotune(original) in (None, True)  # tf.data's default: on
    runtime.enable(["tf_data_autotune_off"])
    assert autotune(adapter_cls.get_tf_dataset) is False
    # The same batches, in the same order.
    ours = list(adapter_cls.get_tf_dataset(adapter_cls(_Batches(), shuffle=False)))
    assert [float(x[0, 0]) for x, _ in ours] == [0.0, 1.0, 2.0]
    runtime.disable()
    assert adapter_cls.get_tf_dataset is original


def test_the_module_docstring_example_runs():
    import doctest

    failures, tried = doctest.testmod(runtime, verbose=False)
    assert tried > 0 and failures == 0
