"""Process-wide tuning for training and encoding on CPU, explicit and reversible.

Importing `keras_cosent` changes nothing in the process. The settings below do,
for the whole process, so they are only applied when asked for: `enable()` turns
on the recommended set for the current backend (what `keras-cosent` does), each
piece can be turned off again with `disable()`, and `active()` says what is in
effect (a `keras-cosent train` run writes it into its `config.json`).

The pieces, measured with MiniLM on 2 CPU cores (BENCHMARKS.md has the runs):

- `tf_bfc_allocator` (TensorFlow): `TF_CPU_ALLOCATOR_USE_BFC=true`, TensorFlow's
  pooling CPU allocator. Its default hands every block to the C library, which
  maps a fresh block for each XLA step's few hundred MB of temporaries and the
  kernel zero-fills it again every step: 10.7M page faults and a median step of
  510 ms, against 1.9M faults and 460 ms with the pool, for 180-430 MB more peak
  memory. TensorFlow reads the variable at its first operation, so it must be
  set before that.
- `tf_threefry_dropout` (TensorFlow): Keras' dropout masks are drawn with
  ThreeFry instead of Philox while a step is traced for XLA. XLA's CPU back end
  expands Philox into slow element-wise code (73 ms of a 581 ms step); the
  dropout itself (rate, scaling) is unchanged, and outside XLA nothing changes.
- `tf_data_autotune_off` (TensorFlow): tf.data autotuning off for the
  `PyDataset` input (such as `PairBatches`) that Keras feeds to `fit`. With it
  on, the end of an epoch could wait, CPUs idle, for the autotuning thread to
  wake from a sleep of up to 60 s (2.3-3.5 s on a third of 7-second epochs).
  Batches, order and results are unchanged.
- `glibc_pool` (JAX): glibc's `malloc` set to one arena, no `mmap`, no trimming
  (as `MALLOC_ARENA_MAX=1 MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=2147483647
  MALLOC_TOP_PAD_=268435456` would), so the ~232 MB of temporaries XLA frees at
  the end of each step are reused rather than unmapped and faulted in again:
  6.5M -> 0.5M page faults, steps 6-25% shorter, for 2-6 s more compiling and
  0.4-1.0 GB more peak memory. It must be applied before JAX creates its XLA
  backend on the first computation (threads that already allocated keep their
  arenas; importing Keras or JAX creates none), and is left alone where
  the user configured glibc's allocator (`GLIBC_TUNABLES`, `MALLOC_*`) or the C
  library is not glibc.
- `glibc_mmap_threshold` (PyTorch): while a cached (GradCache) step embeds
  its mini-batches (`CachedSiameseEncoder`: the no-gradient pass, the loss and
  the pass with gradients), glibc's `mmap` threshold is 64 KiB, so each
  mini-batch's activation buffers are mapped on their own and handed back to
  the kernel when freed (`cached_step_allocations`). By default glibc raises
  the threshold to the largest block freed so far (up to 32 MiB); the
  activations then come from the heap, where the embeddings each mini-batch
  keeps pin the freed space: the first pass grew the process by about 21 MiB
  per 32-row mini-batch, 5.9 GiB peak at B = 4,096 for MiniLM. Afterwards the
  threshold is 32 MiB (and the trim threshold 64 MiB), where glibc's own
  adjustment ends up. Only for those passes: fixing the threshold for whole
  uncached PyTorch steps costs page faults on every fresh buffer (1.2M -> 6.3M
  faults, 5.0 -> 12.4 s of system time over 64 MiniLM steps; README.md). Left
  alone where the user configured glibc's allocator or the C library is not
  glibc.

Example:

>>> from keras_cosent import runtime
>>> record = runtime.enable()       # the recommended set for this backend
>>> sorted(record) == sorted(runtime.PIECES)
True
>>> record = runtime.disable()      # everything as it was before
>>> any(piece["on"] for piece in record.values())
False
"""

import contextlib
import ctypes
import os
import platform
import sys

TF_CPU_ALLOCATOR_ENV = "TF_CPU_ALLOCATOR_USE_BFC"

