"""Padded training batches of sentence pairs (or triplets) as a `keras.utils.PyDataset`.

`PairBatches` tokenises every distinct text of a `PairDataset` once, then builds
each batch from the cached token ids with `pad_batch`, padding to the batch's own
longest sequence. It is what `model.fit` consumes for CoSENT (float scores), the
regression and softmax baselines, and InfoNCE/SimCSE (int group ids).
"""

import math
import warnings

import keras
import numpy as np

from keras_cosent.data.packing import PER_SENTENCE_KEYS
from keras_cosent.data.packing import batch_rows
from keras_cosent.data.packing import pack_batch
from keras_cosent.data.padding import default_pad_to_multiple_of
from keras_cosent.data.padding import pad_batch
from keras_cosent.data.padding import padded_length
from keras_cosent.data.pair_dataset import PairDataset
from keras_cosent.data.word_repetition import check_repetition_rate
from keras_cosent.data.word_repetition import max_repetitions
from keras_cosent.data.word_repetition import word_repetition as repeat_words
from keras_cosent.utils.arguments import check_seed
from keras_cosent.utils.arguments import is_int

_LABEL_MODES = ("score", "group", "class")
# Texts per `tokenize` call: bounds peak memory of the tokeniser on big corpora.
_TOKENIZE_CHUNK = 4096
# Seeds word repetition apart from the shuffle drawn from the same `seed` and epoch.
_REPETITION_STREAM = 1


