"""`CachedSiameseEncoder`: large in-batch-negative batches in the memory of small ones (GradCache).

An in-batch loss (InfoNCE, CoSENT, ...) couples every row of a batch, so its
batch size is normally capped by the activations of one forward pass over all
of it. Gradient caching (Gao et al., 2021) splits the step in two: the loss
needs only the `(batch, columns, dim)` embeddings, and the encoder's weight
gradient is a sum over rows of (embedding gradient) x (Jacobian of that row's
embedding). Each training step here

1. embeds the batch's `B` rows in mini-batches of `m` rows without keeping
   activations (no gradient tape);
2. computes the loss on all `B` rows and its gradient with respect to the
   embeddings (the "cache"; also any gradient the loss has with respect to
   the weights directly, such as regularisation terms);
3. embeds each mini-batch again, this time with gradients, and
   back-propagates its slice of the cached gradient (a vector-Jacobian
   product), summing the weight gradients;
4. takes one optimizer step.

The result is the gradient of the full-batch loss, for activation memory of
`m` rows, at the price of a second forward pass.

Dropout: the second pass must draw the masks of the first, or the gradient
belongs to a different function than the loss. The random state is saved
before each mini-batch of the first pass and put back before the same
mini-batch in the second: the layers' `keras.random.SeedGenerator` states
(threaded through `stateless_call` on JAX; assigned back on TensorFlow and
PyTorch) and, on PyTorch, the global torch generator(s) that Keras draws
unseeded dropout from (keras-hub's). After the step the state is the one the
first pass left. The masks differ from those of one forward pass over all `B`
rows (they are drawn per mini-batch), as they would with any other batching.

Several devices (`keras_cosent.distributed.data_parallel`), gathering after
caching: on JAX the step is one host loop over the global batch, sharded over
the device mesh, so the mini-batches are slices of the global batch and XLA
runs each piece on every device. On TensorFlow (`MirroredStrategy`) and
PyTorch (one process per device) each replica embeds its own slice in
mini-batches, and `SiameseEncoder.compute_loss` gathers every replica's
embeddings, in replica order, before the loss: the gather's gradient hands
each replica the cached gradient of its own rows, and the weight gradients
are then combined over replicas as in the uncached step (TensorFlow sums
them; PyTorch averages each weight's gradient after every backward, which
leaves the part already averaged unchanged, so the last backward's average
is the full one).

Memory on PyTorch: the first pass frees each mini-batch's activations and
keeps its small embeddings, and with glibc's default (dynamic) `mmap` threshold
those survivors pin the freed heap, so the process grew by about 21 MiB per
32-row mini-batch (5.9 GiB peak at B = 4,096 for MiniLM). With
`keras_cosent.runtime`'s `glibc_mmap_threshold` on (`runtime.enable()`, as
`keras-cosent` runs), steps 1-3 run inside `runtime.cached_step_allocations()`:
large blocks mapped on their own and returned when freed.

Batches are padded, not packed: a packed row holds sentences of several batch
rows, so it cannot be split by rows (`keras_cosent.training.build` turns
packing off with `mini_batch_size`).

The step is written three times, once per backend, in small functions below;
on each the outer step runs without XLA (`jit_compile=False`):

- TensorFlow: a graph with two `tf.while_loop`s (the row count is dynamic),
  `tf.GradientTape` with `output_gradients` for the vector-Jacobian products;
- JAX: a Python loop over `jax.jit`-compiled pieces (embed, loss and its
  gradients, `jax.vjp` over `stateless_call`, optimizer update). One compiled
  program for the whole step would let XLA merge the two forward passes (same
  inputs, same seeds) and keep every activation alive;
- PyTorch: eager, `torch.no_grad` for the first pass and
  `Tensor.backward(gradient)` to accumulate the second's.
"""

import numbers

import keras
from keras import ops

from keras_cosent import compat
from keras_cosent import distributed
from keras_cosent import runtime
from keras_cosent.api_export import keras_cosent_export
from keras_cosent.models.siamese_encoder import SiameseEncoder
from keras_cosent.utils.seed_states import seed_states


