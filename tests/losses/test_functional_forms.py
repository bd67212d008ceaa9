"""The functional losses check their hyperparameters as the classes do, and
`y_true=None` is taken or refused by name instead of failing in a backend.

Each case here was a silent wrong result before the check: a negative scale
or temperature gave finite values that reward mis-ranking, 0 gave inf/NaN, a
misspelt option fell back to another form, a short `weights` dropped a dim.
"""

import re

import keras
import numpy as np
import pytest

from keras_cosent.losses import AnglELoss
from keras_cosent.losses import CoSENTLoss
from keras_cosent.losses import CosineMSELoss
from keras_cosent.losses import InfoNCELoss
from keras_cosent.losses import JointLoss
from keras_cosent.losses import MarginRankingLoss
from keras_cosent.losses import MatryoshkaLoss
from keras_cosent.losses import MultiTaskLoss
from keras_cosent.losses import NTXentLoss
from keras_cosent.losses import SoftmaxLoss
from keras_cosent.losses import SupConLoss
from keras_cosent.losses import TripletLoss
from keras_cosent.losses import angle_loss
from keras_cosent.losses import cosent_loss
from keras_cosent.losses import cosine_mse_loss
from keras_cosent.losses import infonce_loss
from keras_cosent.losses import margin_ranking_loss
from keras_cosent.losses import matryoshka_loss
from keras_cosent.losses import ntxent_loss
from keras_cosent.losses import supcon_loss
from keras_cosent.losses import triplet_loss
from keras_cosent.losses.cosent_loss import ranking_loss_from_similarity

RNG = np.random.default_rng(0)
LABELS = np.array([2.0, 0.0, 1.0, 0.0], "float32")
PAIRS = RNG.normal(size=(4, 2, 8)).astype("float32")
TRIPLETS = RNG.normal(size=(4, 3, 8)).astype("float32")
NAN = float("nan")


def _call(function, columns=2):
    rows = PAIRS if columns == 2 else TRIPLETS
    return lambda **kwargs: function(LABELS, rows, **kwargs)


FUNCTIONS = {
    "cosent_loss": _call(cosent_loss),
    "angle_loss": _call(angle_loss),
    "ranking_loss_from_similarity": lambda **kw: ranking_loss_from_similarity(
        LABELS, LABELS, **kw),
    "infonce_loss": _call(infonce_loss),
    "ntxent_loss": _call(ntxent_loss),
    "supcon_loss": _call(supcon_loss),
    "triplet_loss": _call(triplet_loss, columns=3),
    "margin_ranking_loss": _call(margin_ranking_loss, columns=3),
    "cosine_mse_loss": _call(cosine_mse_loss),
    "matryoshka_loss": lambda **kw: matryoshka_loss(
        LABELS, PAIRS, **{"loss": CoSENTLoss(), "dims": [8, 4], **kw}),
}

BAD_ARGUMENTS = [
    ("cosent_loss", {"scale": -20}, "`scale`=-20"),
    ("cosent_loss", {"scale": 0}, "`scale`=0"),
    ("angle_loss", {"scale": NAN}, "`scale`=nan"),
    ("ranking_loss_from_similarity", {"scale": -1.0}, "`scale`=-1.0"),
    ("infonce_loss", {"temperature": 0}, "`temperature`=0"),
    ("infonce_loss", {"temperature": -1}, "`temperature`=-1"),
    ("infonce_loss", {"symmetric": 1}, "`symmetric`=1"),
    ("infonce_loss", {"mask_false_negatives": "yes"}, "`mask_false_negatives`='yes'"),
    ("ntxent_loss", {"temperature": 0}, "`temperature`=0"),
    ("supcon_loss", {"temperature": 0}, "`temperature`=0"),
    ("supcon_loss", {"temperature": -1}, "`temperature`=-1"),
    ("triplet_loss", {"distance": "cosin"}, "`distance`='cosin'"),
    ("triplet_loss", {"mining": "hard"}, "`mining`='hard'"),
    ("triplet_loss", {"margin": -1}, "`margin`=-1"),
    ("margin_ranking_loss", {"form": "x"}, "`form`='x'"),
    ("margin_ranking_loss", {"margin": -1}, "`margin`=-1"),
    ("margin_ranking_loss", {"form": "logistic", "scale": 0}, "`scale`=0"),
    ("cosine_mse_loss", {"min_score": 1.0, "max_score": 1.0}, "`max_score`=1.0"),
    ("cosine_mse_loss", {"max_score": NAN}, "`max_score`=nan"),
    ("matryoshka_loss", {"dims": [2, 4], "weights": [1.0]}, "`weights`=[1.0]"),
    ("matryoshka_loss", {"dims": [4, 4]}, "`dims`=[4, 4]"),
    ("matryoshka_loss", {"weights": [1.0, -1.0]}, "`weights`=-1.0"),
    ("matryoshka_loss", {"loss": "cosent"}, "`loss`='cosent'"),
]