class PairBatches(keras.utils.PyDataset):
    """Shuffled, per-batch padded batches of a `PairDataset` for `model.fit`.

    Each item is `(x, y)`: `x` a dict of `token_ids` (int32), `padding_mask`
    (bool) and `segment_ids` (int32), each of shape `(batch, columns, length)`
    where `length` is the batch's longest sequence rounded up to
    `pad_to_multiple_of`; `y` the float32 labels (`label_mode="score"`), the
    int32 class ids of the labels (`label_mode="class"`, for SupCon), or int32
    group ids (`label_mode="group"`): rows whose column-1 (positive) text is
    identical share an id, so InfoNCE can mask them as false negatives.

    Pairs are reshuffled at the end of every epoch; given `seed`, the sequence
    of epochs is reproducible. The number of batches is the same every epoch,
    as Keras requires.

    Length bucketing (`length_buckets=k > 1`) sorts the rows by token length
    inside random chunks of `k * batch_size` rows, cuts the chunks into batches
    and shuffles the batch order. Padding (and so CPU time) drops sharply, but
    batches become less random: rows of similar length (often the same genre
    and a similar score range) train together, which narrows the in-batch
    comparisons a ranking loss such as CoSENT or InfoNCE relies on. Small `k`
    (e.g. 8-32) keeps most of the saving with most of the randomness; it is off
    by default.

    `unique_texts=True` (for InfoNCE) guarantees no text occurs in two rows of
    one batch: rows are placed first-fit in shuffled order, and a row whose text
    is already in the batch goes to a later batch (at the end, if only batches
    holding its texts have room, it swaps places with a row of a full batch
    that fits elsewhere). No row is ever dropped for
    this: the per-epoch counts are in `stats`, and a warning is emitted when
    the constraint forced anything unusual (an oversized batch, or a clash that
    the greedy placement could not avoid, which happens when some texts occur
    in about as many rows as there are batches). With `drop_remainder` every
    batch stays exactly `batch_size` rows: a row no clash-free batch has room
    for takes a clash instead of an oversized batch, and only the epoch's
    natural remainder is dropped.

    Args:
        dataset: a `keras_cosent.data.PairDataset`.
        tokenize: callable mapping a list of strings to a list of 1-D integer
            arrays with special tokens, e.g. `SentenceEncoder.tokenize`.
        batch_size: rows per batch.
        pad_id: id written into padded positions.
        shuffle: reshuffle the rows every epoch.
        seed: seed of the shuffles; `None` draws one from NumPy's global
            generator (so `keras.utils.set_random_seed` makes runs repeatable).
        label_mode: `"score"` (float32 labels of the dataset), `"class"`
            (the labels as int32 class ids) or `"group"` (int32 group ids,
            for InfoNCE; needs `batch_size >= 2`).
        unique_texts: keep every text at most once per batch.
        length_buckets: chunk size, in batches, for length bucketing; 0 or 1
            disables it.
        pad_to_multiple_of: round each batch's length up to a multiple of
            this, so compiled train steps see few distinct shapes. None:
            `keras_cosent.data.padding.default_pad_to_multiple_of()`, i.e. 8 on
            JAX/TensorFlow and 1 (the batch's exact length) on eager PyTorch.
        max_length: optional cap on the padded length; a tokenised text longer
            than it is an error (truncation is the tokeniser's job).
        drop_remainder: drop the last, incomplete batch of each epoch: the
            last rows of the epoch's (shuffled) order, cut before any length
            bucketing, so that long rows are dropped no more often than others.
            With `unique_texts`, a row whose text is already in the batches
            it would go to waits for a later one, so the rows left out are
            more often rows that share a text (measured: two rows sharing
            one, in 13 rows of batch 4, were each dropped in 12% of epochs
            against the even 7.7%).
        packing: lay each batch out as packed rows instead of padded columns
            (for a `SiameseEncoder` on a keras-hub `BertBackbone`): the
            sentences of every column share rows of one fixed length (the
            dataset's longest text, rounded up to `pad_to_multiple_of`), a
            batch takes as few rows as it needs, and attention stays inside
            each sentence, so the model computes the same function on far
            fewer token positions (`keras_cosent.data.packing`).
            `x` is then a dict of `token_ids`, `positions`, `segment_ids`,
            `pack_ids` of shape `(rows, row_length)` and `gather_index`,
            `gather_mask` of shape `(batch, columns, row_length)`.
        rows_multiple: with `packing`, round a batch's number of rows up to a
            multiple of this, so compiled train steps see few distinct shapes.
            None: 2 where `pad_to_multiple_of` > 1 (compiled backends), else 1.
        word_repetition: None, or ESimCSE's duplication rate in [0, 1] (0.32
            in the paper): the column-1 (positive) text of every row gets a
            random subset of its tokens duplicated in place
            (`keras_cosent.data.word_repetition`), drawn afresh for each row
            and epoch from `seed`, so its two views differ in length. Capped
            at `max_length` when that is set. `num_tokens` and
            `padding_ratio` count the texts as tokenised, before repetition.
        **pydataset_kwargs: `workers`, `use_multiprocessing`,
            `max_queue_size` of `keras.utils.PyDataset`, for its interface
            only: background workers (`workers` > 1) are refused, since they
            fetch batches ahead of an epoch's plan.

    Example:

    >>> import numpy as np
    >>> from keras_cosent.data import PairBatches, PairDataset
    >>> def tokenize(texts):
    ...     return [np.array([101] + [len(w) for w in t.split()] + [102]) for t in texts]
    >>> ds = PairDataset([["a b", "c"], ["d", "e f g"]], np.array([1.0, 0.0]), "demo")
    >>> batches = PairBatches(ds, tokenize, batch_size=2, seed=0, pad_to_multiple_of=8)
    >>> x, y = batches[0]
    >>> x["token_ids"].shape, y.dtype
    ((2, 2, 8), dtype('float32'))
    """

    def __init__(
        self,
        dataset,
        tokenize,
        batch_size,
        pad_id=0,
        shuffle=True,
        seed=None,
        label_mode="score",
        unique_texts=False,
        length_buckets=0,
        pad_to_multiple_of=None,
        max_length=None,
        drop_remainder=False,
        packing=False,
        rows_multiple=None,
        word_repetition=None,
        **pydataset_kwargs,
    ):
        check_in_order(type(self).__name__, pydataset_kwargs)
        super().__init__(**pydataset_kwargs)
        _check_inputs(dataset, tokenize, label_mode)
        length_buckets, pad_to_multiple_of, rows_multiple = _check_options(
            batch_size, label_mode, length_buckets, pad_to_multiple_of, max_length, packing,
            rows_multiple,
        )
        _check_dataset(dataset, batch_size, label_mode, drop_remainder)
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.pad_id = pad_id
        if not isinstance(shuffle, (bool, np.bool_)):
            # A truthy string ("no") would switch shuffling on.
            raise ValueError(f"`shuffle` should be a bool. Received: `shuffle`={shuffle!r}")
        self.shuffle = bool(shuffle)
        self.seed = check_seed("seed", seed)
        self.label_mode = label_mode
        self.unique_texts = bool(unique_texts)
        self.length_buckets = int(length_buckets)
        self.pad_to_multiple_of = int(pad_to_multiple_of)
        self.max_length = max_length
        self.drop_remainder = bool(drop_remainder)
        self.packing = packing
        self.rows_multiple = int(rows_multiple)
        self.word_repetition = (
            None if word_repetition is None else check_repetition_rate(word_repetition)
        )
        if self.word_repetition is not None and dataset.num_columns < 2:
            raise ValueError(
                "`word_repetition` repeats words in column 1 (the positive), but "
                f"{dataset.source!r} has {dataset.num_columns} column; it needs at least 2 "
                "(for unsupervised SimCSE/ESimCSE, give each text twice)."
            )

        self._tokenize_once(tokenize)
        # One row length for every epoch: a compiled train step keeps it static.
        # With word repetition it holds the longest a repeated text can become.
        longest = self._text_lengths.max()
        if self.word_repetition is not None:
            longest = max(
                n + max_repetitions(n - 2, self.word_repetition) for n in self._text_lengths
            )
        self.row_length = padded_length(longest, self.pad_to_multiple_of, self.max_length)
        self._targets = self._batch_targets()
        num_rows = len(dataset)
        if self.drop_remainder:
            self._num_batches = num_rows // self.batch_size
        else:
            self._num_batches = math.ceil(num_rows / self.batch_size)
        self._epoch = 0
        self._warned_epochs = set()
        self._batches = self._plan_epoch(0)
        self._warn_of_plan()

    def _batch_targets(self):
        """Per-row targets: the scores, or each anchor's group id for InfoNCE."""
        if self.label_mode == "score":
            return np.asarray(self.dataset.labels, dtype="float32")
        if self.label_mode == "class":
            return np.asarray(self.dataset.labels).astype("int32")
        groups = np.unique(self._text_ids[:, 1], return_inverse=True)[1]
        return groups.reshape(-1).astype("int32")

    def _tokenize_once(self, tokenize):
        """Tokenises each distinct text once; rows then refer to texts by index."""
        index = {}
        text_ids = np.empty((len(self.dataset), self.dataset.num_columns), dtype="int64")
        for c, column in enumerate(self.dataset.columns):
            for r, text in enumerate(column):
                text_ids[r, c] = index.setdefault(text, len(index))
        texts = list(index)
        tokens = []
        for start in range(0, len(texts), _TOKENIZE_CHUNK):
            chunk = texts[start : start + _TOKENIZE_CHUNK]
            out = tokenize(chunk)
            if len(out) != len(chunk):
                raise ValueError(
                    f"`tokenize` returned {len(out)} sequences for {len(chunk)} texts."
                )
            for text, ids in zip(chunk, out):
                ids = np.asarray(ids, dtype="int32")
                if ids.ndim != 1 or ids.size == 0:
                    raise ValueError(
                        f"`tokenize` should return a non-empty 1-D id sequence per text; "
                        f"got shape {ids.shape} for {text!r}."
                    )
                if self.max_length is not None and ids.size > self.max_length:
                    raise ValueError(
                        f"{text[:60]!r} has {ids.size} tokens, more than "
                        f"`max_length`={self.max_length}; `tokenize` should truncate."
                    )
                tokens.append(ids)
        self._tokens = tokens
        self._text_ids = text_ids
        self._text_lengths = np.array([ids.size for ids in tokens], dtype="int64")
        self._row_lengths = self._text_lengths[text_ids].max(axis=1)

    def _plan_epoch(self, epoch):
        """Returns this epoch's batches as arrays of row indices."""
        rng = np.random.default_rng([self.seed, epoch])
        num_rows, size = len(self.dataset), self.batch_size
        order = rng.permutation(num_rows) if self.shuffle else np.arange(num_rows)
        bucketing = self.length_buckets > 1
        if self.drop_remainder and not self.unique_texts:
            # The remainder leaves before the length sort: cut after it, the rows
            # dropped would be the longest of the last chunk, every epoch.
            order = order[: self._num_batches * size]
        if bucketing:
            chunk = self.length_buckets * size
            order = np.concatenate([
                part[np.argsort(self._row_lengths[part], kind="stable")]
                for part in (order[i : i + chunk] for i in range(0, len(order), chunk))
            ])
        stats = {"rows": num_rows, "batches": self._num_batches, "deferred": 0,
                 "dropped": 0, "oversized": 0, "conflicts": 0}
        if self.unique_texts:
            batches = self._fill_unique(order, stats)
        else:
            batches = [order[i * size : (i + 1) * size] for i in range(self._num_batches)]
        stats["dropped"] = num_rows - sum(len(b) for b in batches)
        if bucketing and self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        natural_remainder = num_rows - self._num_batches * size if self.drop_remainder else 0
        self._plan_warning = None
        if stats["oversized"] or stats["conflicts"] or stats["dropped"] > natural_remainder:
            # Said by _warn_of_plan when the epoch is served: `on_epoch_end` also
            # plans the epoch after the last, which no one trains on.
            self._plan_warning = epoch, (
                f"PairBatches(unique_texts=True) on {self.dataset.source!r}, epoch {epoch}: "
                f"{stats['oversized']} row(s) went into oversized batches, "
                f"{stats['conflicts']} row(s) share a text with their batch (no batch "
                f"was free of their texts: some texts occur in about as many rows as "
                f"there are batches), {stats['dropped']} row(s) "
                f"dropped (drop_remainder alone drops {natural_remainder})."
            )
        self.stats = stats
        batches = [np.asarray(b, dtype="int64") for b in batches]
        if not self.packing:
            # Packed batches have one row length and a batch axis Keras leaves
            # dynamic anyway.
            self._vary_leading_lengths(batches, epoch)
        return batches

    def _batch_length(self, rows, epoch=None, multiple=None):
        """Padded length of the batch made of `rows` in `epoch`, as `__getitem__` pads
        it (or to another `multiple`)."""
        if self.word_repetition is None:
            longest = self._row_lengths[rows].max()
        else:
            longest = max(len(s) for s in self._batch_sequences(rows, epoch))
        return padded_length(longest, multiple or self.pad_to_multiple_of, self.max_length)

    def _batch_sequences(self, rows, epoch=None):
        """The token sequences of `rows`, row-major, column 1 repeated when asked."""
        sequences = [self._tokens[t] for t in self._text_ids[rows].reshape(-1)]
        if self.word_repetition is None:
            return sequences
        epoch = self._epoch if epoch is None else epoch
        num_columns = self.dataset.num_columns
        for i, row in enumerate(rows):
            # One generator per row and epoch: what a row gets does not depend
            # on the batch it lands in, nor on the batch order.
            rng = np.random.default_rng([self.seed, int(epoch), int(row), _REPETITION_STREAM])
            slot = i * num_columns + 1
            sequences[slot] = repeat_words(
                sequences[slot], self.word_repetition, rng, max_length=self.max_length
            )
        return sequences

    def _vary_leading_lengths(self, batches, epoch):
        """Gives batches 0 and 1 different padded lengths whenever the epoch has several.

        On TensorFlow, Keras fixes the input signature of a PyDataset from its
        first two batches: if both pad to the same length, that length becomes
        static and the first longer batch fails inside `fit`. Swapping one batch
        into second place changes only the batch order, not what is in a batch.

        Lengths are compared rounded to a multiple of 8 (and of
        `pad_to_multiple_of`) on every backend: compared as each pads (8 on
        TensorFlow and JAX, 1 on PyTorch), PyTorch swapped in other epochs and
        trained the same seed in another batch order.
        """
        if len(batches) < 3:
            return
        multiple = math.lcm(8, self.pad_to_multiple_of)
        first = self._batch_length(batches[0], epoch, multiple)
        if self._batch_length(batches[1], epoch, multiple) != first:
            return
        for j in range(2, len(batches)):
            if self._batch_length(batches[j], epoch, multiple) != first:
                batches[1], batches[j] = batches[j], batches[1]
                return

    def _fill_unique(self, order, stats):
        """First-fit of rows into the fixed number of batches, no text twice per batch."""
        size, count = self.batch_size, self._num_batches
        batches = [[] for _ in range(count)]
        seen = [set() for _ in range(count)]
        row_texts = self._text_ids
        first_open, leftovers = 0, []
        for position, row in enumerate(order):
            texts = set(row_texts[row].tolist())
            while first_open < count and len(batches[first_open]) >= size:
                first_open += 1
            for b in range(first_open, count):
                if len(batches[b]) < size and seen[b].isdisjoint(texts):
                    batches[b].append(row)
                    seen[b] |= texts
                    stats["deferred"] += b != position // size
                    break
            else:
                leftovers.append((row, texts))
        stuck = []
        for row, texts in leftovers:
            stats["deferred"] += 1
            # Every batch with room holds one of this row's texts. Rather than
            # drop the row: swap it with a row of a clash-free full batch that
            # fits a batch with room, else overfill a clash-free batch.
            free = [b for b in range(count) if seen[b].isdisjoint(texts)]
            if self._swap_into(row, texts, free, batches, seen):
                continue
            if self.drop_remainder:
                stuck.append((row, texts))
                continue
            if free:
                target = min(free, key=lambda b: len(batches[b]))
                stats["oversized"] += len(batches[target]) >= size
            else:
                target = min(range(count), key=lambda b: len(batches[b]))
                stats["conflicts"] += 1
            batches[target].append(row)
            seen[target] |= texts
        if self.drop_remainder:
            self._fill_to_size(stuck, batches, seen, stats)
        return batches

    def _fill_to_size(self, stuck, batches, seen, stats):
        """With drop_remainder: fills every batch to `batch_size` from `stuck`.

        A sharded or compiled step needs full batches, so the only rows left out
        are the epoch's natural remainder; a row that can only go where its text
        already is counts as a conflict rather than leaving its batch short.
        """
        size = self.batch_size
        for row, texts in stuck:
            open_batches = [b for b in range(len(batches)) if len(batches[b]) < size]
            if not open_batches:
                return
            free = [b for b in open_batches if seen[b].isdisjoint(texts)]
            target = free[0] if free else open_batches[0]
            stats["conflicts"] += not free
            batches[target].append(row)
            seen[target] |= texts

    def _swap_into(self, row, texts, free, batches, seen):
        """Places `row` in a full clash-free batch by moving one of its rows out."""
        size = self.batch_size
        open_batches = [b for b in range(len(batches)) if len(batches[b]) < size]
        for full in free:
            for i, other in enumerate(batches[full]):
                other_texts = set(self._text_ids[other].tolist())
                for target in open_batches:
                    if seen[target].isdisjoint(other_texts):
                        batches[target].append(other)
                        seen[target] |= other_texts
                        seen[full] -= other_texts
                        batches[full][i] = row
                        seen[full] |= texts
                        return True
        return False

    def _warn_of_plan(self):
        """Warns, once per epoch, of what the unique-texts placement could not avoid.

        Once even when the epoch is planned again: `fit` plans epoch 1 before the
        first epoch, and `ServeEpochBatches` then plans epoch 0 anew, to the same
        batches."""
        if self._plan_warning is not None:
            (epoch, message), self._plan_warning = self._plan_warning, None
            if epoch not in self._warned_epochs:
                self._warned_epochs.add(epoch)
                warnings.warn(message, stacklevel=3)

    def __len__(self):
        return self._num_batches

    def __getitem__(self, index):
        self._warn_of_plan()
        if index < 0:
            index += self._num_batches
        if not 0 <= index < self._num_batches:
            raise IndexError(f"batch index {index} out of range [0, {self._num_batches})")
        rows = self._batches[index]
        num_columns = self.dataset.num_columns
        sequences = self._batch_sequences(rows)
        if self.packing:
            x = pack_batch(sequences, self.row_length, self.pad_id, self.rows_multiple)
            for key in PER_SENTENCE_KEYS:
                x[key] = x[key].reshape(len(rows), num_columns, self.row_length)
            return x, self._targets[rows]
        padded = pad_batch(sequences, self.pad_id, self.pad_to_multiple_of, self.max_length)
        x = {k: v.reshape(len(rows), num_columns, -1) for k, v in padded.items()}
        return x, self._targets[rows]

    def on_epoch_end(self):
        self.set_epoch(self._epoch + 1)

    @property
    def epoch(self):
        """The 0-based epoch whose batches `__getitem__` serves."""
        return self._epoch

    def set_epoch(self, epoch):
        """Serves epoch `epoch`'s batches, as if `epoch` epochs had gone before.

        The order of every epoch depends only on `seed` and the epoch number, so
        a run restored at epoch `k` (`keras_cosent.callbacks.ResumableTraining`)
        sees the batches an uninterrupted run would.
        """
        epoch = int(epoch)
        if epoch < 0:
            raise ValueError(f"`epoch` should be >= 0. Received: `epoch`={epoch}")
        if epoch != self._epoch and self.shuffle:
            self._batches = self._plan_epoch(epoch)
        self._epoch = epoch

    @property
    def num_tokens(self):
        """Real (non-padding) tokens in this epoch's batches."""
        return int(sum(self._text_lengths[self._text_ids[b]].sum() for b in self._batches))

    @property
    def padding_ratio(self):
        """Fraction of the token positions in this epoch's batches that are padding."""
        positions = 0
        for rows in self._batches:
            if self.packing:
                lengths = self._text_lengths[self._text_ids[rows].reshape(-1)]
                _, num_rows = batch_rows(lengths, self.row_length, self.rows_multiple)
                positions += num_rows * self.row_length
            else:
                positions += len(rows) * self.dataset.num_columns * self._batch_length(rows)
        return 1.0 - self.num_tokens / positions


