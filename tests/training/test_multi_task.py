"""`build_multi`: each batch is trained with its own dataset's loss, logged per task.

With a learning rate too small to move the weights (and no dropout), an epoch's
logged means are the means of the NumPy references applied to each batch's
embeddings: CoSENT on the pair batches, the triplet loss on the triplet batches.
"""

import warnings

import keras
import numpy as np
import pytest

from keras_cosent.compat import optimizer_learning_rate
from keras_cosent.data import PairDataset
from keras_cosent.training import Task
from keras_cosent.training import build_multi
from tests.losses.test_cosent_loss import reference_cosent
from tests.losses.test_cosent_loss import reference_cosines
from tests.losses.test_triplet_loss import reference as reference_triplet
from tests.training.test_builder import FIRST
from tests.training.test_builder import SECOND
from tests.training.test_builder import pairs
from tests.training.test_builder import tiny_encoder


def triplets():
    return PairDataset([FIRST[:4], SECOND[:4], SECOND[4:]], None, source="triplets")


# Keras weights the logged `loss` of a step by the leading size of the first input
# array: with packing, the packed rows. Unpacked batches all weigh batch_size.
@pytest.mark.parametrize("sampling, packing", [("proportional", True), ("round-robin", False)])
@pytest.mark.heavy
def test_each_batch_gets_its_own_datasets_loss(sampling, packing):
    setup = build_multi(
        tiny_encoder(), [(pairs(), "cosent", {"scale": 20.0}),
                         Task(triplets(), "triplet", {"margin": 0.5}, name="nli")],
        sampling=sampling, batch_size=2, epochs=1, learning_rate=1e-12, warmup=0.0,
        packing=packing,
    )
    expected = {"cosent": [], "nli": []}
    rows = {"cosent": [], "nli": []}
    for i in range(len(setup.batches)):
        x, y = setup.batches[i]
        embeddings = np.asarray(keras.ops.convert_to_numpy(setup.model(x)), "float64")
        task = "cosent" if int(y[0, 1]) == 0 else "nli"
        if task == "cosent":
            assert embeddings.shape[1] == 2
            expected["cosent"].append(
                reference_cosent(y[:, 0], reference_cosines(embeddings), 20.0))
        else:
            assert embeddings.shape[1] == 3
            expected["nli"].append(reference_triplet(embeddings, 0.5, "cosine"))
        rows[task].append(len(keras.tree.flatten(x)[0]))
    # Epoch 0's plan, whose batches `expected` lists (the model's fit serves it).
    history = setup.model.fit(setup.batches, epochs=1, shuffle=False, verbose=0).history
    counts = setup.batches.batches_per_task
    assert counts == ([4, 2] if sampling == "proportional" else [2, 2])
    assert [len(expected["cosent"]), len(expected["nli"])] == counts
    # Each task's mean weighs its batches as Keras' `loss` weighs all of them.
    for task, name in (("cosent", "loss_cosent"), ("nli", "loss_nli")):
        np.testing.assert_allclose(history[name][0],
                                   np.average(expected[task], weights=rows[task]), rtol=1e-4)
    np.testing.assert_allclose(
        history["loss"][0], np.average(expected["cosent"] + expected["nli"],
                                       weights=rows["cosent"] + rows["nli"]), rtol=1e-4)


@pytest.mark.heavy
def test_one_task_logs_the_loss_keras_logs_with_a_smaller_last_batch():
    # 8 pairs in batches of 3: 3, 3 and 2 rows, which Keras' `loss` weighs by rows.
    setup = build_multi(tiny_encoder(), [(pairs(), "cosent")], batch_size=3, epochs=1,
                        learning_rate=1e-12, warmup=0.0, packing=False)
    history = setup.model.fit(setup.batches, epochs=1, shuffle=False, verbose=0).history
    np.testing.assert_allclose(history["loss_cosent"][0], history["loss"][0], rtol=1e-6)


def test_one_schedule_spans_every_step():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        setup = build_multi(tiny_encoder(), [(pairs(), "cosent"), (triplets(), "triplet")],
                            batch_size=2, epochs=3, learning_rate=1e-3)
    assert len(setup.batches) == 4 + 2
    assert optimizer_learning_rate(setup.optimizer).total_steps == 3 * (4 + 2)