# Which backend each piece applies to, in the order `enable` applies them: the
# ones that must precede the framework's start first.
PIECES = {
    "tf_bfc_allocator": "tensorflow",
    "glibc_pool": "jax",
    "glibc_mmap_threshold": "torch",
    "tf_threefry_dropout": "tensorflow",
    "tf_data_autotune_off": "tensorflow",
}

# mallopt(3) parameter numbers, from glibc's malloc.h, with the values `glibc_pool`
# sets and glibc's documented defaults that `disable` restores. The arena limit is
# not among them: glibc takes no value meaning "derived from the number of cores"
# back (it ignores 0), and keeps the limit it derived once a thread asked for an arena.
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD, _M_MMAP_MAX, _M_ARENA_MAX = -1, -2, -3, -4, -8
GLIBC_POOL_SETTINGS = (
    (_M_ARENA_MAX, 1),
    (_M_MMAP_MAX, 0),
    (_M_TRIM_THRESHOLD, 2**31 - 1),
    (_M_TOP_PAD, 256 * 2**20),
)
GLIBC_DEFAULTS = (
    (_M_MMAP_MAX, 65536),
    (_M_TRIM_THRESHOLD, 128 * 1024),
    (_M_TOP_PAD, 128 * 1024),
)
# `glibc_mmap_threshold`: the settings while a cached step embeds, and after it
# those glibc's dynamic adjustment reaches (a threshold of
# DEFAULT_MMAP_THRESHOLD_MAX on 64-bit, the trim threshold twice that), which
# any mallopt setting switches off.
CACHED_STEP_SETTINGS = ((_M_MMAP_THRESHOLD, 64 * 1024),)
AFTER_CACHED_STEP_SETTINGS = ((_M_MMAP_THRESHOLD, 32 * 2**20), (_M_TRIM_THRESHOLD, 64 * 2**20))
GLIBC_MALLOC_VARIABLES = (
    "MALLOC_ARENA_MAX", "MALLOC_ARENA_TEST", "MALLOC_CHECK_", "MALLOC_MMAP_MAX_",
    "MALLOC_MMAP_THRESHOLD_", "MALLOC_PERTURB_", "MALLOC_TOP_PAD_", "MALLOC_TRIM_THRESHOLD_",
)

_MISSING = object()
# name -> {"on": bool, "detail": str}; name -> callable that undoes the piece.
_records = {}
_undo = {}


# Keras 3's backends; the pieces apply to the first three.
KERAS_BACKENDS = ("tensorflow", "jax", "torch", "numpy", "openvino")


def current_backend(backend=None):
    """`backend`, else the running Keras' backend, else `KERAS_BACKEND`, else tensorflow."""
    if backend is not None:
        # A misspelt name ("pytorch") would match no piece and turn them all off.
        if not isinstance(backend, str) or backend not in KERAS_BACKENDS:
            raise ValueError(f"`backend` should be one of {KERAS_BACKENDS} or None. "
                             f"Received: `backend`={backend!r}")
        return backend
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "backend"):
        return keras.backend.backend()
    return os.environ.get("KERAS_BACKEND") or "tensorflow"


def enable(pieces=None, backend=None):
    """Turns on the given pieces (default: every one that applies to the backend).

    Safe to call before Keras is imported: the pieces that must precede the
    framework's start (`tf_bfc_allocator`, `glibc_pool`) are applied first, and
    only then is Keras imported for the pieces that replace one of its functions.
    Idempotent.

    Args:
        pieces: names from `PIECES`, or None for all of them.
        backend: the Keras backend to tune for; None reads it (see
            `current_backend`).

    Returns:
        `active()`.
    """
    backend = current_backend(backend)
    for name in _names(pieces):
        if name in _undo:  # on, by this module: what the user set is read anew each time
            continue
        if PIECES[name] != backend:
            _records[name] = {"on": False, "detail": f"applies to the {PIECES[name]} backend only"}
            continue
        _records[name] = _APPLY[name]()
    return active()


