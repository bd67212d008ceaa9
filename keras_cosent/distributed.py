"""Data-parallel training on several devices, with in-batch losses over the global batch.

Contrastive losses compare every row of a batch with every other row, so
splitting a batch over devices must not split the comparisons: with 2 devices
and a batch of B rows, InfoNCE must still see B - 1 negatives per anchor, not
B / 2 - 1. Each backend runs data parallelism on its own engine, and this
module is the one place that knows how each one sees the batch:

- JAX, `keras.distribution.DataParallel`: the train step is one program over
  the global batch (inputs sharded over a device mesh, XLA inserts the
  collectives), so a loss already sees every row; `gather_global` is the
  identity.
- TensorFlow, `tf.distribute.MirroredStrategy`: the train step runs once per
  replica on its slice of the batch. `gather_global` all-gathers a tensor in
  replica order (`ReplicaContext.all_gather`, whose gradient sums the
  replicas' gradients and hands each replica its own rows), and
  `replica_loss` divides the global loss by the number of replicas, so that
  the gradients Keras sums over replicas equal one device's.
- PyTorch, `torch.distributed` (one process per device, launched by
  `torchrun`; gloo on CPU, NCCL on GPU): `gather_global` all-gathers in rank
  order with `torch.distributed.nn.functional.all_gather` (its gradient also
  sums over ranks); every rank computes the global loss, and the gradients
  are averaged over ranks as DDP does (`prepare_model`), which again gives one
  device's gradient. Each rank reads its own slice of every global batch
  (`shard_batches`).

In every case the rows are in the order one device would see them: replica
(rank) 0's slice first, and each slice is a contiguous block of the global
batch. `keras_cosent.models.SiameseEncoder.compute_loss` gathers its
predictions, labels and sample weights here, so every loss on it (CoSENT,
AnglE, InfoNCE with hard negatives, NT-Xent, SupCon, triplet, `JointLoss`,
`MatryoshkaLoss`) sees the global batch.
`keras_cosent.models.CachedSiameseEncoder` (GradCache) goes through the same
`compute_loss`: each replica embeds its slice in mini-batches, and the loss and
its cached gradient are taken on the gathered embeddings.

Evaluation is not split: `SentenceEncoder.encode`, and the evaluators that call
it at each epoch end, embed the whole split in every process with the current
(replicated) weights, so they give one device's values (on TensorFlow to
float round-off: `predict_on_batch` under the strategy hands every replica
the whole batch, and `encode` keeps the first replica's rows). On PyTorch
every rank does the whole work.

Usage: create the encoder and train inside `data_parallel(devices)`:

    with keras_cosent.distributed.data_parallel(2):
        encoder = ...  # load or build the SentenceEncoder here
        setup = keras_cosent.training.build(encoder, pairs, "infonce", batch_size=64)
        setup.model.fit(setup.batches, epochs=1, shuffle=False)

On PyTorch launch one process per device,
`torchrun --nproc_per_node 2 my_script.py`; the same code runs in each.
"""

import contextlib
import functools
import os
import warnings

import keras
import numpy as np

from keras_cosent.utils.arguments import check_positive_int

# === Setting up ===

# How a CPU becomes several TensorFlow devices: in Python only, before TensorFlow
# initialises (the command line replaces it, `recipes.commands.train`).
TF_CPU_HINT = ("(on CPU, split the CPU with tf.config.set_logical_device_configuration "
               "before TensorFlow initialises)")


