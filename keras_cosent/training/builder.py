"""`build`: everything between a sentence encoder plus training rows and `model.fit`.

The CLI (`keras-cosent train`), the benchmarks and users' scripts call this one
function, so they train the same way: the objective's loss and data layout
(`keras_cosent.training.OBJECTIVES`), batches packed into shared rows where the
backbone allows, AdamW with BERT's no-decay list (PyTorch's fused kernel on the
torch backend), and a linear warm-up then linear decay over the whole run.
With `matryoshka_dims`, the objective's loss is wrapped in `MatryoshkaLoss`;
with `mini_batch_size`, the model is a `CachedSiameseEncoder` (GradCache).
with `queue_size`, InfoNCE also contrasts against a queue of momentum-encoder
embeddings (`MomentumContrastModel`); with `word_repetition`, the positives'
tokens are partly duplicated (ESimCSE).
"""

import collections
import inspect

import keras

from keras_cosent import distributed
from keras_cosent.data.data_format_error import DataFormatError
from keras_cosent.data.pair_batches import PairBatches
from keras_cosent.data.pair_dataset import PairDataset
from keras_cosent.data.readers import READ_FORMATS
from keras_cosent.losses.infonce_loss import InfoNCELoss
from keras_cosent.losses.matryoshka_loss import MatryoshkaLoss
from keras_cosent.models.cached_siamese_encoder import CachedSiameseEncoder
from keras_cosent.models.cached_siamese_encoder import check_mini_batch_size
from keras_cosent.models.momentum_contrast_model import ESIMCSE_MOMENTUM
from keras_cosent.models.momentum_contrast_model import MomentumContrastModel
from keras_cosent.models.momentum_contrast_model import check_momentum
from keras_cosent.models.momentum_contrast_model import check_queue_size
from keras_cosent.models.sequence_packing import supports_packing
from keras_cosent.models.siamese_encoder import SiameseEncoder
from keras_cosent.optimizers.adamw import NO_WEIGHT_DECAY
from keras_cosent.optimizers.adamw import adamw
from keras_cosent.optimizers.warmup_linear_decay import WarmupLinearDecay
from keras_cosent.training.objectives import get_objective
from keras_cosent.training.objectives import graded_terms
from keras_cosent.utils.arguments import check_bool
from keras_cosent.utils.arguments import check_non_negative_float
from keras_cosent.utils.arguments import check_positive_float
from keras_cosent.utils.arguments import check_positive_int
from keras_cosent.utils.arguments import check_seed
from keras_cosent.utils.arguments import is_number
from keras_cosent.utils.truncation import check_matryoshka_dims

TrainingSetup = collections.namedtuple(
    "TrainingSetup", ["model", "batches", "optimizer", "loss", "encoder", "dataset", "objective"]
)
TrainingSetup.__doc__ = """What `build` returns: call `setup.model.fit(setup.batches, epochs=..., shuffle=False)`.

`shuffle=False` because the batches shuffle themselves, from `seed` and the
epoch number (Keras' own shuffle would reorder them again from Python's global
generator, which `keras_cosent.callbacks.ResumableTraining` cannot restore).

Fields:
    model: the compiled training model (a `SiameseEncoder` over `encoder`, or
        the objective's wrapper around it).
    batches: the `keras_cosent.data.PairBatches` to fit on.
    optimizer: the AdamW optimizer, with its warm-up/decay schedule.
    loss: the loss object.
    encoder: the `SentenceEncoder` being trained (the one passed in).
    dataset: the training rows after the objective shaped them.
    objective: the `keras_cosent.training.Objective`.
"""


def shaped_task(objective, dataset, data_format, batch_size, loss_options,
                word_repetition=None):
    """`dataset` shaped for `objective` and checked, and the objective's loss for it.

    Everything `build` checks about the rows and the loss, before a model or a
    batch exists: a caller training several datasets one after the other
    (staged training) runs it for each first, so that a later one's bad file
    fails before any training.

    Returns:
        `(shaped dataset, loss)`.
    """
    dataset = objective.prepare(dataset, data_format)
    check_shaped_dataset(objective, dataset, word_repetition)
    if objective.check_batching is not None:
        objective.check_batching(objective, dataset, batch_size)
    return dataset, objective.make_loss(loss_options, dataset, data_format)


