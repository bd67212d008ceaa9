"""Runs pytest once per Keras backend and prints one combined result line.

Keras picks its backend when it is first imported, so each backend needs its own
process. The processes run `--jobs` at a time (default 3: all at once; on the
2-core machines the suite is budgeted on most of a test's time is single-threaded
compilation and Python, and with two at a time one core idled while the last
backend ran alone); each one's output is printed whole when it ends.
TensorFlow's and JAX's processes take the most CPU time (tracing, then XLA
compiling, each test's steps: 617 s and 620 s on 2 cores at 863dd5a, PyTorch's
337 s), so PyTorch's and JAX's run at a slightly lower CPU priority
(`os.nice(NICE_OTHERS)`): TensorFlow gets the larger share while all three run,
so that neither long process finishes alone on a half-idle machine. The suite
took 839 s there, JAX's process ending last. On the suite before three of
JAX's slowest tests became `heavy`, favouring TensorFlow gave 930 s against
984 s with JAX favoured.

Most of JAX's time is XLA compiling small test programs that then run for
milliseconds, so its process compiles with LLVM's optimisation off
(`--xla_backend_optimization_level=0`, added to any `XLA_FLAGS` already set):
about 30% less time for the same results. Tests that train for speed or quality
are benchmarks, not tests, so nothing here depends on optimised code.
PyTorch's process runs one intra-op thread (`OMP_NUM_THREADS=1`, unless set):
with three processes on two cores its OpenMP threads otherwise wait on each
other, spinning, and the same tests take about 20% more CPU time. Each backend's
line gives its CPU time next to its wall time.
Usage: `python scripts/run_tests.py [--backends tensorflow,jax,torch] [--jobs N] [pytest args]`.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

BACKENDS = ("tensorflow", "jax", "torch")
LONGEST = "tensorflow"
NICE_OTHERS = 2
XLA_FAST_COMPILE = "--xla_backend_optimization_level=0"


def _backend_env(backend):
    env = dict(os.environ, KERAS_BACKEND=backend)
    flags = env.get("XLA_FLAGS", "")
    if backend == "jax" and "xla_backend_optimization_level" not in flags:
        env["XLA_FLAGS"] = f"{flags} {XLA_FAST_COMPILE}".strip()
    if backend == "torch":
        env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _wait_any(running):
    """Waits for whichever backend's pytest ends first; returns it with its CPU seconds
    (its own and those of the children it waited for)."""
    pid, status, usage = os.wait4(-1, 0)
    run = next(run for run in running if run["process"].pid == pid)
    run["process"].returncode = os.waitstatus_to_exitcode(status)
    return run, usage.ru_utime + usage.ru_stime


def _counts(junit_path):
    root = ET.parse(junit_path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in suites:
        for key in total:
            total[key] += int(suite.get(key, 0))
    return total


def _start(backend, tmp, pytest_args):
    junit = os.path.join(tmp, f"{backend}.xml")
    log = open(os.path.join(tmp, f"{backend}.log"), "w+", encoding="utf-8")
    env = _backend_env(backend)
    cmd = [sys.executable, "-m", "pytest", "-q", f"--junitxml={junit}",
           "-p", "no:cacheprovider", *pytest_args]
    print(f"=== KERAS_BACKEND={backend}: {' '.join(cmd[1:])} (started)", flush=True)
    nice = (lambda: os.nice(NICE_OTHERS)) if backend != LONGEST and hasattr(os, "nice") else None
    process = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                               preexec_fn=nice)
    return {"backend": backend, "junit": junit, "log": log, "process": process,
            "start": time.time()}


def _finish(run, cpu):
    code = run["process"].wait()
    seconds = time.time() - run["start"]
    run["log"].seek(0)
    print(f"\n=== KERAS_BACKEND={run['backend']} (exit {code}, {seconds:.0f}s, "
          f"cpu {cpu:.0f}s)", flush=True)
    sys.stdout.write(run["log"].read())
    run["log"].close()
    backend = run["backend"]
    if not os.path.exists(run["junit"]):
        print(f"pytest on {backend} produced no report (exit {code})")
        return 0, 1, 0, f"{backend}: pytest exited {code} with no report"
    c = _counts(run["junit"])
    failed = c["failures"] + c["errors"]
    passed = c["tests"] - failed - c["skipped"]
    if code not in (0, 1, 5) and failed == 0:
        failed = 1  # pytest itself broke (usage or internal error)
    line = (f"{backend}: {passed} passed, {failed} failed, {c['skipped']} skipped "
            f"in {seconds:.0f}s (cpu {cpu:.0f}s)")
    return passed, failed, c["skipped"], line


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--jobs", type=int, default=3)
    args, pytest_args = parser.parse_known_args()
    backends = [b for b in args.backends.split(",") if b]
    totals = [0, 0, 0]
    lines = []
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        waiting, running = list(backends), []
        while waiting or running:
            while waiting and len(running) < max(1, args.jobs):
                running.append(_start(waiting.pop(0), tmp, pytest_args))
            # Print whichever ends first, then start the next.
            done, cpu = _wait_any(running)
            running.remove(done)
            *counts, line = _finish(done, cpu)
            totals = [t + c for t, c in zip(totals, counts)]
            lines.append(line)
    passed, failed, skipped = totals
    print("\n" + "\n".join(lines))
    print(f"all backends: {passed} passed, {failed} failed, {skipped} skipped "
          f"in {time.time() - start:.0f}s")
    if passed == 0:
        print("no test ran")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