def check_in_order(name, pydataset_kwargs):
    """Refuses the `keras.utils.PyDataset` options that fetch batches in background
    workers: they fetch ahead across an epoch's end, before `on_epoch_end` plans
    the next epoch, and (measured with `fit` on PyTorch) an epoch's batches came
    out of the plan's order, so a run was no longer reproducible nor resumable.
    One batch is a few NumPy slices of rows tokenized once, work the training
    thread does itself."""
    workers = pydataset_kwargs.get("workers", 1)
    multiprocessing = pydataset_kwargs.get("use_multiprocessing", False)
    if (is_int(workers) and workers > 1) or (multiprocessing and workers != 0):
        raise ValueError(
            f"{name} serves each epoch's batches in the order planned for it; Keras' "
            "background workers fetch ahead of that plan. Leave `workers` at 1 and "
            f"`use_multiprocessing` off. Received: `workers`={workers!r}, "
            f"`use_multiprocessing`={multiprocessing!r}"
        )


def _check_inputs(dataset, tokenize, label_mode):
    """Type checks of what PairBatches reads: the dataset, the tokenizer, the label mode."""
    if not isinstance(dataset, PairDataset):
        raise TypeError(
            "`dataset` should be a keras_cosent.data.PairDataset. "
            f"Received: `dataset` of type {type(dataset).__name__}"
        )
    if not callable(tokenize):
        raise TypeError(f"`tokenize` should be callable. Received: `tokenize`={tokenize!r}")
    if label_mode not in _LABEL_MODES:
        raise ValueError(
            f"`label_mode` should be one of {_LABEL_MODES}. "
            f"Received: `label_mode`={label_mode!r}"
        )


