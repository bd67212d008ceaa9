"""`build_multi`: one run over several datasets, each batch with its own dataset's objective.

Each task is a dataset with its objective (and loss options): it is shaped and
batched exactly as `keras_cosent.training.build` would for that objective alone
(its own `PairBatches`, its own label mode, columns and unique-text rule), and
`keras_cosent.data.MultiBatches` interleaves the tasks' batches, round-robin or
in proportion to their sizes. The model is a `MultiTaskEncoder` compiled with a
`MultiTaskLoss`, which applies each batch's own task's loss and logs
`loss_<task>`; one AdamW warm-up/decay schedule spans every step of the run.
"""

import collections
import dataclasses
import warnings
from typing import Optional

from keras_cosent import distributed
from keras_cosent.data.data_format_error import DataFormatError
from keras_cosent.data.multi_batches import SAMPLINGS
from keras_cosent.data.multi_batches import MultiBatches
from keras_cosent.data.pair_batches import PairBatches
from keras_cosent.data.pair_dataset import PairDataset
from keras_cosent.losses.matryoshka_loss import MatryoshkaLoss
from keras_cosent.losses.multi_task_loss import MultiTaskLoss
from keras_cosent.models.multi_task_encoder import MultiTaskEncoder
from keras_cosent.models.sequence_packing import supports_packing
from keras_cosent.optimizers.adamw import NO_WEIGHT_DECAY
from keras_cosent.optimizers.adamw import adamw
from keras_cosent.optimizers.warmup_linear_decay import WarmupLinearDecay
from keras_cosent.training.builder import check_data_format
from keras_cosent.training.builder import check_max_grad_norm
from keras_cosent.training.builder import shaped_task
from keras_cosent.training.builder import check_training_arguments
from keras_cosent.training.builder import warmup_steps
from keras_cosent.training.objectives import JointObjective
from keras_cosent.training.objectives import get_objective
from keras_cosent.utils.arguments import is_int
from keras_cosent.utils.truncation import check_matryoshka_dims


@dataclasses.dataclass
class Task:
    """One dataset of a multi-dataset run and how it trains.

    Args:
        dataset: a `keras_cosent.data.PairDataset` as read from a file (shaped
            for `objective` by `build_multi`, as `build` shapes it).
        objective: a name from `keras_cosent.training.OBJECTIVES` or an
            `Objective` (not one that trains a head, such as `sbert-softmax`).
        loss_options: the objective's loss options (`scale`, `temperature`,
            `margin`), as `build`'s `**loss_options`.
        data_format: the reader format `dataset` came from (`"nli-jsonl"`...).
        name: the task's name in the logs (`loss_<name>`); `None`: the
            objective's name (`joint` for a joint objective such as
            `"infonce:1,cosent:0.5"`), with `_2`, `_3`... for repeats.

    Example:

    >>> import numpy as np
    >>> from keras_cosent.data import PairDataset
    >>> from keras_cosent.training import Task
    >>> Task(PairDataset([["a"], ["b"]], np.ones(1)), "cosent", {"scale": 20.0}).objective
    'cosent'
    """

    dataset: PairDataset
    objective: object = "cosent"
    loss_options: Optional[dict] = None
    data_format: Optional[str] = None
    name: Optional[str] = None


MultiTrainingSetup = collections.namedtuple(
    "MultiTrainingSetup", ["model", "batches", "optimizer", "loss", "encoder", "tasks"]
)
MultiTrainingSetup.__doc__ = """What `build_multi` returns: call
`setup.model.fit(setup.batches, epochs=..., shuffle=False)`.

Fields:
    model: the compiled `keras_cosent.models.MultiTaskEncoder`.
    batches: the `keras_cosent.data.MultiBatches` to fit on.
    optimizer: the AdamW optimizer, with its warm-up/decay schedule over all steps.
    loss: the `keras_cosent.losses.MultiTaskLoss`.
    encoder: the `SentenceEncoder` being trained.
    tasks: the `Task`s, with `name` filled in and `dataset` shaped for the objective,
        in the order of the task indices.
"""


def _as_task(spec, position):
    if isinstance(spec, Task):
        return dataclasses.replace(spec)
    if isinstance(spec, (tuple, list)) and 1 <= len(spec) <= 3:
        return Task(*spec)
    raise TypeError(
        f"`tasks` entry {position} should be a keras_cosent.training.Task or a tuple "
        f"(dataset, objective[, loss_options]). Received: {spec!r:.200}"
    )


