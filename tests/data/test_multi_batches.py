"""`MultiBatches`: the task order (round-robin, proportional), its determinism, no mixing.

Each dataset's texts use their own token range, so a batch's token ids tell which
dataset every one of its texts came from.
"""

import collections

import numpy as np
import pytest

from keras_cosent.data import MultiBatches
from keras_cosent.data import PairBatches
from keras_cosent.data import PairDataset

OFFSETS = {"a": 1000, "b": 2000, "c": 3000}


def tokenize(texts):
    # "a17" -> [101, 1017, 102]: the dataset letter picks the id range.
    return [np.array([101, OFFSETS[t[0]] + int(t[1:]), 102]) for t in texts]


def dataset(letter, rows, columns):
    texts = [[f"{letter}{r * columns + c}" for r in range(rows)] for c in range(columns)]
    return PairDataset(texts, np.arange(rows, dtype="float32") / rows, source=letter)


def multi(sizes=(("a", 12, 2), ("b", 5, 3), ("c", 8, 2)), sampling="proportional", seed=0,
          packing=False):
    tasks = [
        PairBatches(dataset(letter, rows, columns), tokenize, batch_size=2, seed=seed + i,
                    pad_to_multiple_of=8, packing=packing)
        for i, (letter, rows, columns) in enumerate(sizes)
    ]
    return MultiBatches(tasks, sampling=sampling, seed=seed)


def epoch_tasks(batches):
    return [int(batches[i][1][0, 1]) for i in range(len(batches))]


def test_round_robin_cycles_until_the_smallest_task_is_served():
    batches = multi(sizes=(("a", 12, 2), ("b", 5, 3), ("c", 8, 2)), sampling="round-robin")
    # 6, 3 and 4 batches: 3 rounds of the three tasks.
    assert len(batches) == 9
    assert epoch_tasks(batches) == [0, 1, 2] * 3
    assert batches.batches_per_task == [3, 3, 3]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_proportional_serves_every_batch_of_every_task_once(seed):
    batches = multi(seed=seed)
    sizes = [len(t) for t in batches.tasks]
    assert len(batches) == sum(sizes) == 6 + 3 + 4
    assert batches.batches_per_task == sizes
    positions = collections.defaultdict(list)
    for task, index in batches.schedule:
        positions[task].append(index)
    assert {t: sorted(p) for t, p in positions.items()} == {
        t: list(range(n)) for t, n in enumerate(sizes)}
    # Every row of every dataset is trained once per epoch.
    for task, dataset_batches in enumerate(batches.tasks):
        rows = [dataset_batches[i][1] for i in range(len(dataset_batches))]
        assert sorted(np.concatenate(rows).tolist()) == sorted(
            dataset_batches.dataset.labels.tolist())


@pytest.mark.parametrize("packing", [False, True])
def test_no_batch_mixes_datasets_and_labels_follow_the_rows(packing):
    batches = multi(packing=packing)
    for i in range(len(batches)):
        x, y = batches[i]
        task = int(y[0, 1])
        assert np.all(y[:, 1] == task)
        ids = x["token_ids"]
        real = ids[(ids != 0) & (ids != 101) & (ids != 102)]
        letter = "abc"[task]
        assert np.all((real >= OFFSETS[letter]) & (real < OFFSETS[letter] + 1000)), (i, task)
        columns = batches.tasks[task].dataset.num_columns
        key = "gather_index" if packing else "token_ids"
        assert x[key].shape[1] == columns
        if not packing:
            # Row r of the dataset holds texts r*columns...; its label is r / rows.
            rows = (ids[:, 0, 1] - OFFSETS[letter]) // columns
            np.testing.assert_allclose(y[:, 0], rows / len(batches.tasks[task].dataset))