def disable(pieces=None):
    """Turns the given pieces (default: all) off, restoring what was there before.

    The environment variable gets its previous value back (or is removed), the
    replaced Keras functions their originals, and glibc its default parameters,
    with three exceptions that last for the life of the process: glibc's dynamic
    `mmap` threshold, which any setting switches off, stays off;
    `glibc_pool`'s limit of one arena stays; and TensorFlow, once it has run an
    op, keeps the allocator `tf_bfc_allocator` chose (`active()`'s detail then
    says so).

    Returns:
        `active()`.
    """
    for name in _names(pieces):
        undo = _undo.pop(name, None)
        if undo is not None:
            stays = undo()
            # An undo that cannot take effect returns a record of what stays.
            _records[name] = stays if isinstance(stays, dict) else {"on": False,
                                                                    "detail": "turned off"}
    return active()


def active():
    """What is in effect: `{piece: {"on": bool, "detail": str}}` for every piece.

    Example:

    >>> from keras_cosent import runtime
    >>> sorted(runtime.active()) == sorted(runtime.PIECES)
    True
    """
    return {
        name: dict(_records.get(name, {"on": False, "detail": "not enabled"})) for name in PIECES
    }


def _names(pieces):
    if pieces is None:
        return list(PIECES)
    if isinstance(pieces, str):
        pieces = [pieces]
    if not isinstance(pieces, (list, tuple, set)) or not all(
            isinstance(name, str) for name in pieces):
        raise ValueError("`pieces` should be a piece name, a list of them, or None. "
                         f"Received: `pieces`={pieces!r}")
    unknown = [name for name in pieces if name not in PIECES]
    if unknown:
        raise ValueError(f"Unknown runtime pieces {unknown}. Expected names from {list(PIECES)}.")
    return [name for name in PIECES if name in pieces]


# === tf_bfc_allocator ===


def _apply_tf_bfc_allocator():
    previous = os.environ.get(TF_CPU_ALLOCATOR_ENV, _MISSING)
    if previous is not _MISSING:
        # Read as TensorFlow's ReadBoolFromEnvVar reads it: "true" or "1", in any case.
        return {"on": previous.lower() in ("true", "1"), "detail": f"set by the user: {previous}"}
    from keras_cosent import compat

    if compat.tensorflow_started():
        return {"on": False, "detail": "too late: TensorFlow has run an op (its CPU allocator "
                                       "is chosen for the life of the process)"}
    os.environ[TF_CPU_ALLOCATOR_ENV] = "true"

    def undo():
        os.environ.pop(TF_CPU_ALLOCATOR_ENV, None)
        if compat.tensorflow_started():
            return {"on": False, "detail": "turned off (TF_CPU_ALLOCATOR_USE_BFC removed), "
                    "but TensorFlow has run an op since: the pooling allocator stays for the "
                    "life of the process"}
        return None

    _undo["tf_bfc_allocator"] = undo
    return {"on": True, "detail": "TF_CPU_ALLOCATOR_USE_BFC=true"}


# === glibc_pool ===


def on_glibc():
    """Whether this process runs on Linux with glibc, whose `mallopt` settings these are."""
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def user_set_allocator(environ=None):
    """Whether the environment (default `os.environ`) already configures glibc's malloc."""
    environ = os.environ if environ is None else environ
    return "glibc.malloc." in environ.get("GLIBC_TUNABLES", "") or any(
        name in environ for name in GLIBC_MALLOC_VARIABLES
    )


def _mallopt(settings):
    libc = ctypes.CDLL(None)
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success and 0 on error.
    return all(mallopt(param, value) == 1 for param, value in settings)


def _glibc_refusal():
    """Why a glibc piece must stay off here (not glibc, or the user's own settings), or None."""
    if not on_glibc():
        return {"on": False, "detail": "the C library is not glibc"}
    if user_set_allocator():
        return {"on": False, "detail": "the user configured glibc's allocator (MALLOC_*/GLIBC_TUNABLES)"}
    return None