def test_the_largest_seed_wraps_for_the_later_tasks():
    # Task i shuffles with seed (seed + i) mod 2**32: --seed 4294967295 with two
    # --train files stopped with PairBatches' "seed should be ... in [0, 2**32)".
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        setup = build_multi(tiny_encoder(), [(pairs(), "cosent"), (triplets(), "triplet")],
                            batch_size=2, epochs=1, seed=2**32 - 1)
    assert [task.seed for task in setup.batches.tasks] == [2**32 - 1, 0]


@pytest.mark.parametrize("tasks, match", [
    ([], "`tasks` is empty"),
    ([(pairs(), "sbert-softmax")], "trains a head"),
    ([("not a dataset", "cosent")], "PairDataset"),
    ([(pairs(), "cosent", {}, "extra")], "tuple"),
])
def test_bad_tasks_are_named(tasks, match):
    with pytest.raises((ValueError, TypeError), match=match):
        build_multi(tiny_encoder(), tasks, batch_size=2)


def test_several_devices_are_refused(monkeypatch):
    # Its batches are neither split nor gathered; tests/distributed/test_build.py
    # checks this inside a real two-device context on every backend.
    from keras_cosent import distributed

    monkeypatch.setattr(distributed, "num_replicas", lambda: 2)
    with pytest.raises(ValueError, match="trains on one device; this runs on 2"):
        build_multi(tiny_encoder(), [(pairs(), "cosent")], batch_size=2)


def test_a_joint_objective_is_a_task_named_joint():
    # Its spec was taken for the task's log name, which MultiTaskLoss refused.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        setup = build_multi(tiny_encoder(), [(pairs(), "infonce:1,cosent:0.5"),
                                             (pairs(), "cosent"), (pairs(), "cosent,angle")],
                            batch_size=4, epochs=1)
    assert setup.loss.names == ("joint", "cosent", "joint_2")
    assert [type(loss).__name__ for loss in setup.loss.losses] == [
        "JointLoss", "CoSENTLoss", "JointLoss"]


def test_bad_sampling_is_named():
    with pytest.raises(ValueError, match="`sampling` should be one of"):
        build_multi(tiny_encoder(), [(pairs(), "cosent")], sampling="random")


def test_given_task_names_are_kept_apart_from_the_automatic_ones():
    # A task named as an automatic name would be: the unnamed one steps past it.
    setup = build_multi(tiny_encoder(), [Task(pairs(), "cosent", name="cosent_2"),
                                         (pairs(), "cosent"), (pairs(), "cosent")],
                        batch_size=4, epochs=1)
    assert [task.name for task in setup.tasks] == ["cosent_2", "cosent", "cosent_3"]
    with pytest.raises(ValueError, match="tasks 0 and 2 are both named 'sts'"):
        build_multi(tiny_encoder(), [Task(pairs(), "cosent", name="sts"), (pairs(), "cosent"),
                                     Task(pairs(), "angle", name="sts")],
                    batch_size=4, epochs=1)


def test_round_robin_without_shuffling_warns_that_rows_are_never_trained():
    # 8 pairs (4 batches of 2) beside 4 triplets (2 batches): pairs' batches 3 and 4
    # would never be served.
    with pytest.warns(UserWarning, match=r"task 0 \(cosent\) its first 2 of 4 batches"):
        build_multi(tiny_encoder(), [(pairs(), "cosent"), (triplets(), "triplet")],
                    sampling="round-robin", shuffle=False, batch_size=2, epochs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build_multi(tiny_encoder(), [(pairs(), "cosent"), (triplets(), "triplet")],
                    sampling="round-robin", batch_size=2, epochs=1)


def test_a_data_error_names_the_task_where_tasks_share_a_source():
    from keras_cosent.data import DataFormatError

    no_labels = PairDataset([FIRST[:4], SECOND[:4]], None, source="inline")
    with pytest.raises(DataFormatError, match=r"^inline: task 1: objective 'cosent' needs 2 "
                                              "text columns and a label"):
        build_multi(tiny_encoder(), [(pairs(), "cosent"), (no_labels, "cosent")],
                    batch_size=2, epochs=1)
    # A source of its own names the task already: the message is the reader's.
    alone = PairDataset([FIRST[:4], SECOND[:4]], None, source="unscored.tsv")
    with pytest.raises(DataFormatError, match=r"^unscored.tsv: objective 'cosent' needs"):
        build_multi(tiny_encoder(), [(pairs(), "cosent"), (alone, "cosent")],
                    batch_size=2, epochs=1)
