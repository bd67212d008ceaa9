"""Keep the memory a JAX training step frees, instead of mapping it afresh every step.

XLA's CPU runtime (under JAX) allocates each compiled step's temporaries with
`malloc` from its worker threads and frees them when the step ends: for MiniLM
training on 2 cores, one block of about 232 MB per step. glibc serves a block
that large with a fresh `mmap` and unmaps it on `free`, even with
`MALLOC_MMAP_MAX_=0`, because a thread's own arena (64 MB heaps) cannot hold it
and falls back to `mmap` regardless. So the kernel zero-fills the step's
temporaries again on every step: 6.5M page faults and 15 s of system time in a
3-epoch run of `bench/train_steps.py --stack jax --pairs 512`.

`pool_freed_memory()` sets glibc's allocator, once, before the backend starts its
threads, to what the environment variables
`MALLOC_ARENA_MAX=1 MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=2147483647
MALLOC_TOP_PAD_=268435456` would: one arena for every thread (the main heap,
which can grow to any size), no `mmap` for large blocks, and freed memory kept
at the top of the heap for the next step. The same run then takes 0.5-0.6M
faults and 4.5-5.5 s of system time, and its steps 6-25% less time. The price
is a longer first epoch (2-6 s more compiling, presumably with every thread
waiting on one arena) and a larger resident peak (2.3-3.0 GiB instead of 1.9),
since the heap keeps what it was given (BENCHMARKS.md, "Results: session 11").
Nothing a computation returns changes.

It lives with the recipes because it is a process-wide setting of the C library,
not something a Keras library should do on import. `keras-cosent` applies it on
the JAX backend (`recipes.context.Environment.activate_backend`); TensorFlow pools
its own CPU memory (the BFC allocator, `keras_cosent` sets it), and on PyTorch it
removed faults without a measurable change in speed (session 7), so it is left
off there. Library users on JAX call it before their first computation. Where
the user has set glibc's allocator themselves (`GLIBC_TUNABLES` or a `MALLOC_*`
variable), or the C library is not glibc, it does nothing.
"""

import ctypes
import os
import platform

# mallopt(3) parameter numbers, from glibc's malloc.h.
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_MAX = -4
M_ARENA_MAX = -8

SETTINGS = (
    (M_ARENA_MAX, 1),
    (M_MMAP_MAX, 0),
    (M_TRIM_THRESHOLD, 2**31 - 1),
    (M_TOP_PAD, 256 * 2**20),
)

# The environment variables glibc's malloc reads (malloc(3), mallopt(3)).
GLIBC_MALLOC_VARIABLES = (
    "MALLOC_ARENA_MAX", "MALLOC_ARENA_TEST", "MALLOC_CHECK_", "MALLOC_MMAP_MAX_",
    "MALLOC_MMAP_THRESHOLD_", "MALLOC_PERTURB_", "MALLOC_TOP_PAD_", "MALLOC_TRIM_THRESHOLD_",
)

_applied = None


def on_glibc():
    """Whether this process runs on Linux with glibc, whose `mallopt` settings these are."""
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def user_set_allocator(environ=None):
    """Whether the environment (default `os.environ`) already sets glibc's malloc."""
    environ = os.environ if environ is None else environ
    return "glibc.malloc." in environ.get("GLIBC_TUNABLES", "") or any(
        name in environ for name in GLIBC_MALLOC_VARIABLES
    )


def pool_freed_memory():
    """Make glibc's `malloc` keep freed memory in one heap for reuse; idempotent.

    Call it before the backend's first computation: threads that have already
    allocated keep their own arenas.

    Returns:
        True if the settings are in effect, False where they were not applied
        (not glibc, or the user configured the allocator through the environment).

    Example:

    >>> from recipes.host_memory import on_glibc, pool_freed_memory, user_set_allocator
    >>> pool_freed_memory() == (on_glibc() and not user_set_allocator())
    True
    """
    global _applied
    if _applied is None:
        _applied = _apply()
    return _applied


def _apply():
    if not on_glibc() or user_set_allocator():
        return False
    libc = ctypes.CDLL(None)
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success and 0 on error.
    return all(mallopt(param, value) == 1 for param, value in SETTINGS)
