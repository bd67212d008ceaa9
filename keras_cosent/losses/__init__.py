"""Losses for sentence-embedding training, backend-agnostic (`keras.ops` only).

- `CoSENTLoss` / `cosent_loss`: ranking of pair cosines by label order.
- `InfoNCELoss` / `infonce_loss`: in-batch negatives (also unsupervised SimCSE).
- `AnglELoss` / `angle_loss`: CoSENT ranking on the AnglE angle similarity.
- `CosineMSELoss` / `cosine_mse_loss`: Sentence-BERT cosine regression baseline.
- `SoftmaxLoss` / `softmax_loss`: cross-entropy for the Sentence-BERT
  classifier head `keras_cosent.layers.SoftmaxClassifierHead`.

`get(name)` maps the names the CLI accepts to these classes.
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
from keras_cosent.losses.margin_ranking_loss import MarginRankingLoss
from keras_cosent.losses.margin_ranking_loss import margin_ranking_loss
from keras_cosent.losses.matryoshka_loss import MatryoshkaLoss
from keras_cosent.losses.matryoshka_loss import matryoshka_loss
from keras_cosent.losses.ntxent_loss import NTXentLoss
from keras_cosent.losses.ntxent_loss import ntxent_loss
from keras_cosent.losses.supcon_loss import SupConLoss
from keras_cosent.losses.supcon_loss import supcon_loss
from keras_cosent.losses.triplet_loss import TripletLoss
from keras_cosent.losses.triplet_loss import triplet_loss

_BY_NAME = {
    "cosent": CoSENTLoss,
    "infonce": InfoNCELoss,
    "simcse": InfoNCELoss,
    "angle": AnglELoss,
    "cosine-mse": CosineMSELoss,
    "sbert-softmax": SoftmaxLoss,
    "ntxent": NTXentLoss,
    "triplet": TripletLoss,
    "margin-ranking": MarginRankingLoss,
    "supcon": SupConLoss,
}

NAMES = tuple(_BY_NAME)


def get(name):
    """Returns the loss class registered under `name` (see `NAMES`).

    Example:

    >>> import keras_cosent
    >>> keras_cosent.losses.get("simcse")(temperature=0.05).temperature
    0.05
    """
    if not isinstance(name, str) or name.lower() not in _BY_NAME:
        raise ValueError(
            f"Unknown loss name {name!r}. Expected one of: {', '.join(NAMES)}."
        )
    return _BY_NAME[name.lower()]