def data_parallel(devices):
    """A context in which models train data-parallel over `devices` local devices.

    Build the encoder and the training model inside it (TensorFlow places
    variables by the strategy in scope at their creation; JAX lays them out
    by the distribution in scope).

    Args:
        devices: int >= 1, the number of devices. JAX and TensorFlow take the
            first `devices` accelerators (or CPU devices when there are none);
            PyTorch expects to have been launched by `torchrun` with
            `--nproc_per_node devices` (the process group is initialised here
            from torchrun's environment: NCCL with CUDA, else gloo).

    Returns:
        A context manager.

    Example:

    >>> import keras_cosent
    >>> with keras_cosent.distributed.data_parallel(1):
    ...     keras_cosent.distributed.num_replicas()
    1
    """
    devices = check_positive_int("devices", devices)  # NumPy ints too, as `build` takes them
    backend = keras.backend.backend()
    if backend == "jax":
        available = keras.distribution.list_devices()
        _check_count(devices, len(available), "JAX",
                     "(on CPU, set XLA_FLAGS=--xla_force_host_platform_device_count=N "
                     "before JAX is imported)")
        if devices == 1:
            return contextlib.nullcontext()
        return keras.distribution.DataParallel(devices=available[:devices]).scope()
    if backend == "tensorflow":
        import tensorflow as tf

        available = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        _check_count(devices, len(available), "TensorFlow", TF_CPU_HINT)
        if devices == 1:
            return contextlib.nullcontext()
        return _mirrored_strategy(tuple(device.name for device in available[:devices])).scope()
    if backend == "torch":
        world = _torch_init_process_group()
        if world != devices:
            raise ValueError(
                f"`devices`={devices} but this PyTorch run has {world} process(es). Launch "
                f"one process per device: `torchrun --nproc_per_node {devices} ...`."
            )
        return contextlib.nullcontext()
    raise ValueError(f"Data parallelism is not supported on backend {backend!r}.")


@functools.lru_cache(maxsize=None)
def _mirrored_strategy(device_names):
    # One strategy per device set and process: two strategies in one process
    # hand out the same collective instance keys, and the all-gathers of the
    # second one's models then fail with shape mismatches.
    import tensorflow as tf

    return tf.distribute.MirroredStrategy(list(device_names))


def _check_count(wanted, available, backend, hint):
    if wanted > available:
        visible = "device is" if available == 1 else "devices are"
        raise ValueError(
            f"`devices`={wanted} but only {available} {backend} {visible} visible {hint}."
        )


def _torch_init_process_group():
    """Initialises torch.distributed from torchrun's environment; returns the world size."""
    import torch.distributed as dist

    if not dist.is_available():
        return 1
    if not dist.is_initialized():
        if "WORLD_SIZE" not in os.environ or int(os.environ["WORLD_SIZE"]) == 1:
            return 1
        import torch

        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    return dist.get_world_size()


def _torch_world():
    if keras.backend.backend() != "torch":
        return 1
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return 1


def num_replicas():
    """How many devices share each global batch in the current context (1: one device).

    Example:

    >>> import keras_cosent
    >>> keras_cosent.distributed.num_replicas()
    1
    """
    backend = keras.backend.backend()
    if backend == "jax":
        distribution = keras.distribution.distribution()
        if isinstance(distribution, keras.distribution.DataParallel):
            return int(distribution.device_mesh.devices.size)
        return 1
    if backend == "tensorflow":
        import tensorflow as tf

        return int(tf.distribute.get_strategy().num_replicas_in_sync)
    return _torch_world()


def rank():
    """This process's rank: 0 except in the other processes of a PyTorch run.

    Files (run directories, checkpoints) should be written by rank 0 only.

    Example:

    >>> import keras_cosent
    >>> keras_cosent.distributed.rank()
    0
    """
    if _torch_world() > 1:
        import torch.distributed as dist

        return dist.get_rank()
    return 0


def shared_seed(seed):
    """`seed`, or under PyTorch ranks rank 0's: every rank must shuffle the same way.

    Each rank reads its slice of every global batch (`shard_batches`), so the
    ranks must agree on the batches: an unseeded run (`seed=None` draws a
    seed from NumPy's global generator) draws one per process, and the ranks'
    slices would then come from different shuffles, repeating some rows and
    missing others. A no-op on one process.

    Example:

    >>> import keras_cosent
    >>> keras_cosent.distributed.shared_seed(7)
    7
    """
    if _torch_world() == 1:
        return seed
    import torch.distributed as dist

    values = [seed]
    dist.broadcast_object_list(values, src=0)
    return values[0]


