"""`recipes.host_memory`: glibc keeps the large blocks a worker thread frees, for reuse.

The allocator settings are process-wide, so every check runs in a child process,
with the test process' own `MALLOC_*` / `GLIBC_TUNABLES` settings removed.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from recipes.host_memory import on_glibc
from recipes.host_memory import user_set_allocator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
glibc_only = pytest.mark.skipif(not on_glibc(), reason="mallopt settings are glibc's")

# One worker thread allocates, fills and frees a block as large as a JAX MiniLM
# step's temporaries, three times, and counts the page faults of each round.
STEPS = textwrap.dedent("""
    import ctypes, json, resource, sys, threading
    if sys.argv[1] == "pool":
        from recipes.host_memory import pool_freed_memory
        assert pool_freed_memory()
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = (ctypes.c_size_t,)
    libc.free.argtypes = (ctypes.c_void_p,)
    size = 232 * 2**20
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
    print(json.dumps(faults))
""")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not user_set_allocator({k: v})}
    env["PYTHONPATH"] = ROOT
    env.update(extra)
    return env


def run_child(code, *args, **env):
    out = subprocess.run([sys.executable, "-c", code, *args], env=clean_env(**env), cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


@glibc_only
def test_default_glibc_maps_a_freed_large_block_afresh_each_time():
    # The reference behaviour the module works around: every round faults the
    # whole block in again (about 59,000 pages of 4 KiB).
    faults = json.loads(run_child(STEPS, "default"))
    assert faults[0] > 1000
    assert min(faults[1:]) > faults[0] / 2, faults


@glibc_only
def test_pooled_glibc_reuses_the_freed_block():
    faults = json.loads(run_child(STEPS, "pool"))
    assert faults[0] > 1000
    assert max(faults[1:]) < faults[0] / 20, faults


@glibc_only
def test_user_settings_win():
    code = "from recipes.host_memory import pool_freed_memory; print(pool_freed_memory())"
    assert run_child(code) == "True"
    assert run_child(code, GLIBC_TUNABLES="glibc.malloc.arena_max=2") == "False"
    assert run_child(code, MALLOC_ARENA_MAX="4") == "False"
    assert run_child(code, MALLOC_TOP_PAD_="0") == "False"
    assert run_child(code, GLIBC_TUNABLES="glibc.rtld.nns=4") == "True"  # not malloc's


def test_user_set_allocator_reads_the_environment():
    assert not user_set_allocator({"PATH": "/bin", "MALLOC_CHECK": "1"})  # glibc's is MALLOC_CHECK_
    assert not user_set_allocator({"GLIBC_TUNABLES": "glibc.pthread.rseq=0"})
    assert user_set_allocator({"MALLOC_TRIM_THRESHOLD_": "0"})
    assert user_set_allocator({"MALLOC_ARENA_MAX": "2"})
    assert user_set_allocator({"GLIBC_TUNABLES": "glibc.pthread.rseq=0:glibc.malloc.tcache_count=0"})


@pytest.mark.parametrize("backend,expected", [("jax", True), ("tensorflow", None), ("torch", None)])
@glibc_only
def test_cli_pools_on_jax_only(backend, expected):
    code = textwrap.dedent("""
        import recipes.host_memory
        from recipes.context import Environment
        Environment(%r).activate_backend()
        print(recipes.host_memory._applied)
    """ % backend)
    assert run_child(code) == str(expected)


@glibc_only
def test_docstring_examples_run():
    code = ("import doctest, recipes.host_memory; "
            "r = doctest.testmod(recipes.host_memory); print(r.attempted, r.failed)")
    attempted, failed = run_child(code).split()
    assert int(attempted) > 0 and int(failed) == 0