def build(
    encoder,
    dataset,
    objective="cosent",
    *,
    batch_size=16,
    epochs=4,
    learning_rate=2e-5,
    warmup=0.1,
    weight_decay=0.01,
    seed=42,
    shuffle=True,
    packing=True,
    data_format=None,
    matryoshka_dims=None,
    devices=None,
    mini_batch_size=None,
    queue_size=None,
    momentum=None,
    word_repetition=None,
    max_grad_norm=None,
    **loss_options,
):
    """Builds the model, batches and optimizer that train `encoder` on `dataset`.

    Args:
        encoder: a `keras_cosent.models.SentenceEncoder`.
        dataset: a `keras_cosent.data.PairDataset` as read from a file (it is
            shaped for the objective: e.g. InfoNCE keeps the pairs scored above
            2.5) or already in the objective's layout.
        objective: a name from `keras_cosent.training.OBJECTIVES` (`"cosent"`,
            `"infonce"`, `"simcse"`, `"angle"`, `"cosine-mse"`,
            `"sbert-softmax"`, `"ntxent"`, `"triplet"`, `"margin-ranking"`,
            `"supcon"`, `"batch-hard-triplet"`, or one registered with
            `register_objective`) or an
            `Objective`.
        batch_size: rows per step.
        epochs: epochs the schedule spans (`fit` must be given the same).
        learning_rate: peak learning rate of AdamW.
        warmup: fraction of all steps with linear warm-up; the rate then decays
            linearly to 0 at the last step.
        weight_decay: AdamW decoupled weight decay, not applied to biases and
            LayerNorm parameters (`keras_cosent.optimizers.NO_WEIGHT_DECAY`).
        seed: seed of the batch shuffling.
        shuffle: shuffle the rows every epoch (False keeps the file order, as
            the speed benchmarks do to feed every stack the same batches).
        packing: pack each batch's sentences into shared rows where the
            backbone allows it (same results, fewer token positions).
        data_format: the reader format `dataset` came from (`"nli-jsonl"`...),
            which some objectives read labels by.
        matryoshka_dims: `None`, or distinct positive ints, each at most the
            encoder's embedding dimension, in any order (e.g.
            `(384, 256, 128, 64)`): the loss becomes the sum of the objective's
            loss on the first `d` coordinates of the embeddings, re-normalised,
            for each `d` (`keras_cosent.losses.MatryoshkaLoss`), so that
            truncated embeddings (`encode(..., truncate_dim=d)`) work too.
            Not for objectives that train a head (`sbert-softmax`).
        devices: `None` (whatever `keras_cosent.distributed.data_parallel`
            context this runs in, one device outside any) or the device count
            that context must have. With several devices each step's
            `batch_size` rows are split over them, every in-batch loss sees
            all of them (`keras_cosent.distributed`), `batch_size` must be a
            multiple of the device count, the last partial batch of an epoch
            is dropped and batches are padded, not packed.
        mini_batch_size: `None`, or a positive int `m`: each step embeds its
            `batch_size` rows `m` at a time, keeping the activations of `m`
            rows only, for the loss and gradients of the whole batch
            (`keras_cosent.models.CachedSiameseEncoder`, GradCache): large
            in-batch-negative batches at the memory of small ones, for a
            second forward pass. Batches are then padded, not packed. Not for
            objectives that train a head (`sbert-softmax`). With several
            `devices`, each device caches its slice in mini-batches and the
            loss still sees the whole batch (gathered after caching).
        queue_size: `None`, or an int >= 1: InfoNCE (`"infonce"`, `"simcse"`)
            also takes the last `queue_size` positives, embedded by a momentum
            encoder, as negatives (MoCo, ESimCSE:
            `keras_cosent.models.MomentumContrastModel`; the model is then
            one, its queue and momentum weights saved with it). ESimCSE uses
            2.5 batches (160 at batch size 64).
        momentum: the momentum encoder's EMA coefficient in [0, 1), with
            `queue_size` only; `None`: ESimCSE's 0.995.
        word_repetition: `None`, or ESimCSE's duplication rate in [0, 1]
            (0.32 in the paper): each batch's column-1 texts (the positives)
            get a random subset of their tokens duplicated in place
            (`keras_cosent.data.word_repetition`), so that with `"simcse"`
            the two views of a sentence differ in length: a positive may
            grow past the encoder's `max_length`, up to the backbone's
            `max_sequence_length` (the paper repeats after tokenizing, and
            so does this). Refused for
            objectives of scored pairs (`"cosent"`, ...), whose second
            sentence is not a view of the first.
        max_grad_norm: `None` (the default: no clipping), or a positive
            float: each step's gradients are scaled together to a global L2
            norm of at most this, as `torch.nn.utils.clip_grad_norm_` does
            (`keras_cosent.optimizers.adamw`). sentence-transformers'
            trainer clips at 1.0 by default; pass `1.0` to train as it does.
            Refused with several TensorFlow devices, where Keras clips each
            device's share of the gradients before they are summed.
        **loss_options: the objective's loss options, e.g. `scale=20.0`
            (CoSENT, AnglE), `temperature=0.05` (InfoNCE, SimCSE, NT-Xent,
            SupCon), `symmetric=True` (InfoNCE, SimCSE), `margin=0.5`
            (triplet, batch-hard triplet, margin ranking) or
            `distance="euclidean"` (triplet, batch-hard triplet). One the
            objective does not take raises `TypeError` (a `None` value is
            accepted: the loss's default).

    Returns:
        A `TrainingSetup` with `model` (compiled), `batches`, `optimizer`,
        `loss`, `encoder`, `dataset` and `objective`.

    Mixed precision has no argument here: set Keras' global policy
    (`keras.mixed_precision.set_global_policy("mixed_bfloat16")`) before
    creating the encoder, as `keras-cosent train --mixed-precision` does. The
    model computes under it, the loss and the scores stay float32, and under
    `mixed_float16` the optimizer scales the loss. `mixed_float16` needs a GPU
    on TensorFlow and JAX: XLA on a CPU has no float16 matrix product (JAX
    stops, TensorFlow's loss turns nan; the command line refuses it there).

    Example:

    >>> import numpy as np
    >>> import keras_hub
    >>> import keras_cosent
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog", "sat"]
    >>> encoder = keras_cosent.models.SentenceEncoder(
    ...     keras_hub.models.BertBackbone(vocabulary_size=len(vocab), num_layers=1,
    ...         num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16),
    ...     keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=True), max_length=16)
    >>> pairs = keras_cosent.data.PairDataset(
    ...     [["a cat sat", "a dog", "a cat", "dog sat"], ["a cat", "a dog sat", "cat", "a cat"]],
    ...     np.array([4.0, 3.0, 5.0, 0.5], "float32"), source="inline")
    >>> setup = keras_cosent.training.build(encoder, pairs, "cosent", batch_size=2, epochs=1)
    >>> history = setup.model.fit(setup.batches, epochs=1, shuffle=False, verbose=0)
    >>> len(history.history["loss"])
    1
    """
    objective = get_objective(objective)
    objective.check_loss_options(loss_options, "build()", own=BUILD_ARGUMENTS)
    check_training_arguments(encoder, batch_size, epochs, learning_rate, warmup, weight_decay)
    check_bool("packing", packing)
    check_data_format(data_format)
    if not isinstance(dataset, PairDataset):
        raise TypeError(
            "`dataset` should be a keras_cosent.data.PairDataset. "
            f"Received: `dataset` of type {type(dataset).__name__}"
        )
    if batch_size < objective.min_batch_size:
        raise ValueError(
            f"`batch_size`={batch_size} is too small for objective {objective.name!r}: it "
            f"needs at least {objective.min_batch_size} rows per batch."
        )
    if word_repetition is not None and (graded := graded_terms(objective)):
        # Column 1 of a scored pair is no second view of column 0: repeating its
        # words changes the pair its score grades.
        raise ValueError(
            f"`word_repetition`={word_repetition!r} repeats words of the positives (column 1), "
            f"and objective {graded[0]!r} trains on scored pairs, whose second sentence is "
            "not a view of the first; use it with 'simcse', 'infonce' or another objective "
            "of (anchor, positive) rows."
        )
    if matryoshka_dims is not None:
        matryoshka_dims = check_matryoshka_dims(
            matryoshka_dims, encoder.embedding_dim, "matryoshka_dims"
        )
        if objective.wrap_model is not None:
            raise ValueError(
                f"`matryoshka_dims` needs a loss on the embeddings, and objective "
                f"{objective.name!r} trains a head on them. Received: "
                f"`matryoshka_dims`={matryoshka_dims!r}"
            )
    replicas = distributed.num_replicas()
    if devices is not None:
        devices = check_positive_int("devices", devices)  # not 1.0, True or '1'
    if devices is not None and devices != replicas:
        raise ValueError(
            f"`devices`={devices!r} but this runs on {replicas} device(s): create the "
            f"encoder and call `build` inside `keras_cosent.distributed.data_parallel"
            f"({devices!r})` (on PyTorch, launched by `torchrun --nproc_per_node {devices!r}`)."
        )
    if replicas > 1:
        distributed.check_created_in_scope(encoder)
        # Drawn here when None, and rank 0's on every PyTorch rank.
        seed = distributed.shared_seed(check_seed("seed", seed))
    if batch_size % replicas:
        raise ValueError(
            f"`batch_size`={batch_size} does not split over {replicas} devices; use a "
            f"multiple of {replicas}."
        )
    max_grad_norm = check_max_grad_norm(max_grad_norm, replicas)
    if mini_batch_size is not None:
        mini_batch_size = check_mini_batch_size(mini_batch_size)
        if mini_batch_size > batch_size // replicas:
            # Most likely the two sizes swapped: no batch would be split, and each
            # step would pay GradCache's second forward pass for nothing.
            per_device = f" per device ({replicas} devices)" if replicas > 1 else ""
            raise ValueError(
                f"`mini_batch_size`={mini_batch_size} is larger than the "
                f"{batch_size // replicas} rows of a batch{per_device} "
                f"(`batch_size`={batch_size}): it would embed every batch in one "
                "pass, for a second forward pass. Use a smaller `mini_batch_size`, "
                "or leave it None."
            )
        if objective.wrap_model is not None:
            raise ValueError(
                f"`mini_batch_size` caches the gradient of a loss on the embeddings, and "
                f"objective {objective.name!r} trains a head on them. Received: "
                f"`mini_batch_size`={mini_batch_size!r}"
            )
    if queue_size is not None:
        queue_size = check_queue_size(queue_size)
        momentum = ESIMCSE_MOMENTUM if momentum is None else check_momentum(momentum)
        if not issubclass(objective.loss, InfoNCELoss) or matryoshka_dims is not None:
            raise ValueError(
                f"`queue_size` adds negatives to InfoNCE (objectives 'infonce' and 'simcse', "
                f"without `matryoshka_dims`); objective {objective.name!r}"
                f"{' with matryoshka_dims' if matryoshka_dims is not None else ''} has no "
                f"place for them. Received: `queue_size`={queue_size}"
            )
        if mini_batch_size is not None or replicas > 1:
            raise ValueError(
                f"`queue_size`={queue_size} cannot yet be combined with "
                f"{'`mini_batch_size`' if mini_batch_size is not None else f'{replicas} devices'}"
                ": the momentum-queue step neither caches nor gathers the global batch."
            )
    elif momentum is not None:
        raise ValueError(
            f"`momentum` drives the momentum encoder of the negative queue; give "
            f"`queue_size` too. Received: `momentum`={momentum!r}, `queue_size`=None"
        )
    # The model is built under the global dtype policy (mixed precision included);
    # the loss computes in float32 whatever the policy.
    dataset, loss = shaped_task(objective, dataset, data_format, batch_size, loss_options,
                                word_repetition)
    if matryoshka_dims is not None:
        loss = MatryoshkaLoss(loss, dims=matryoshka_dims)
    if queue_size is not None:
        model = MomentumContrastModel(encoder, queue_size, momentum=momentum)
    elif mini_batch_size is not None:
        model = CachedSiameseEncoder(encoder, mini_batch_size)
    else:
        model = SiameseEncoder(encoder)
    if objective.wrap_model is not None:
        model = objective.wrap_model(model, loss)

    batches = PairBatches(
        dataset,
        encoder.tokenize,
        batch_size=batch_size,
        pad_id=encoder.pad_id,
        seed=seed,
        shuffle=shuffle,
        label_mode=objective.label_mode,
        unique_texts=objective.unique_texts,
        # Packed rows cannot be split over devices, nor into mini-batches, by rows
        # of the batch: a packed row mixes sentences of several batch rows.
        packing=(bool(packing) and replicas == 1 and mini_batch_size is None
                 and supports_packing(encoder.backbone)),
        drop_remainder=replicas > 1,
        word_repetition=word_repetition,
        # A repeated text may outgrow the tokenizer's length, not the backbone's.
        max_length=(None if word_repetition is None
                    else getattr(encoder.backbone, "max_sequence_length", None)),
    )
    total_steps = len(batches) * int(epochs)
    schedule = WarmupLinearDecay(
        learning_rate, total_steps, warmup_steps=warmup_steps(warmup, total_steps)
    )
    optimizer = adamw(schedule, weight_decay, exclude_from_weight_decay=NO_WEIGHT_DECAY,
                      max_grad_norm=max_grad_norm)
    model.compile(optimizer=optimizer, loss=loss)
    batches = distributed.shard_batches(batches)
    return TrainingSetup(model, batches, optimizer, loss, encoder, dataset, objective)



