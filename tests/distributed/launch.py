"""Starts a worker script of these tests in fresh processes, with two devices visible."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(command, backend):
    """Runs `command` under `backend` with two forced JAX host devices (a worker
    splits TensorFlow's CPU itself) and the repository importable; fails the test
    with the command's stderr when it fails."""
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=ROOT,
               XLA_FLAGS="--xla_force_host_platform_device_count=2")
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]


def run_on_two_devices(worker, out, backend):
    """Runs `worker OUT` on two devices: in one process, or in two `torchrun`
    processes on PyTorch."""
    command = [sys.executable, worker, str(out)]
    if backend == "torch":
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc_per_node", "2", *command[1:]]
    run(command, backend)