def check_created_in_scope(model, name="encoder"):
    """Refuses a model whose weights were created outside the current data-parallel context.

    On JAX its weights sit on one device, and on TensorFlow outside the
    strategy: `build` accepted such an encoder, and `fit` failed inside the
    backend (an incompatible-devices error on JAX; `colocate_vars_with` with
    the whole embedding table printed on TensorFlow). PyTorch's processes
    each hold their own copy, created anywhere. A no-op on one device.

    Example:

    >>> import keras
    >>> import keras_cosent
    >>> keras_cosent.distributed.check_created_in_scope(keras.layers.Dense(2))
    """
    replicas = num_replicas()
    backend = keras.backend.backend()
    if replicas == 1 or backend == "torch":
        return
    if backend == "jax":
        outside = [v for v in model.weights if len(v.value.sharding.device_set) < replicas]
    else:
        import tensorflow as tf

        extended = tf.distribute.get_strategy().extended
        outside = [v for v in model.weights if not extended.variable_created_in_scope(v.value)]
    if outside:
        raise ValueError(
            f"The `{name}`'s weights ({outside[0].path}, ...) were created outside this "
            f"`keras_cosent.distributed.data_parallel({replicas})` context: create or load "
            f"the {name} inside it, then call `build`."
        )


# === The gather ===


