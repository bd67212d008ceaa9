"""Starts a worker script on two devices of the backend's engine, in fresh processes."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_on_two_devices(worker, out, backend):
    """Runs `worker OUT` with two devices: two forced JAX host devices (the worker
    splits TensorFlow's CPU itself), or two `torchrun` processes on PyTorch."""
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=ROOT,
               XLA_FLAGS="--xla_force_host_platform_device_count=2")
    command = [sys.executable, worker, str(out)]
    if backend == "torch":
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc_per_node", "2", *command[1:]]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