def _check_options(
    batch_size, label_mode, length_buckets, pad_to_multiple_of, max_length, packing, rows_multiple
):
    """Validates the batching options; returns the defaulted
    `(length_buckets, pad_to_multiple_of, rows_multiple)`."""
    min_batch = 2 if label_mode == "group" else 1
    if not is_int(batch_size) or batch_size < min_batch:
        why = " (InfoNCE needs in-batch negatives)" if label_mode == "group" else ""
        raise ValueError(
            f"`batch_size` should be an integer >= {min_batch} with "
            f"label_mode={label_mode!r}{why}. Received: `batch_size`={batch_size!r}"
        )
    length_buckets = 0 if length_buckets is None else length_buckets
    if not is_int(length_buckets) or length_buckets < 0:
        raise ValueError(
            "`length_buckets` should be a non-negative integer (0 disables bucketing). "
            f"Received: `length_buckets`={length_buckets!r}"
        )
    if pad_to_multiple_of is None:
        pad_to_multiple_of = default_pad_to_multiple_of()
    if not is_int(pad_to_multiple_of) or pad_to_multiple_of < 1:
        raise ValueError(
            "`pad_to_multiple_of` should be a positive integer. "
            f"Received: `pad_to_multiple_of`={pad_to_multiple_of!r}"
        )
    if max_length is not None and (not is_int(max_length) or max_length < 1):
        raise ValueError(
            f"`max_length` should be None or a positive integer. "
            f"Received: `max_length`={max_length!r}"
        )
    if packing not in (True, False):
        raise ValueError(f"`packing` should be True or False. Received: `packing`={packing!r}")
    if rows_multiple is None:
        rows_multiple = 2 if pad_to_multiple_of > 1 else 1
    if not is_int(rows_multiple) or rows_multiple < 1:
        raise ValueError(
            "`rows_multiple` should be a positive integer. "
            f"Received: `rows_multiple`={rows_multiple!r}"
        )
    return length_buckets, pad_to_multiple_of, rows_multiple