@pytest.mark.parametrize(
    "function, kwargs, shown", BAD_ARGUMENTS,
    ids=[f"{f}-" + ",".join(f"{k}={v!r}".replace(" ", "") for k, v in kw.items())
         for f, kw, _ in BAD_ARGUMENTS],
)
def test_a_bad_hyperparameter_raises_naming_it_and_its_value(function, kwargs, shown):
    with pytest.raises(ValueError, match=re.escape(shown)):
        FUNCTIONS[function](**kwargs)


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_the_defaults_pass_the_checks(function):
    assert np.all(np.isfinite(keras.ops.convert_to_numpy(FUNCTIONS[function]())))


def _value(x):
    return np.asarray(keras.ops.convert_to_numpy(x), "float64")


LABEL_FREE = [
    (InfoNCELoss(), PAIRS),
    (NTXentLoss(), PAIRS),
    (TripletLoss(), TRIPLETS),
    (MarginRankingLoss(), TRIPLETS),
    (MatryoshkaLoss(InfoNCELoss(), dims=[8, 4]), PAIRS),
    (JointLoss([InfoNCELoss(), NTXentLoss()], weights=[1.0, 0.5]), PAIRS),
]


@pytest.mark.parametrize(
    "loss, rows", LABEL_FREE, ids=[type(loss).__name__ for loss, _ in LABEL_FREE]
)
def test_a_loss_that_ignores_its_labels_takes_none(loss, rows):
    np.testing.assert_allclose(_value(loss(None, rows)), _value(loss(np.zeros(4), rows)))


LABELLED = {
    "SupConLoss": (lambda: SupConLoss()(None, PAIRS), "`SupConLoss` reads class labels"),
    "supcon_loss": (lambda: supcon_loss(None, PAIRS), "`SupConLoss` reads one label per row"),
    "TripletLoss-batch_hard": (
        lambda: TripletLoss(mining="batch_hard")(None, PAIRS),
        "`TripletLoss(mining='batch_hard')` reads class labels"),
    "triplet_loss-batch_hard": (
        lambda: triplet_loss(None, PAIRS, mining="batch_hard"),
        "`TripletLoss(mining='batch_hard')` reads one label per row"),
    "InfoNCELoss-mask": (
        lambda: InfoNCELoss(mask_false_negatives=True)(None, PAIRS),
        "`InfoNCELoss(mask_false_negatives=True)` reads group ids"),
    "infonce_loss-mask": (
        lambda: infonce_loss(None, PAIRS, mask_false_negatives=True),
        "`InfoNCELoss(mask_false_negatives=True)` reads one label per pair"),
    "cosent_loss": (lambda: cosent_loss(None, PAIRS), "`CoSENTLoss` reads one label per pair"),
    "angle_loss": (lambda: angle_loss(None, PAIRS), "`AnglELoss` reads one label per pair"),
    "CoSENTLoss": (lambda: CoSENTLoss()(None, PAIRS), "`CoSENTLoss` reads one label per pair"),
    "AnglELoss": (lambda: AnglELoss()(None, PAIRS), "`AnglELoss` reads one label per pair"),
    "CosineMSELoss": (
        lambda: CosineMSELoss()(None, PAIRS), "`CosineMSELoss` reads one label per pair"),
    "SoftmaxLoss": (
        lambda: SoftmaxLoss()(None, PAIRS[:, 0, :3]), "`SoftmaxLoss` reads one label per pair"),
    "MatryoshkaLoss-of-a-labelled-loss": (
        lambda: MatryoshkaLoss(CoSENTLoss(), dims=[8, 4])(None, PAIRS),
        "`CoSENTLoss` reads one label per pair"),
    "JointLoss-with-a-labelled-term": (
        lambda: JointLoss([InfoNCELoss(), CoSENTLoss()])(None, PAIRS),
        "`CoSENTLoss` reads one label per pair"),
    "JointLoss-positive_above": (
        lambda: JointLoss([InfoNCELoss(), NTXentLoss()], positive_above=[2.5, None])(None, PAIRS),
        "`JointLoss(positive_above=...)` reads labels"),
    "MultiTaskLoss": (
        lambda: MultiTaskLoss([InfoNCELoss()], ["pairs"], [2])(None, PAIRS),
        "`MultiTaskLoss` reads the labels and the task index"),
}