# Named when a keyword that is no loss option was passed: `lr=` for `learning_rate=`.
BUILD_ARGUMENTS = tuple(
    name for name, parameter in inspect.signature(build).parameters.items()
    if parameter.kind is parameter.KEYWORD_ONLY
)


def warmup_steps(warmup, total_steps):
    """The warm-up steps of a `warmup` fraction of `total_steps`, rounded to the
    nearest int (halves to even; transformers' Trainer takes the ceiling, one step
    more wherever `warmup * total_steps` has a fractional part under one half, or
    of one half with an even whole part), and always fewer than `total_steps` (a
    one-step run with `warmup` 0.6 would round to a rate of 0 at its only step)."""
    return max(0, min(round(warmup * total_steps), total_steps - 1))


def check_max_grad_norm(max_grad_norm, replicas):
    """Returns `max_grad_norm` as a float (or None), refused where the clipping would
    not see the whole batch's gradients: under `tf.distribute` Keras clips each
    replica's gradients before they are summed (JAX clips the global arrays, and
    PyTorch's ranks have averaged theirs by then)."""
    if max_grad_norm is None:
        return None
    max_grad_norm = check_positive_float("max_grad_norm", max_grad_norm)
    if replicas > 1 and keras.backend.backend() == "tensorflow":
        raise ValueError(
            f"`max_grad_norm`={max_grad_norm!r} cannot clip on {replicas} TensorFlow "
            "devices: Keras clips each device's gradients before tf.distribute sums "
            "them, so the norm would not be the batch's. Clip on one device, or train "
            "on several with JAX or PyTorch."
        )
    return max_grad_norm