@keras_cosent_export
class CachedSiameseEncoder(SiameseEncoder):
    """A `SiameseEncoder` whose training step embeds the batch in mini-batches (GradCache).

    The loss and the weight gradients are those of the whole batch (the loss
    sees every row as a negative), computed with the activations of
    `mini_batch_size` rows at a time; see the module docstring for the steps.
    Without dropout they equal an uncached step's to float round-off; with
    dropout the masks are drawn mini-batch by mini-batch, so they are another
    draw than an uncached step's and the two runs part from the first step
    (the same step as an uncached model embedding the mini-batches in turn).
    Inference (`model(x)`, `predict`, `evaluate`) is `SiameseEncoder`'s.

    Args:
        encoder: a `keras_cosent.models.SentenceEncoder`.
        mini_batch_size: rows embedded at a time in the training step. The
            last mini-batch takes the remainder.
        **kwargs: `keras.Model` keyword arguments (`name`, ...).

    Call arguments:
        inputs: padded batches as for `SiameseEncoder` (not packed ones: see
            the module docstring).

    Example:

    >>> import numpy as np
    >>> import keras
    >>> import keras_hub
    >>> import keras_cosent
    >>> backbone = keras_hub.models.BertBackbone(
    ...     vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=16)
    >>> encoder = keras_cosent.models.SentenceEncoder(backbone, max_length=16)
    >>> model = keras_cosent.models.CachedSiameseEncoder(encoder, mini_batch_size=3)
    >>> model.compile(optimizer=keras.optimizers.SGD(0.1),
    ...               loss=keras_cosent.losses.InfoNCELoss())
    >>> x = {
    ...     "token_ids": np.random.randint(5, 10, (8, 2, 6)).astype("int32"),
    ...     "padding_mask": np.ones((8, 2, 6), bool),
    ...     "segment_ids": np.zeros((8, 2, 6), "int32"),
    ... }
    >>> logs = model.train_on_batch(x, np.zeros((8,), "float32"), return_dict=True)
    >>> sorted(logs)
    ['loss']
    """

    def __init__(self, encoder, mini_batch_size, **kwargs):
        super().__init__(encoder, **kwargs)
        self.mini_batch_size = check_mini_batch_size(mini_batch_size)
        self._jax_pieces = None

    def compile(self, *args, jit_compile="auto", **kwargs):
        """`keras.Model.compile`; the outer step always runs without XLA (see the module)."""
        del jit_compile
        super().compile(*args, jit_compile=False, **kwargs)
        # JAX's pieces trace the loss and optimizer they were first called with:
        # a model compiled again (staged training) traces them afresh.
        self._jax_pieces = None

    def train_step(self, *args):
        backend = keras.backend.backend()
        if backend == "jax":
            return _jax_train_step(self, *args)
        if backend == "tensorflow":
            return _tensorflow_train_step(self, *args)
        if backend == "torch":
            return _torch_train_step(self, *args)
        raise NotImplementedError(
            f"CachedSiameseEncoder trains on the tensorflow, jax and torch backends; "
            f"the {backend!r} backend is not supported."
        )

    def get_config(self):
        config = super().get_config()
        config.update({"mini_batch_size": self.mini_batch_size})
        return config


