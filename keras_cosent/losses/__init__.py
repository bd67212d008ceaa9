"""Losses for sentence-embedding training, backend-agnostic (`keras.ops` only).

- `CoSENTLoss` / `cosent_loss`: ranking of pair cosines by label order.
- `InfoNCELoss` / `infonce_loss`: in-batch negatives (also unsupervised SimCSE).
- `AnglELoss` / `angle_loss`: CoSENT ranking on the AnglE angle similarity.
- `CosineMSELoss` / `cosine_mse_loss`: Sentence-BERT cosine regression baseline.
- `SoftmaxLoss` / `softmax_loss`: cross-entropy for the Sentence-BERT
  classifier head `keras_cosent.layers.SoftmaxClassifierHead`.
- `NTXentLoss`, `TripletLoss` (cosine or euclidean, optional batch-hard mining),
  `MarginRankingLoss` (hinge or logistic), `SupConLoss` and `MatryoshkaLoss`
  (any embedding loss over truncated, re-normalised dimensions).
- `JointLoss`: a weighted sum of losses on the same batch, each term logged
  by name (`loss_<name>`) when the model is a `SiameseEncoder`.
- `MultiTaskLoss`: each batch of a multi-dataset run trained with its own
  task's loss (`keras_cosent.training.build_multi`).

`get(name)` gives the loss class of a training objective (the names
`keras-cosent train --loss` accepts, from `keras_cosent.training.OBJECTIVES`).
"""

from keras_cosent.losses.angle_loss import AnglELoss
from keras_cosent.losses.angle_loss import angle_loss
from keras_cosent.losses.angle_loss import angle_similarity
from keras_cosent.losses.cosent_loss import CoSENTLoss
from keras_cosent.losses.cosent_loss import cosent_loss
from keras_cosent.losses.cosine_mse_loss import CosineMSELoss
from keras_cosent.losses.cosine_mse_loss import cosine_mse_loss
from keras_cosent.losses.infonce_loss import InfoNCELoss
from keras_cosent.losses.infonce_loss import infonce_loss
from keras_cosent.losses.softmax_loss import SoftmaxLoss
from keras_cosent.losses.softmax_loss import softmax_loss
from keras_cosent.losses.joint_loss import JointLoss
from keras_cosent.losses.margin_ranking_loss import MarginRankingLoss
from keras_cosent.losses.margin_ranking_loss import margin_ranking_loss
from keras_cosent.losses.matryoshka_loss import MatryoshkaLoss
from keras_cosent.losses.multi_task_loss import MultiTaskLoss
from keras_cosent.losses.matryoshka_loss import matryoshka_loss
from keras_cosent.losses.ntxent_loss import NTXentLoss
from keras_cosent.losses.ntxent_loss import ntxent_loss
from keras_cosent.losses.supcon_loss import SupConLoss
from keras_cosent.losses.supcon_loss import supcon_loss
from keras_cosent.losses.triplet_loss import TripletLoss
from keras_cosent.losses.triplet_loss import triplet_loss

__all__ = [
    "AnglELoss",
    "angle_loss",
    "angle_similarity",
    "CoSENTLoss",
    "cosent_loss",
    "CosineMSELoss",
    "cosine_mse_loss",
    "InfoNCELoss",
    "infonce_loss",
    "SoftmaxLoss",
    "softmax_loss",
    "JointLoss",
    "MarginRankingLoss",
    "margin_ranking_loss",
    "MatryoshkaLoss",
    "MultiTaskLoss",
    "matryoshka_loss",
    "NTXentLoss",
    "ntxent_loss",
    "SupConLoss",
    "supcon_loss",
    "TripletLoss",
    "triplet_loss",
    "get",
    "NAMES",
]


def get(name):
    """Returns the loss class of the training objective `name` (see `NAMES`).

    The class only: the arguments that `keras_cosent.training.build` fixes for
    the objective are yours to pass. `batch-hard-triplet` is
    `TripletLoss(mining="batch_hard")` (a bare `TripletLoss()` scores given
    triplets); `infonce` and `simcse` train with `mask_false_negatives=True`;
    `cosine-mse` takes `min_score`/`max_score` and `sbert-softmax` takes
    `num_labels` from the training data.

    Example:

    >>> import keras_cosent
    >>> keras_cosent.losses.get("simcse")(temperature=0.05).temperature
    0.05
    >>> keras_cosent.losses.get("batch-hard-triplet")(mining="batch_hard").mining
    'batch_hard'
    """
    from keras_cosent.training.objectives import OBJECTIVES

    by_name = {key.lower(): objective.loss for key, objective in OBJECTIVES.items()}
    if not isinstance(name, str) or name.lower() not in by_name:
        raise ValueError(
            f"Unknown loss name {name!r}. Expected one of: {', '.join(OBJECTIVES)}."
        )
    return by_name[name.lower()]


def __getattr__(name):
    if name == "NAMES":  # the objective names, read from the one table
        from keras_cosent.training.objectives import OBJECTIVES

        return tuple(OBJECTIVES)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
