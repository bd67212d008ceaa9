"""Two devices with a global batch of B rows train exactly as one device with B rows.

Each backend's engine runs in a fresh process (`tests/distributed/worker.py`):
JAX's `DataParallel` over two forced host devices, TensorFlow's
`MirroredStrategy` over two logical CPUs, PyTorch's gloo over two `torchrun`
processes. Three SGD steps of a tiny BertBackbone (dropout off) on 2 devices
must give the per-step losses and the final weights of the same steps on one
device, to 1e-5: which holds only if every in-batch loss sees all 8 rows in
one device's order, labels included, and the gradients are scaled right.
Without the gather (`--no-gather`) the losses see 4 rows per device and the
comparison fails. Sentence-BERT's softmax (`SoftmaxClassifierModel`), a loss per
pair on a head the training model holds, gathers nothing: it holds only if
every weight, the head's included, starts alike and has its gradient averaged
over the ranks. AnglE reads the embeddings' dimension, which must survive the
gather. With GradCache (`CachedSiameseEncoder`, 3 rows at a time,
so neither the global batch nor a device's slice divides into mini-batches)
on the 2 devices, the cached step must gather after caching and give the
same steps as one uncached device.
"""

import os
import sys

import keras
import numpy as np
import pytest

from tests.distributed.launch import run

WORKER = os.path.join(os.path.dirname(__file__), "worker.py")
LOSSES = ("infonce", "cosent", "angle", "supcon", "matryoshka-infonce", "joint", "softmax")
# The losses over the global batch; Sentence-BERT's softmax is one per pair.
GATHERED_LOSSES = tuple(name for name in LOSSES if name != "softmax")
CACHED_LOSSES = ("infonce", "matryoshka-infonce")
MINI_BATCH = 3


def train_on_devices(out, backend, no_gather=False, losses=LOSSES, mini_batch_size=None):
    """Runs every loss on 1 and on 2 devices (cached there with `mini_batch_size`) into `out`."""
    extra = ["--no-gather"] if no_gather else []
    if mini_batch_size is not None:
        extra.append(f"--mini-batch-size={mini_batch_size}")
    losses = ",".join(losses)
    if backend == "torch":
        run([sys.executable, WORKER, str(out), "1", losses, *extra], backend)
        run([sys.executable, "-m", "torch.distributed.run", "--standalone",
              "--nproc_per_node", "2", WORKER, str(out), "2", losses, *extra], backend)
    else:
        run([sys.executable, WORKER, str(out), "1,2", losses, *extra], backend)


def max_differences(out, loss_name):
    """The largest gaps between the runs' losses and between their weights, relative to
    the one-device value where it is above 1 (AnglE's scale drives an embedding to 10)."""
    one = np.load(out / f"{loss_name}-1.npz")
    two = np.load(out / f"{loss_name}-2.npz")
    assert sorted(one.files) == sorted(two.files)

    def gap(key):
        return float(np.max(np.abs(one[key] - two[key]) / np.maximum(1.0, np.abs(one[key]))))

    loss_gap = gap("losses")
    weight_gap = max(gap(key) for key in one.files if key != "losses")
    return loss_gap, weight_gap, len(one["losses"])


@pytest.mark.slow
@pytest.mark.parametrize("losses,mini_batch_size", [
    (LOSSES, None),
    # Cached (GradCache) on two devices against one uncached device.
    (CACHED_LOSSES, MINI_BATCH),
], ids=["uncached", "cached"])
def test_two_devices_equal_one(tmp_path, losses, mini_batch_size):
    backend = keras.backend.backend()
    train_on_devices(tmp_path, backend, losses=losses, mini_batch_size=mini_batch_size)
    for loss_name in losses:
        loss_gap, weight_gap, steps = max_differences(tmp_path, loss_name)
        assert steps == 3
        # The joint loss's terms included: TensorFlow logged them divided by the
        # number of devices.
        assert loss_gap <= 1e-5, (loss_name, loss_gap)
        assert weight_gap <= 1e-5, (loss_name, weight_gap)


@pytest.mark.slow
@pytest.mark.parametrize("mini_batch_size", [None, MINI_BATCH])
def test_without_the_gather_two_devices_differ(tmp_path, mini_batch_size):
    # The mutation the tests above must catch: each device's loss sees only its rows.
    backend = keras.backend.backend()
    if backend == "jax":
        pytest.skip("JAX's DataParallel step is one program over the global batch: "
                    "there is no gather to drop")
    losses = GATHERED_LOSSES if mini_batch_size is None else CACHED_LOSSES
    train_on_devices(tmp_path, backend, no_gather=True, losses=losses,
                     mini_batch_size=mini_batch_size)
    for loss_name in losses:
        loss_gap, weight_gap, _ = max_differences(tmp_path, loss_name)
        assert max(loss_gap, weight_gap) > 1e-3, (loss_name, loss_gap, weight_gap)