def check_mini_batch_size(value):
    """`value` as a positive int, or a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(
            f"`mini_batch_size` should be a positive integer. Received: "
            f"`mini_batch_size`={value!r}"
        )
    return int(value)


def _unpack(model, data):
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    if not isinstance(x, dict) or "token_ids" not in x:
        raise ValueError(
            "CachedSiameseEncoder expects a dict with `token_ids`, `padding_mask` and "
            f"`segment_ids` of shape (batch, columns, seq). Received: {x!r:.200}"
        )
    if "pack_ids" in x:
        raise ValueError(
            "CachedSiameseEncoder splits a batch by rows and cannot split packed rows "
            "(several batch rows share one); use padded batches "
            "(`keras_cosent.data.PairBatches(packing=False)`)."
        )
    return x, y, sample_weight


def _rows(x, start, stop):
    return {name: value[start:stop] for name, value in x.items()}


def _spans(rows, size):
    """`(start, stop)` of each mini-batch of `size` rows (the last takes the rest)."""
    return [(start, min(start + size, rows)) for start in range(0, rows, size)]


# === PyTorch ===


def _torch_random_state(seeds):
    import torch

    state = {
        "seeds": [ops.copy(v.value) for v in seeds],
        "cpu": torch.random.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_torch_random_state(seeds, state):
    import torch

    for variable, value in zip(seeds, state["seeds"]):
        variable.assign(value)
    torch.random.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])


def _torch_train_step(model, data):
    import torch

    x, y, sample_weight = _unpack(model, data)
    with runtime.cached_step_allocations():
        embeddings = _torch_cached_gradients(model, x, y, sample_weight)

    # 4. One step.
    trainable = model.trainable_weights[:]
    with torch.no_grad():
        model.optimizer.apply([v.value.grad for v in trainable], trainable)
    return model.compute_metrics(x, y, embeddings.detach(), sample_weight=sample_weight)


def _torch_cached_gradients(model, x, y, sample_weight):
    """Steps 1-3: the whole batch's weight gradients into `.grad`; returns the embeddings."""
    import torch

    rows = int(x["token_ids"].shape[0])
    spans = _spans(rows, model.mini_batch_size)
    seeds = seed_states(model)

    # 1. Embed every mini-batch without building a graph, saving the random state.
    states, parts = [], []
    with torch.no_grad():
        for start, stop in spans:
            states.append(_torch_random_state(seeds))
            parts.append(model(_rows(x, start, stop), training=True))
    end_state = _torch_random_state(seeds)

    # 2. The loss on all rows; backward fills the embeddings' gradient (and
    #    the weights' direct one, e.g. from regularisers).
    model.zero_grad()
    embeddings = torch.cat(parts).requires_grad_(True)
    loss = model.compute_loss(x, y, embeddings, sample_weight, training=True)
    compat.loss_tracker(model).update_state(loss, sample_weight=rows)
    model.optimizer.scale_loss(loss).backward()
    cached = embeddings.grad

    # 3. Embed each mini-batch again with its saved random state; backward
    #    adds its vector-Jacobian product to the weights' `.grad`.
    for (start, stop), state in zip(spans, states):
        _set_torch_random_state(seeds, state)
        model(_rows(x, start, stop), training=True).backward(cached[start:stop])
    _set_torch_random_state(seeds, end_state)
    return embeddings


# === TensorFlow ===


def _tensorflow_train_step(model, data):
    import tensorflow as tf

    x, y, sample_weight = _unpack(model, data)
    size = model.mini_batch_size
    rows = tf.shape(x["token_ids"])[0]
    count = (rows + size - 1) // size
    seeds = seed_states(model)
    trainable = model.trainable_variables

    def mini_batch(i):
        return {name: value[i * size:(i + 1) * size] for name, value in x.items()}

    # 1. Embed without a tape, saving each mini-batch's seed states. The row
    #    count is dynamic, so the loops are graph loops.
    def embed(i, parts, saved):
        saved = [array.write(i, v.value) for array, v in zip(saved, seeds)]
        part = ops.cast(model(mini_batch(i), training=True), "float32")
        return i + 1, parts.write(i, part), saved

    shape = (None, x["token_ids"].shape[1], model.encoder.embedding_dim)
    parts = tf.TensorArray("float32", size=count, infer_shape=False, element_shape=shape)
    saved = [tf.TensorArray(v.dtype, size=count, element_shape=v.shape) for v in seeds]
    _, parts, saved = tf.while_loop(lambda i, *_: i < count, embed, (0, parts, saved))
    embeddings = tf.stop_gradient(parts.concat())
    embeddings.set_shape(shape)
    end_seeds = [tf.identity(v.value) for v in seeds]

    # 2. The loss and its gradient with respect to the embeddings (and the weights).
    with tf.GradientTape() as tape:
        tape.watch(embeddings)
        loss = model.compute_loss(x, y, embeddings, sample_weight, training=True)
        # Under a strategy the loss is this replica's share, L / R
        # (`keras_cosent.distributed.replica_loss`); the tracker, whose
        # variables sum over replicas, must see L, as in Keras' own step.
        compat.loss_tracker(model).update_state(
            loss * distributed.replicas_in_step(), sample_weight=rows
        )
        scaled = model.optimizer.scale_loss(loss)
    cached, *direct = tape.gradient(scaled, [embeddings, *trainable])

    # 3. Embed again with the saved seeds; sum the vector-Jacobian products.
    #    Which weights a gradient reaches is known when tracing: those never
    #    reached keep None, as in Keras' own step (the optimizer skips them).
    reached = [g is not None for g in direct]

    def accumulate(i, sums):
        for variable, array in zip(seeds, saved):
            variable.assign(array.read(i))
        with tf.GradientTape() as tape:
            part = ops.cast(model(mini_batch(i), training=True), "float32")
        grads = tape.gradient(
            part, trainable, output_gradients=cached[i * size:(i + 1) * size]
        )
        new = []
        for index, (total, grad) in enumerate(zip(sums, grads)):
            if grad is None:
                new.append(total)
            else:
                reached[index] = True
                new.append(total + tf.convert_to_tensor(grad))
        return i + 1, new

    sums = [
        tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
        for v, g in zip(trainable, direct)
    ]
    _, sums = tf.while_loop(lambda i, _: i < count, accumulate, (0, sums))
    for variable, value in zip(seeds, end_seeds):
        variable.assign(value)

    # 4. One step.
    grads = [g if hit else None for g, hit in zip(sums, reached)]
    model.optimizer.apply_gradients(zip(grads, trainable))
    return model.compute_metrics(x, y, embeddings, sample_weight=sample_weight)