@pytest.mark.parametrize("case", sorted(LABELLED))
def test_a_loss_that_reads_labels_names_them_when_y_true_is_none(case):
    call, shown = LABELLED[case]
    with pytest.raises(ValueError, match=re.escape(shown) + ".*`y_true`=None"):
        call()


@pytest.mark.parametrize("case", ["CoSENTLoss", "cosent_loss", "SoftmaxLoss",
                                  "JointLoss-with-a-labelled-term"])
@pytest.mark.parametrize("labels", [np.array(["sports", "news", "sports", "art"]),
                                    ["sports", "news", "sports", "art"]], ids=["array", "list"])
def test_text_labels_are_refused_naming_y_true(case, labels):
    # Each backend failed on its own terms ("Invalid dtype: str32", "could not
    # convert string to float"), without naming y_true or the way out.
    shown = LABELLED[case][1]
    loss = {"CoSENTLoss": lambda y: CoSENTLoss()(y, PAIRS),
            "cosent_loss": lambda y: cosent_loss(y, PAIRS),
            "SoftmaxLoss": lambda y: SoftmaxLoss()(y, PAIRS[:, 0, :3]),
            "JointLoss-with-a-labelled-term": lambda y: JointLoss(
                [InfoNCELoss(), CoSENTLoss()])(y, PAIRS)}[case]
    with pytest.raises(ValueError, match=re.escape(shown) + r".* as numbers; received text "
                                                            r"\(first: 'sports'\)"):
        loss(labels[:len(PAIRS)])


@pytest.mark.parametrize("labels", [np.array([0, 2**24, 2**24 + 1, 3], "int64"),
                                    [0, 2**24, 2**24 + 1, 3]], ids=["array", "list"])
def test_integer_labels_that_float32_merges_are_refused(labels):
    # Read in float32, the ids 2**24 and 2**24 + 1 were one class: SupCon saw a
    # positive pair where there was none.
    with pytest.raises(ValueError, match=r"`SupConLoss` reads class labels from `y_true` in "
                                         r"float32.*received 16777217 at index 2"):
        SupConLoss()(labels, PAIRS[:, 0])
    SupConLoss()(np.array([0, 1, 2, 2**24], "int64"), PAIRS[:, 0])  # exact: accepted


@pytest.mark.parametrize("loss", [CoSENTLoss(), AnglELoss(), CosineMSELoss(), SupConLoss(),
                                  InfoNCELoss(mask_false_negatives=True)],
                         ids=lambda loss: type(loss).__name__)
def test_labels_of_the_right_size_but_the_wrong_shape_are_refused(loss):
    # 4 labels as a (2, 2) matrix for 4 pairs: flattened, they would line up with
    # the pairs by accident of layout.
    with pytest.raises(ValueError, match=r"\(batch,\) or \(batch, 1\)\. Received shape \(2, 2\)"):
        loss(np.arange(4.0).reshape(2, 2), PAIRS)
    loss(np.arange(4.0).reshape(4, 1), PAIRS)  # (batch, 1) is one label per pair