def test_the_order_is_reproducible_per_epoch_from_the_seed():
    first, again, other = multi(seed=5), multi(seed=5), multi(seed=6)
    assert first.schedule == again.schedule
    assert first.schedule != other.schedule
    epochs = []
    for _ in range(3):
        epochs.append(list(first.schedule))
        first.on_epoch_end()
    assert epochs[0] != epochs[1]
    # Jumping to epoch 2 (a resumed run) gives the batches epoch 2 had.
    again.set_epoch(2)
    assert again.schedule == epochs[2]
    fresh = multi(seed=5)
    fresh.set_epoch(2)
    for i in range(len(fresh)):
        np.testing.assert_array_equal(fresh[i][1], again[i][1])
        np.testing.assert_array_equal(fresh[i][0]["token_ids"], again[i][0]["token_ids"])


@pytest.mark.parametrize("seed", range(6))
def test_the_first_two_batches_differ_in_columns(seed):
    # TensorFlow takes the input signature from batches 0 and 1: a dimension that
    # is equal in both becomes static.
    batches = multi(sizes=(("a", 16, 2), ("b", 4, 3)), seed=seed)
    for _ in range(3):
        assert batches[0][0]["token_ids"].shape[1] != batches[1][0]["token_ids"].shape[1]
        batches.on_epoch_end()


def length_tokenize(texts):
    # "a b c" -> 5 ids: the text's word count sets its padded length.
    return [np.arange(len(t.split()) + 2) for t in texts]


@pytest.mark.parametrize("seed", range(12))
def test_the_first_two_batches_differ_in_every_varying_dimension(seed):
    # Every triplet batch pads to 8, as do half the pair batches: when batch 0 is
    # a short pair batch, no later batch differs from it in both columns and
    # length, and two later ones must lead instead.
    short, long_ = "a b", "a b c d e f g h i j"
    pairs = PairDataset([[short, short, long_, long_]] * 2, np.zeros(4, "float32"), "pairs")
    triplets = PairDataset([[short] * 4] * 3, np.zeros(4, "float32"), "triplets")
    batches = MultiBatches(
        [PairBatches(pairs, length_tokenize, batch_size=2, shuffle=False, pad_to_multiple_of=8),
         PairBatches(triplets, length_tokenize, batch_size=2, shuffle=False,
                     pad_to_multiple_of=8)],
        seed=seed)
    for _ in range(3):
        shapes = [batches[i][0]["token_ids"].shape[1:] for i in range(len(batches))]
        assert sorted(shapes) == [(2, 8), (2, 16), (3, 8), (3, 8)]
        assert shapes[0][0] != shapes[1][0] and shapes[0][1] != shapes[1][1], shapes
        batches.on_epoch_end()


def test_a_seed_of_none_draws_one():
    tasks = [PairBatches(dataset("a", 4, 2), tokenize, batch_size=2)]
    assert 0 <= MultiBatches(tasks, seed=None).seed < 2**32


def test_packed_tasks_share_one_row_length():
    batches = multi(packing=True)
    assert len({batches[i][0]["token_ids"].shape[1] for i in range(len(batches))}) == 1


@pytest.mark.parametrize("kwargs, match", [
    ({"sampling": "random"}, "`sampling` should be one of"),
    ({"tasks": []}, "non-empty list"),
    ({"seed": -1}, "`seed` should be None or an int"),
    ({"seed": 2.7}, "`seed` should be None or an int"),
    ({"seed": True}, "`seed` should be None or an int"),
])
def test_bad_arguments_are_named(kwargs, match):
    tasks = kwargs.pop("tasks", [PairBatches(dataset("a", 4, 2), tokenize, batch_size=2)])
    with pytest.raises((ValueError, TypeError), match=match):
        MultiBatches(tasks, **kwargs)


def test_background_workers_are_refused():
    tasks = [PairBatches(dataset("a", 4, 2), tokenize, batch_size=2)]
    with pytest.raises(ValueError, match=r"MultiBatches serves .* Received: `workers`=4"):
        MultiBatches(tasks, workers=4)