def replicas_in_step():
    """Replicas whose slices a loss computed here must gather (1: none, e.g. on JAX).

    Example:

    >>> import keras_cosent
    >>> keras_cosent.distributed.replicas_in_step()
    1
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        context = tf.distribute.get_replica_context()
        return 1 if context is None else int(context.num_replicas_in_sync)
    if backend == "torch":
        return _torch_world()
    return 1  # JAX: the step is already a program over the global batch


def gather_global(x):
    """The global batch of `x`: every replica's rows, concatenated in replica order.

    Gradients flow back to each replica's own rows. Outside a data-parallel
    step (one device, or JAX, whose step already sees the global batch), `x`
    is returned unchanged.

    Args:
        x: a tensor whose first axis is the replica's slice of the batch.

    Returns:
        A tensor of `num_replicas()` times as many rows.

    Example:

    >>> import numpy as np
    >>> import keras_cosent
    >>> x = keras_cosent.distributed.gather_global(np.ones((2, 3), "float32"))
    >>> tuple(x.shape)
    (2, 3)
    """
    if x is None or replicas_in_step() == 1:
        return x
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        gathered = tf.distribute.get_replica_context().all_gather(x, axis=0)
        # The gather loses the static shape; a loss that reads it (AnglE splits the
        # embedding dimension in halves) needs every axis but the batch's back.
        gathered.set_shape([None, *x.shape[1:]])
        return gathered
    import torch
    import torch.distributed.nn.functional as distributed_functional

    x = keras.ops.convert_to_tensor(x)
    with warnings.catch_warnings():
        # Deprecated in favour of a private module (`_functional_collectives`);
        # this is still the public all-gather whose gradient reaches every rank.
        warnings.filterwarnings("ignore", category=FutureWarning)
        parts = distributed_functional.all_gather(x.contiguous())
    return torch.cat(parts, dim=0)


def replica_loss(compute):
    """What one replica returns for a loss over the gathered global batch.

    Every replica computes the same global loss `L` (`compute()`).
    TensorFlow: Keras sums the replicas' gradients, and the gather's gradient
    sums over replicas too, so each replica returns `L / R` (the loss tracker
    multiplies it back); Keras' own division by `R`, which depends on the
    loss's output shape, is turned off while `L` is computed
    (`keras_cosent.compat.unscaled_replica_losses`). PyTorch: the gather's
    gradient sums over the `R` ranks and `prepare_model` averages the
    gradients, so `L` is returned as it is.

    Args:
        compute: a function of no arguments returning the loss over the
            global batch.
    """
    replicas = replicas_in_step()
    if replicas == 1 or keras.backend.backend() != "tensorflow":
        return compute()
    from keras_cosent import compat

    with compat.unscaled_replica_losses():
        loss = compute()
    return loss / replicas


def global_loss(compute, y, y_pred, sample_weight):
    """`compute(y, y_pred, sample_weight)` over the global batch, as one replica returns it.

    Gathers each replica's labels, predictions and sample weights in replica
    order (`gather_global`) and scales the result (`replica_loss`); outside a
    data-parallel step, `compute` of the arguments as they are. The training
    models' `compute_loss` goes through here, so that in-batch losses span
    every device's rows and a per-row loss logs the global batch's mean (a
    PyTorch rank would otherwise log its slice's).
    """
    if replicas_in_step() == 1:
        return compute(y, y_pred, sample_weight)
    y, y_pred, sample_weight = (
        keras.tree.map_structure(gather_global, value) if value is not None else None
        for value in (y, y_pred, sample_weight)
    )
    return replica_loss(lambda: compute(y, y_pred, sample_weight))


def replica_value(compute):
    """What one replica logs for a value over the gathered global batch (a loss term).

    Every replica computes the same value, and Keras averages what the replicas
    log; on TensorFlow, Keras' division of a loss by the replica count (see
    `replica_loss`) is turned off while it is computed.
    """
    if replicas_in_step() == 1 or keras.backend.backend() != "tensorflow":
        return compute()
    from keras_cosent import compat

    with compat.unscaled_replica_losses():
        return compute()


# === PyTorch: weights, gradients and batches ===


def prepare_model(model):
    """Readies `model` for data-parallel training; a no-op except under PyTorch with ranks.

    PyTorch: copies rank 0's weights to every rank and averages each trainable
    weight's gradient over the ranks as soon as backward accumulates it (what
    `DistributedDataParallel` does, without its bucketing). Called by the
    `compile` of every training model (`SiameseEncoder` and its subclasses,
    `SoftmaxClassifierModel`), whose weights must all be built by then. A
    weight already prepared (an encoder compiled inside one training model,
    then another) keeps its one averaging hook.
    """
    if _torch_world() == 1:
        return
    import torch
    import torch.distributed as dist

    world = dist.get_world_size()
    with torch.no_grad():
        for variable in model.weights:
            value = variable.value
            dist.broadcast(value.data, src=0)

    def average(parameter):
        dist.all_reduce(parameter.grad)
        parameter.grad.div_(world)

    for variable in model.trainable_weights:
        parameter = variable.value
        if not getattr(parameter, "_keras_cosent_averaged", False):
            parameter.register_post_accumulate_grad_hook(average)
            parameter._keras_cosent_averaged = True


class ShardedBatches(keras.utils.PyDataset):
    """Every global batch of a `keras.utils.PyDataset`, as one replica's engine must be fed.

    PyTorch: rank `r` of `R` gets rows `[r * B / R, (r + 1) * B / R)` of each
    batch of `B` rows, so that the ranks' slices, gathered in rank order, are
    the global batch. TensorFlow: the whole batch, with boolean arrays (the
    padding mask) as int32, because Keras' TensorFlow trainer averages the
    first distributed batch over replicas to build the model, which fails on
    booleans. Everything else (`set_epoch`, `epoch`, ...) is the wrapped
    dataset's.

    Args:
        batches: a `PyDataset` yielding `(x, y)` or `(x, y, sample_weight)`,
            every array with the batch on its first axis.
        rank: this process's rank.
        world: the number of ranks (1 on TensorFlow); each batch's rows must
            divide by it.
        bools_as_int: give boolean arrays as int32.
    """

    def __init__(self, batches, rank=0, world=1, bools_as_int=False):
        super().__init__()
        self.batches = batches
        self.rank = int(rank)
        self.world = int(world)
        self.bools_as_int = bool(bools_as_int)

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, index):
        batch = self.batches[index]
        rows = len(keras.tree.flatten(batch)[0])
        if rows % self.world:
            raise ValueError(
                f"Batch {index} has {rows} rows, which do not divide over {self.world} "
                "ranks; use a batch size that is a multiple of the device count."
            )
        size = rows // self.world
        part = slice(self.rank * size, (self.rank + 1) * size)

        def slice_rows(array):
            array = np.asarray(array)[part]
            if self.bools_as_int and array.dtype == bool:
                array = array.astype("int32")
            return array

        return keras.tree.map_structure(slice_rows, batch)

    def on_epoch_end(self):
        self.batches.on_epoch_end()

    def __getattr__(self, name):
        if name == "batches":
            raise AttributeError(name)
        return getattr(self.batches, name)


def shard_batches(batches):
    """`batches` as this process feeds them to `fit` under data parallelism.

    PyTorch ranks get their `ShardedBatches` slice; TensorFlow strategies get
    the global batch with int32 masks (`ShardedBatches`); JAX (which splits
    each global batch over devices itself) and one device get `batches`.
    """
    world = _torch_world()
    if world > 1:
        return ShardedBatches(batches, rank(), world)
    if keras.backend.backend() == "tensorflow" and num_replicas() > 1:
        return ShardedBatches(batches, bools_as_int=True)
    return batches