# === JAX ===


def _jax_functions(model):
    """The step's compiled pieces, made once per model (jit caches one program per shape)."""
    if model._jax_pieces is not None:
        return model._jax_pieces
    import jax
    import jax.numpy as jnp

    @jax.jit
    def embed(trainable, non_trainable, x):
        return model.stateless_call(trainable, non_trainable, x, training=True)

    @jax.jit
    def loss_gradients(trainable, non_trainable, metrics, optimizer_vars, embeddings, x, y, weight):
        def scaled_loss(embeddings, trainable):
            loss, (_, _, new_metrics) = model.stateless_compute_loss(
                trainable, non_trainable, metrics, x=x, y=y, y_pred=embeddings,
                sample_weight=weight, training=True,
            )
            mapping = list(zip(model.optimizer.variables, optimizer_vars))
            with keras.StatelessScope(state_mapping=mapping):
                scaled = model.optimizer.scale_loss(loss)
            return scaled, (loss, new_metrics)

        grad_fn = jax.value_and_grad(scaled_loss, argnums=(0, 1), has_aux=True)
        (_, (loss, new_metrics)), (cached, direct) = grad_fn(embeddings, trainable)
        return loss, new_metrics, cached, direct

    @jax.jit
    def accumulate(trainable, non_trainable, x, cached, sums):
        def embeddings(trainable):
            return model.stateless_call(trainable, non_trainable, x, training=True)[0]

        _, vjp = jax.vjp(embeddings, trainable)
        (grads,) = vjp(cached)
        return [total + grad for total, grad in zip(sums, grads)]

    @jax.jit
    def apply(optimizer_vars, grads, trainable):
        return model.optimizer.stateless_apply(optimizer_vars, grads, trainable)

    model._jax_pieces = {
        "embed": embed, "loss_gradients": loss_gradients,
        "accumulate": accumulate, "apply": apply, "concatenate": jnp.concatenate,
    }
    return model._jax_pieces


def _jax_train_step(model, state, data):
    trainable, non_trainable, optimizer_vars, metrics = state
    x, y, sample_weight = _unpack(model, data)
    pieces = _jax_functions(model)
    rows = int(x["token_ids"].shape[0])
    spans = _spans(rows, model.mini_batch_size)

    # 1. Embed, threading the seed states; each mini-batch's are kept.
    states, parts = [], []
    for start, stop in spans:
        states.append(non_trainable)
        part, non_trainable = pieces["embed"](trainable, non_trainable, _rows(x, start, stop))
        parts.append(part)
    embeddings = pieces["concatenate"](parts)

    # 2. The loss and its gradients.
    loss, metrics, cached, sums = pieces["loss_gradients"](
        trainable, non_trainable, metrics, optimizer_vars, embeddings, x, y, sample_weight
    )

    # 3. The vector-Jacobian products, each mini-batch with its own seed states.
    for (start, stop), seeds in zip(spans, states):
        sums = pieces["accumulate"](
            trainable, seeds, _rows(x, start, stop), cached[start:stop], sums
        )

    # 4. One step, then the metrics, as Keras' own JAX step updates them.
    trainable, optimizer_vars = pieces["apply"](optimizer_vars, sums, trainable)
    mapping = list(zip(model.metrics_variables, metrics))
    with keras.StatelessScope(state_mapping=mapping) as scope:
        compat.loss_tracker(model).update_state(loss, sample_weight=rows)
        logs = model.compute_metrics(x, y, embeddings, sample_weight)
    metrics = [_current_value(scope, v) for v in model.metrics_variables]
    return logs, (trainable, non_trainable, optimizer_vars, metrics)


def _current_value(scope, variable):
    value = scope.get_current_value(variable)
    return variable.value if value is None else value