def check_data_format(data_format):
    """Refuses a `data_format` no reader has: objectives read labels by it, and an
    unknown spelling (`"nli_jsonl"`) would silently read NLI classes as scores."""
    if data_format is not None and (not isinstance(data_format, str)
                                    or data_format not in READ_FORMATS):
        raise ValueError(
            f"`data_format` should be None or one of {READ_FORMATS}. "
            f"Received: `data_format`={data_format!r}"
        )


def check_shaped_dataset(objective, dataset, word_repetition):
    """Refuses a dataset, shaped for `objective`, that cannot fill one batch the loss
    learns from, or whose layout `word_repetition` cannot apply to."""
    # DataFormatError (a ValueError) naming the rows' file: what the data holds, not
    # an argument, is what cannot train.
    if len(dataset) < objective.min_batch_size:
        raise DataFormatError(
            dataset.source, None,
            f"{len(dataset)} row(s) for objective {objective.name!r}, which needs at least "
            f"{objective.min_batch_size} rows in a batch to learn from",
        )
    if word_repetition is not None and dataset.num_columns < 2:
        raise DataFormatError(
            dataset.source, None,
            f"`word_repetition`={word_repetition!r} repeats words of the positives (column "
            f"1), and objective {objective.name!r} trains on {dataset.num_columns} text "
            "column of these rows",
        )


def check_training_arguments(encoder, batch_size, epochs, learning_rate, warmup, weight_decay):
    """Refuses, before anything is built, the arguments `build` and `build_multi` share
    when they have the wrong type or lie out of range (naming the argument)."""
    if not (hasattr(encoder, "tokenize") and hasattr(encoder, "embedding_dim")):
        raise TypeError(
            "`encoder` should be a keras_cosent.models.SentenceEncoder. "
            f"Received: `encoder` of type {type(encoder).__name__}"
        )
    check_positive_int("batch_size", batch_size)
    check_positive_int("epochs", epochs)
    check_positive_float("learning_rate", learning_rate)
    if not is_number(warmup) or not 0 <= warmup < 1:
        raise ValueError(
            f"`warmup` should be a fraction in [0, 1). Received: `warmup`={warmup!r}"
        )
    check_non_negative_float("weight_decay", weight_decay)
