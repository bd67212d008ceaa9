"""Trains a tiny encoder for three steps on one device, or data-parallel on two; run as a script.

`tests/distributed/test_global_batch.py` starts it in a fresh process, because
the devices must be set up before the backend initialises: JAX reads
`XLA_FLAGS=--xla_force_host_platform_device_count=2` at import, TensorFlow
splits the CPU into two logical devices here before anything else touches it,
and PyTorch runs it once per rank under `torchrun --nproc_per_node 2`.

    python tests/distributed/worker.py OUT_DIR DEVICES LOSSES [--no-gather] [--mini-batch-size=M]

with DEVICES and LOSSES comma-separated (`1,2 infonce,cosent`), writes from
rank 0 `OUT_DIR/<loss>-<devices>.npz`: each step's loss (and the terms a
`JointLoss` logs) and every weight after the last step.
`--no-gather` replaces `keras_cosent.distributed.gather_global` by the
identity (the mutation the test must catch). `--mini-batch-size=M` trains
the runs on more than one device with `CachedSiameseEncoder` (GradCache, `M`
rows at a time), the one-device runs without it.
"""

import os
import re
import sys

import numpy as np

BATCH = 8  # global rows per step
STEPS = 3


def _split_cpu():
    if os.environ.get("KERAS_BACKEND") == "tensorflow":
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )


def make_data(loss_name, seed=0):
    """`STEPS` global batches `(x, y)` of random token ids, fixed by `seed`."""
    rng = np.random.default_rng(seed)
    columns = {"infonce": 3, "cosent": 2, "angle": 2, "softmax": 2, "supcon": 2,
               "matryoshka-infonce": 2, "joint": 2}[loss_name]
    rows, length = BATCH * STEPS, 6
    token_ids = rng.integers(5, 30, size=(rows, columns, length)).astype("int32")
    mask = np.ones((rows, columns, length), bool)
    mask[:, :, 4:] = rng.random((rows, columns, 2)) < 0.5
    token_ids = np.where(mask, token_ids, 0).astype("int32")
    x = {"token_ids": token_ids, "padding_mask": mask,
         "segment_ids": np.zeros_like(token_ids)}
    if loss_name in ("cosent", "angle"):
        y = rng.uniform(0, 5, size=rows).astype("float32")
    elif loss_name == "softmax":
        y = rng.integers(0, 3, size=rows).astype("int32")  # NLI classes
    else:
        # Repeated ids across the two halves of each batch: group masks and
        # SupCon positives cross devices.
        y = rng.integers(0, 3, size=rows).astype("int32")
    return x, y


def make_batches(x, y):
    """`STEPS` global batches of `BATCH` rows of `make_data`'s arrays, in order."""
    import keras

    class Batches(keras.utils.PyDataset):
        def __len__(self):
            return STEPS

        def __getitem__(self, i):
            part = slice(i * BATCH, (i + 1) * BATCH)
            return {k: v[part] for k, v in x.items()}, y[part]

    return Batches()


def make_loss(loss_name):
    import keras_cosent

    if loss_name == "infonce":
        return keras_cosent.losses.InfoNCELoss(temperature=0.1, mask_false_negatives=True)
    if loss_name == "cosent":
        return keras_cosent.losses.CoSENTLoss(scale=20.0)
    if loss_name == "angle":
        # Reads the embeddings' static dimension, which TensorFlow's gather dropped.
        return keras_cosent.losses.AnglELoss()
    if loss_name == "softmax":
        # No gather: a per-pair loss on a head the model (not the encoder) holds.
        return keras_cosent.losses.SoftmaxLoss(num_labels=3)
    if loss_name == "supcon":
        return keras_cosent.losses.SupConLoss(temperature=0.1)
    if loss_name == "joint":
        # Logs each term (`loss_nce`, `loss_supcon`) beside the total.
        return keras_cosent.losses.JointLoss(
            [keras_cosent.losses.InfoNCELoss(temperature=0.1),
             keras_cosent.losses.SupConLoss(temperature=0.1)], names=["nce", "supcon"])
    return keras_cosent.losses.MatryoshkaLoss(
        keras_cosent.losses.InfoNCELoss(temperature=0.1), dims=(16, 8)
    )


def train(loss_name, devices, mini_batch_size=None):
    import keras
    import keras_hub

    import keras_cosent
    from keras_cosent import distributed

    x, y = make_data(loss_name)

    losses = []
    with distributed.data_parallel(devices):
        keras.utils.set_random_seed(0)
        backbone = keras_hub.models.BertBackbone(
            vocabulary_size=32, num_layers=1, num_heads=2, hidden_dim=16,
            intermediate_dim=32, max_sequence_length=16, dropout=0.0,
        )
        encoder = keras_cosent.models.SentenceEncoder(backbone, max_length=16)
        if mini_batch_size is not None and devices > 1:
            model = keras_cosent.models.CachedSiameseEncoder(encoder, mini_batch_size)
        else:
            model = keras_cosent.models.SiameseEncoder(encoder)
        if loss_name == "softmax":
            model = keras_cosent.models.SoftmaxClassifierModel(model, num_labels=3)
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
                      loss=make_loss(loss_name))
        # The loss, then any terms it logs (`loss_<name>`), per step.
        record = keras.callbacks.LambdaCallback(
            on_train_batch_end=lambda batch, logs: losses.append(
                [float(logs[k]) for k in sorted(logs) if k.startswith("loss")])
        )
        model.fit(distributed.shard_batches(make_batches(x, y)), epochs=1, shuffle=False, verbose=0,
                  callbacks=[record])
        # Keyed by position too: a layer Keras named in an earlier run of this process
        # makes the next one's name unique (`softmax_classifier_head_1`).
        weights = {f"{index:03d} {re.sub(r'_[0-9]+(?=/)', '', v.path)}":
                   keras.ops.convert_to_numpy(v.value) for index, v in enumerate(model.weights)}
    return np.array(losses), weights


def main(argv):
    out, device_counts, loss_names = argv[0], argv[1].split(","), argv[2].split(",")
    _split_cpu()
    from keras_cosent import distributed

    if "--no-gather" in argv:
        distributed.gather_global = lambda value: value
    mini_batch_size = None
    for arg in argv:
        if arg.startswith("--mini-batch-size="):
            mini_batch_size = int(arg.split("=", 1)[1])
    for devices in device_counts:
        for loss_name in loss_names:
            losses, weights = train(loss_name, int(devices), mini_batch_size)
            if distributed.rank() == 0:
                np.savez(os.path.join(out, f"{loss_name}-{devices}.npz"), losses=losses,
                         **{f"w/{k}": v for k, v in weights.items()})


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    main(sys.argv[1:])
