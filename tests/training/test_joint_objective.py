"""Joint objectives ("infonce:1.0,cosent:0.5"): parsing, and one fit step against NumPy.

The reference is written from the issue's formula with the test's own rows: InfoNCE
per anchor over all the batch's second sentences (temperature 0.05), averaged over
the pairs scored above 2.5, plus 0.5 x CoSENT (scale 20) over all pairs.
"""

import numpy as np
import pytest

from keras_cosent.losses import JointLoss
from keras_cosent.training import build
from keras_cosent.training import get_objective
from keras_cosent.training.objectives import joint_objective
from tests.losses.test_cosent_loss import reference_cosent
from tests.losses.test_cosent_loss import reference_cosines
from tests.losses.test_infonce_loss import reference_infonce
from tests.training.test_builder import FIRST
from tests.training.test_builder import SCORES
from tests.training.test_builder import SECOND
from tests.training.test_builder import pairs
from tests.training.test_builder import tiny_encoder


def test_a_spec_names_terms_weights_and_thresholds():
    objective = get_objective("infonce:1.0,cosent:0.5")
    assert [t.name for t in objective.terms] == ["infonce", "cosent"]
    assert objective.weights == (1.0, 0.5) and objective.positive_above == (2.5, None)
    assert objective.label_mode == "score" and objective.unique_texts
    assert get_objective("cosent,angle").weights == (1.0, 1.0)
    # A weight of 0 logs a term without training on it, as JointLoss allows.
    assert get_objective("infonce:0,cosent").weights == (0.0, 1.0)


@pytest.mark.parametrize(
    "spec,match",
    [
        ("infonce:1,quadruplet:1", "'quadruplet'"),
        ("infonce:-1,cosent", "number >= 0"),
        ("infonce:0,cosent:0", "at least one term a positive weight"),
        ("infonce:abc,cosent", "'abc'"),
        ("sbert-softmax,cosent", "trains a head"),
        ("cosent,cosent:2", "twice"),
        ("supcon,cosent", "different data layouts"),
        ("infonce,supcon", "different data layouts"),
    ],
)
def test_bad_specs_are_named(spec, match):
    with pytest.raises(ValueError, match=match):
        joint_objective(spec)


def test_over_nli_rows_the_positives_are_the_entailments():
    # NLI labels are the classes 2/1/0: above 2.5 took none, and the InfoNCE
    # term logged 0 and trained nothing, silently.
    from keras_cosent.data import DataFormatError
    from keras_cosent.data import PairDataset

    objective = get_objective("infonce:1,cosent:1")
    nli = PairDataset([FIRST[:6], SECOND[:6]], np.array([2, 0, 1, 2, 0, 0], "float32"), "nli")
    loss = objective.make_loss({}, objective.prepare(nli, "nli-jsonl"), "nli-jsonl")
    assert loss.positive_above == (1.5, None)
    assert objective.make_loss({}, pairs(), "pair-tsv").positive_above == (2.5, None)
    # A term that would see no positive is an error naming the file.
    unscored = PairDataset([FIRST[:4], SECOND[:4]], np.array([1.0, 2.0, 0.5, 2.5], "float32"),
                           "low.tsv")
    with pytest.raises(DataFormatError, match=r"low\.tsv: no pair is labelled above 2\.5, so "
                                              r"the joint objective's 'infonce' term"):
        objective.make_loss({}, unscored, "pair-tsv")
    no_entailment = PairDataset([FIRST[:3], SECOND[:3]], np.array([1, 0, 1], "float32"), "nli")
    with pytest.raises(DataFormatError, match="no pair is labelled above 1.5"):
        objective.make_loss({}, no_entailment, "nli-jsonl")


@pytest.mark.heavy
def test_one_fit_step_equals_the_numpy_reference():
    setup = build(tiny_encoder(), pairs(), "infonce:1.0,cosent:0.5",
                  batch_size=len(FIRST), epochs=1, learning_rate=1e-3)
    assert isinstance(setup.loss, JointLoss) and len(setup.batches) == 1
    # The InfoNCE term takes scores as labels, so it must not mask "groups".
    assert setup.loss.losses[0].mask_false_negatives is False
    embeddings = np.stack(
        [setup.encoder.encode(FIRST), setup.encoder.encode(SECOND)], axis=1
    ).astype("float64")
    history = setup.model.fit(setup.batches, epochs=1, shuffle=False, verbose=0).history
    infonce_rows = reference_infonce(np.arange(len(FIRST)), embeddings, 0.05, False, False)
    infonce = infonce_rows[SCORES > 2.5].mean()
    cosent = reference_cosent(SCORES, reference_cosines(embeddings), 20.0)
    # Rows come in the batch's shuffled order; both terms are order-free.
    np.testing.assert_allclose(history["loss_infonce"][0], infonce, rtol=1e-4)
    np.testing.assert_allclose(history["loss_cosent"][0], cosent, rtol=1e-4)
    np.testing.assert_allclose(history["loss"][0], infonce + 0.5 * cosent, rtol=1e-4)