def _check_dataset(dataset, batch_size, label_mode, drop_remainder):
    """Checks that `dataset` can give batches with these options (rows, labels, columns)."""
    if len(dataset) == 0:
        raise ValueError(f"`dataset` ({dataset.source!r}) has no rows.")
    if drop_remainder and len(dataset) < batch_size:
        raise ValueError(
            f"`dataset` ({dataset.source!r}) has {len(dataset)} rows, fewer than "
            f"`batch_size`={batch_size}, so drop_remainder=True leaves no batch (`build` "
            "sets it to train on several devices, which split only whole batches)."
        )
    if label_mode in ("score", "class") and dataset.labels is None:
        raise ValueError(
            f"label_mode={label_mode!r} needs labels, but `dataset` ({dataset.source!r}) "
            "has none; use label_mode='group' for unlabelled (InfoNCE) data."
        )
    if label_mode == "class":
        labels = np.asarray(dataset.labels)
        fractional = np.flatnonzero((labels != np.round(labels)) | (labels < 0))
        if fractional.size:
            raise ValueError(
                f"label_mode='class' needs class ids, integers >= 0, but `dataset` "
                f"({dataset.source!r}) has label {labels[fractional[0]].item()!r} in row "
                f"{fractional[0]}."
            )
    if label_mode == "group" and dataset.num_columns < 2:
        raise ValueError(
            f"label_mode='group' needs at least 2 columns (anchor, positive); "
            f"`dataset` ({dataset.source!r}) has {dataset.num_columns}."
        )