def _apply_glibc_pool():
    refusal = _glibc_refusal()
    if refusal is not None:
        return refusal
    if "jax" in sys.modules:
        from keras_cosent import compat

        if compat.jax_backend_started():
            return {"on": False, "detail": "too late: JAX has started (its threads keep their arenas)"}
    if not _mallopt(GLIBC_POOL_SETTINGS):
        return {"on": False, "detail": "mallopt refused the settings"}
    _undo["glibc_pool"] = lambda: _mallopt(GLIBC_DEFAULTS)
    return {"on": True, "detail": "one arena, no mmap, no trim, 256 MiB top pad"}


# === glibc_mmap_threshold ===


def _apply_glibc_mmap_threshold():
    refusal = _glibc_refusal()
    if refusal is not None:
        return refusal
    # Nothing changes now: `cached_step_allocations` reads the record.
    _undo["glibc_mmap_threshold"] = lambda: None
    return {"on": True, "detail": "a cached PyTorch step's embedding passes map blocks of "
                                  "64 KiB or more on their own"}


@contextlib.contextmanager
def cached_step_allocations():
    """Inside: glibc maps blocks of 64 KiB or more on their own, if `glibc_mmap_threshold` is on.

    `CachedSiameseEncoder`'s PyTorch step embeds its mini-batches inside (both
    passes and the loss between them), so that the activations each mini-batch
    frees go back to the kernel instead of staying in a heap pinned by the
    embeddings it keeps (module docstring). With the piece off, nothing changes.

    Example:

    >>> from keras_cosent import runtime
    >>> with runtime.cached_step_allocations():
    ...     pass
    """
    if not _records.get("glibc_mmap_threshold", {}).get("on"):
        yield
        return
    _mallopt(CACHED_STEP_SETTINGS)
    try:
        yield
    finally:
        _mallopt(AFTER_CACHED_STEP_SETTINGS)


# === tf_threefry_dropout ===


def _apply_tf_threefry_dropout():
    from keras_cosent import compat

    module = compat.tensorflow_random_module()
    original = module.dropout

    def dropout(inputs, rate, noise_shape=None, seed=None):
        """Keras' TensorFlow `dropout`, with `rng_alg="threefry"` when traced for XLA."""
        import tensorflow as tf

        if rate in (0.0, 1.0) or tf.executing_eagerly() or not compat.in_xla_context():
            return original(inputs, rate, noise_shape=noise_shape, seed=seed)
        # The same steps as Keras' own `dropout`; only the bit generator differs.
        seed = module._cast_seed(module.draw_seed(seed))
        noise_shape = module._get_concrete_noise_shape(inputs, noise_shape)
        return tf.nn.experimental.stateless_dropout(
            inputs, rate=rate, noise_shape=noise_shape, seed=seed, rng_alg="threefry"
        )

    module.dropout = dropout

    def undo():
        module.dropout = original

    _undo["tf_threefry_dropout"] = undo
    return {"on": True, "detail": "ThreeFry dropout masks inside XLA-compiled functions"}


# === tf_data_autotune_off ===


def _apply_tf_data_autotune_off():
    from keras_cosent import compat

    adapter = compat.py_dataset_adapter()
    original = adapter.get_tf_dataset

    def get_tf_dataset(self):
        """Keras' `PyDatasetAdapter.get_tf_dataset`, with `autotune.enabled = False`."""
        import tensorflow as tf

        options = tf.data.Options()
        options.autotune.enabled = False
        return original(self).with_options(options)

    adapter.get_tf_dataset = get_tf_dataset

    def undo():
        adapter.get_tf_dataset = original

    _undo["tf_data_autotune_off"] = undo
    return {"on": True, "detail": "no tf.data autotuning behind PyDataset input to fit"}


_APPLY = {
    "tf_bfc_allocator": _apply_tf_bfc_allocator,
    "glibc_pool": _apply_glibc_pool,
    "glibc_mmap_threshold": _apply_glibc_mmap_threshold,
    "tf_threefry_dropout": _apply_tf_threefry_dropout,
    "tf_data_autotune_off": _apply_tf_data_autotune_off,
}
