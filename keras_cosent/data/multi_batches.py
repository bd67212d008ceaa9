"""Batches of several datasets interleaved into one epoch, each batch from one dataset.

`MultiBatches` holds one `PairBatches` per training task (a dataset and its
objective) and serves their batches in an order drawn per epoch: round-robin
(task 0, task 1, ..., task 0, ...) or in proportion to the tasks' sizes. A
batch never mixes rows of two datasets. Each batch's `y` carries its task's
index next to the labels, so that one compiled train step can pick the task's
loss (`keras_cosent.losses.MultiTaskLoss`) while every batch keeps one array
structure, which TensorFlow's input pipeline requires.
"""

import keras
import numpy as np

from keras_cosent.data.pair_batches import PairBatches
from keras_cosent.data.pair_batches import check_in_order
from keras_cosent.utils.arguments import check_seed

SAMPLINGS = ("proportional", "round-robin")
# y's float32 labels hold integer group/class ids exactly up to 2**24.
_MAX_EXACT_ID = 2**24


class MultiBatches(keras.utils.PyDataset):
    """Interleaves the batches of several `PairBatches`, one task per batch.

    `sampling="proportional"` serves every batch of every task once per epoch,
    in a random order (drawn from `seed` and the epoch number), so a task's
    share of the steps is its share of the batches. `sampling="round-robin"`
    serves task 0, 1, ..., k-1, 0, 1, ... and ends the epoch when the smallest
    task has served all its batches (as sentence-transformers' round-robin
    sampler does): the larger tasks serve the first batches of their own
    shuffled epoch, a different part of their rows every epoch (the same
    first batches every epoch where the tasks' `PairBatches` do not shuffle).

    Each item is `(x, y)`: `x` is the task's batch as its `PairBatches` gives
    it (token arrays of shape `(batch, columns, ...)`; the task's own column
    count), `y` float32 of shape `(batch, 2)`: column 0 the task's labels
    (scores, or group/class ids as exact floats), column 1 the task index.

    TensorFlow fixes the input signature from the first two batches of a
    `PyDataset`; like `PairBatches`, the second batch of an epoch (and, when
    no later batch differs from the first in every such dimension, the first)
    is swapped with a later one so that the first two differ in every
    dimension (columns, length) that varies over the epoch. With packing, the
    tasks share one row length for the same reason.

    Args:
        tasks: list of `keras_cosent.data.PairBatches`, one per task.
        sampling: `"proportional"` or `"round-robin"`.
        seed: seed of the task order, an int in [0, 2**32), or None for a
            random one (each `PairBatches` keeps its own seed for the rows
            inside its batches).
        **pydataset_kwargs: `workers`, `use_multiprocessing`,
            `max_queue_size` of `keras.utils.PyDataset`; background workers
            are refused, as by `PairBatches`.

    Example:

    >>> import numpy as np
    >>> from keras_cosent.data import MultiBatches, PairBatches, PairDataset
    >>> def tokenize(texts):
    ...     return [np.array([101] + [len(w) for w in t.split()] + [102]) for t in texts]
    >>> pairs = PairDataset([["a b", "c", "d"], ["d", "e f g", "h"]],
    ...                     np.array([1.0, 0.0, 2.0]), "pairs")
    >>> triplets = PairDataset([["a", "b"], ["c", "d"], ["e", "f"]], np.zeros(2), "triplets")
    >>> batches = MultiBatches(
    ...     [PairBatches(pairs, tokenize, batch_size=1, seed=0, pad_to_multiple_of=8),
    ...      PairBatches(triplets, tokenize, batch_size=1, seed=1, pad_to_multiple_of=8)],
    ...     sampling="round-robin", seed=0)
    >>> len(batches), [task for task, _ in batches.schedule]
    (4, [0, 1, 0, 1])
    >>> x, y = batches[1]
    >>> x["token_ids"].shape[:2], y[:, 1].tolist()
    ((1, 3), [1.0])
    """

    def __init__(self, tasks, sampling="proportional", seed=0, **pydataset_kwargs):
        check_in_order(type(self).__name__, pydataset_kwargs)
        super().__init__(**pydataset_kwargs)
        tasks = list(tasks)
        if not tasks or any(not isinstance(t, PairBatches) for t in tasks):
            raise TypeError(
                "`tasks` should be a non-empty list of keras_cosent.data.PairBatches. "
                f"Received: `tasks`={tasks!r:.200}"
            )
        if sampling not in SAMPLINGS:
            raise ValueError(
                f"`sampling` should be one of {SAMPLINGS}. Received: `sampling`={sampling!r}"
            )
        if len({t.packing for t in tasks}) != 1:
            raise ValueError(
                "All tasks' PairBatches should pack (packing=True) or all pad; "
                f"received packing={[t.packing for t in tasks]}"
            )
        for task in tasks:
            if task.label_mode != "score" and len(task.dataset) > _MAX_EXACT_ID:
                raise ValueError(
                    f"{task.dataset.source!r} has {len(task.dataset)} rows; MultiBatches "
                    f"carries ids as float32, exact for at most {_MAX_EXACT_ID} rows."
                )
        if tasks[0].packing:
            # One row length for every task's packed batches: with a per-task
            # length, TensorFlow could fix the first task's as the static one.
            length = max(t.row_length for t in tasks)
            for task in tasks:
                task.row_length = length
        self.tasks = tasks
        self.sampling = sampling
        self.seed = check_seed("seed", seed)
        sizes = [len(t) for t in tasks]
        self._num_batches = (
            sum(sizes) if sampling == "proportional" else min(sizes) * len(tasks)
        )
        self._epoch = 0
        self.schedule = self._plan_epoch(0)

    @property
    def batches_per_task(self):
        """How many batches of each task an epoch serves, in task order."""
        counts = np.bincount([task for task, _ in self.schedule], minlength=len(self.tasks))
        return [int(c) for c in counts]

    def _plan_epoch(self, epoch):
        """`[(task, batch index within the task's epoch), ...]` for epoch `epoch`."""
        for task in self.tasks:
            task.set_epoch(epoch)
        sizes = [len(t) for t in self.tasks]
        if self.sampling == "round-robin":
            order = [t for _ in range(min(sizes)) for t in range(len(sizes))]
        else:
            rng = np.random.default_rng([self.seed, epoch])
            order = rng.permutation(np.repeat(np.arange(len(sizes)), sizes)).tolist()
        served = [0] * len(sizes)
        schedule = []
        for task in order:
            schedule.append((task, served[task]))
            served[task] += 1
        self._vary_leading_shapes(schedule)
        return schedule

    def _shape_key(self, entry):
        """The non-batch dimensions of a scheduled batch: (columns, length)."""
        task, index = entry
        batches = self.tasks[task]
        if batches.packing:
            length = batches.row_length
        else:
            length = batches._batch_length(batches._batches[index])
        return (batches.dataset.num_columns, int(length))

    def _vary_leading_shapes(self, schedule):
        """Swaps a later batch into second place so that batches 0 and 1 differ in
        every dimension that varies over the epoch (see the class docstring)."""
        if len(schedule) < 3:
            return
        keys = [self._shape_key(entry) for entry in schedule]
        varying = [d for d in range(2) if len({k[d] for k in keys}) > 1]

        def differs(i, j):
            return all(keys[i][d] != keys[j][d] for d in varying)

        if not varying or differs(0, 1):
            return
        partner = next((j for j in range(2, len(schedule)) if differs(0, j)), None)
        if partner is None:
            # Batch 0 shares its column count or its length with every other
            # batch, so both vary: a batch of another column count (same length
            # as batch 0) and one of another length (same column count) differ
            # from each other in both, and lead instead.
            first = next(j for j in range(1, len(keys)) if keys[j][0] != keys[0][0])
            partner = next(j for j in range(1, len(keys)) if keys[j][1] != keys[0][1])
            schedule[0], schedule[first] = schedule[first], schedule[0]
        schedule[1], schedule[partner] = schedule[partner], schedule[1]

    def __len__(self):
        return self._num_batches

    def __getitem__(self, index):
        if index < 0:
            index += self._num_batches
        if not 0 <= index < self._num_batches:
            raise IndexError(f"batch index {index} out of range [0, {self._num_batches})")
        task, position = self.schedule[index]
        x, labels = self.tasks[task][position]
        y = np.stack(
            [np.asarray(labels, "float32"), np.full(len(labels), task, "float32")], axis=1
        )
        return x, y

    def on_epoch_end(self):
        self.set_epoch(self._epoch + 1)

    @property
    def epoch(self):
        """The 0-based epoch whose batches `__getitem__` serves."""
        return self._epoch

    def set_epoch(self, epoch):
        """Serves epoch `epoch`'s batches, as if `epoch` epochs had gone before.

        The order depends only on the seeds and the epoch number, so a run
        restored at epoch `k` (`keras_cosent.callbacks.ResumableTraining`) sees
        the batches an uninterrupted run would.
        """
        epoch = int(epoch)
        if epoch < 0:
            raise ValueError(f"`epoch` should be >= 0. Received: `epoch`={epoch}")
        if epoch != self._epoch:
            self.schedule = self._plan_epoch(epoch)
        self._epoch = epoch