def task_names(objective_names, taken=()):
    """Distinct log names: each objective's name, with `_2`, `_3`... for repeats,
    skipping the names in `taken` (those the caller gave other tasks).

    Example:

    >>> from keras_cosent.training.multi_task import task_names
    >>> task_names(["cosent", "infonce", "cosent"])
    ['cosent', 'infonce', 'cosent_2']
    >>> task_names(["cosent", "cosent"], taken=["cosent_2"])
    ['cosent', 'cosent_3']
    """
    seen, names, taken = collections.Counter(), [], set(taken)
    for name in objective_names:
        seen[name] += 1
        candidate = name if seen[name] == 1 else f"{name}_{seen[name]}"
        while candidate in taken:
            seen[name] += 1
            candidate = f"{name}_{seen[name]}"
        taken.add(candidate)
        names.append(candidate)
    return names


def build_multi(
    encoder,
    tasks,
    *,
    sampling="proportional",
    batch_size=16,
    epochs=4,
    learning_rate=2e-5,
    warmup=0.1,
    weight_decay=0.01,
    seed=42,
    shuffle=True,
    packing=True,
    matryoshka_dims=None,
    max_grad_norm=None,
):
    """Builds the model, batches and optimizer that train `encoder` on several datasets.

    Every batch comes from one dataset and is trained with that dataset's
    objective; batches of different tasks may have different column counts
    and label kinds (scores, group ids, classes). Task `i`'s rows are shuffled
    with seed `(seed + i) mod 2**32`, the task order with `seed`; both are reproducible
    per epoch (`MultiBatches.set_epoch`), so `ResumableTraining` restores them.

    Args:
        encoder: a `keras_cosent.models.SentenceEncoder`.
        tasks: non-empty list of `Task`s or `(dataset, objective[, loss_options])`
            tuples.
        sampling: `"proportional"` (every batch of every task once per epoch,
            in a seeded random order) or `"round-robin"` (task 0, 1, ...; the
            epoch ends when the smallest task has served all its batches; the
            larger tasks' rows are reshuffled every epoch, so with
            `shuffle=False` they serve the same first batches each time,
            which warns).
        batch_size, epochs, learning_rate, warmup, weight_decay, seed, shuffle,
            packing, matryoshka_dims, max_grad_norm: as in
            `keras_cosent.training.build`, for every task (`matryoshka_dims`
            wraps each task's loss; `max_grad_norm` clips each batch's
            gradients).

    A multi-dataset run trains on one device: `build_multi` inside
    `keras_cosent.distributed.data_parallel` with several devices raises.

    Returns:
        A `MultiTrainingSetup`.

    Example:

    >>> import numpy as np
    >>> import keras_hub
    >>> import keras_cosent
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog", "sat"]
    >>> encoder = keras_cosent.models.SentenceEncoder(
    ...     keras_hub.models.BertBackbone(vocabulary_size=len(vocab), num_layers=1,
    ...         num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16),
    ...     keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=True), max_length=16)
    >>> sts = keras_cosent.data.PairDataset(
    ...     [["a cat sat", "a dog", "a cat", "dog sat"], ["a cat", "a dog sat", "cat", "a cat"]],
    ...     np.array([4.0, 3.0, 5.0, 0.5], "float32"), source="sts")
    >>> triplets = keras_cosent.data.PairDataset(
    ...     [["a cat", "a dog"], ["cat sat", "dog sat"], ["a dog", "a cat"]], None, "nli")
    >>> setup = keras_cosent.training.build_multi(
    ...     encoder, [(sts, "cosent"), (triplets, "triplet", {"margin": 0.3})],
    ...     sampling="round-robin", batch_size=2, epochs=1)
    >>> setup.batches.batches_per_task
    [1, 1]
    >>> history = setup.model.fit(setup.batches, epochs=1, shuffle=False, verbose=0)
    >>> sorted(key for key in history.history if key.startswith("loss"))
    ['loss', 'loss_cosent', 'loss_triplet']
    """
    tasks = [_as_task(spec, i) for i, spec in enumerate(tasks)] if tasks is not None else []
    if not tasks:
        raise ValueError("`tasks` is empty: give at least one (dataset, objective).")
    if sampling not in SAMPLINGS:
        raise ValueError(f"`sampling` should be one of {SAMPLINGS}. Received: `sampling`={sampling!r}")
    check_training_arguments(encoder, batch_size, epochs, learning_rate, warmup, weight_decay)
    replicas = distributed.num_replicas()
    if replicas > 1:
        # Its batches are neither split over the devices nor gathered: each PyTorch
        # rank would train on whole batches of its own.
        raise ValueError(
            f"A multi-dataset run trains on one device; this runs on {replicas} "
            "(`keras_cosent.distributed.data_parallel`). Call `build_multi` outside it."
        )
    max_grad_norm = check_max_grad_norm(max_grad_norm, replicas)
    if matryoshka_dims is not None:
        matryoshka_dims = check_matryoshka_dims(
            matryoshka_dims, encoder.embedding_dim, "matryoshka_dims"
        )
    objectives = [get_objective(task.objective) for task in tasks]
    for index, (task, objective) in enumerate(zip(tasks, objectives)):
        objective.check_loss_options(dict(task.loss_options or {}),
                                     f"task {index}'s loss_options")
    # A joint objective's name is its spec ("infonce:1,cosent:0.5"), which no
    # log key can hold.
    given = {}  # name: index of the task given it
    for index, task in enumerate(tasks):
        if task.name in given:
            raise ValueError(
                f"tasks {given[task.name]} and {index} are both named {task.name!r}: each "
                "task logs its loss as loss_<name>; give them distinct names"
            )
        if task.name is not None:
            given[task.name] = index
    unnamed = [index for index, task in enumerate(tasks) if task.name is None]
    names = dict(zip(unnamed, task_names(
        ["joint" if isinstance(objectives[i], JointObjective) else objectives[i].name
         for i in unnamed], taken=given)))
    packing = bool(packing) and supports_packing(encoder.backbone)
    sources = collections.Counter(getattr(task.dataset, "source", None) for task in tasks)
    losses, columns, task_batches = [], [], []
    for index, (task, objective) in enumerate(zip(tasks, objectives)):
        if not isinstance(task.dataset, PairDataset):
            raise TypeError(
                f"task {index}'s dataset should be a keras_cosent.data.PairDataset. "
                f"Received: {type(task.dataset).__name__}"
            )
        if objective.wrap_model is not None:
            raise ValueError(
                f"task {index}: objective {objective.name!r} trains a head on the pair "
                "embeddings, which a multi-dataset run (one loss per batch on the "
                "embeddings) does not support"
            )
        if batch_size < objective.min_batch_size:
            raise ValueError(
                f"`batch_size`={batch_size} is too small for task {index}'s objective "
                f"{objective.name!r}: it needs at least {objective.min_batch_size} rows per batch."
            )
        if task.name is None:
            task.name = names[index]
        check_data_format(task.data_format)
        try:
            task.dataset, loss = shaped_task(objective, task.dataset, task.data_format,
                                             batch_size, dict(task.loss_options or {}))
        except DataFormatError as error:
            if sources[task.dataset.source] < 2:
                raise
            # The source alone does not say which of the tasks reading it failed.
            raise DataFormatError(error.path, error.line,
                                  f"task {index}: {error.reason}") from None
        if matryoshka_dims is not None:
            loss = MatryoshkaLoss(loss, dims=matryoshka_dims)
        losses.append(loss)
        columns.append(task.dataset.num_columns)
        task_batches.append(PairBatches(
            task.dataset,
            encoder.tokenize,
            batch_size=batch_size,
            pad_id=encoder.pad_id,
            # Wrapped into PairBatches' range: --seed goes up to 2**32 - 1. Anything
            # but such an int goes as it is, for PairBatches to accept (None) or refuse.
            seed=(seed + index) % 2**32 if is_int(seed) and 0 <= seed < 2**32 else seed,
            shuffle=shuffle,
            label_mode=objective.label_mode,
            unique_texts=objective.unique_texts,
            packing=packing,
        ))
    loss = MultiTaskLoss(losses, [task.name for task in tasks], columns)
    batches = MultiBatches(task_batches, sampling=sampling, seed=seed)
    counts = [len(task_batch) for task_batch in task_batches]
    if sampling == "round-robin" and not shuffle and max(counts) > min(counts):
        # Each epoch serves the larger tasks' first batches, in file order: the
        # same ones every epoch, and the rest never.
        cut = ", ".join(f"task {index} ({tasks[index].name}) its first {min(counts)} of "
                        f"{count} batches" for index, count in enumerate(counts)
                        if count > min(counts))
        warnings.warn(
            f"`sampling`='round-robin' with `shuffle`=False trains, every epoch, {cut}: "
            "the same rows each time and the others never. Shuffle, or use "
            "'proportional' sampling.", stacklevel=2)
    total_steps = len(batches) * int(epochs)
    schedule = WarmupLinearDecay(
        learning_rate, total_steps, warmup_steps=warmup_steps(warmup, total_steps)
    )
    optimizer = adamw(schedule, weight_decay, exclude_from_weight_decay=NO_WEIGHT_DECAY,
                      max_grad_norm=max_grad_norm)
    model = MultiTaskEncoder(encoder)
    model.compile(optimizer=optimizer, loss=loss)
    return MultiTrainingSetup(model, batches, optimizer, loss, encoder, tasks)
