"""`keras_cosent.losses.get`: the names the CLI accepts."""

import pytest

import keras_cosent
from keras_cosent import losses


@pytest.mark.parametrize(
    "name, cls",
    [
        ("cosent", losses.CoSENTLoss),
        ("infonce", losses.InfoNCELoss),
        ("simcse", losses.InfoNCELoss),
        ("angle", losses.AnglELoss),
        ("cosine-mse", losses.CosineMSELoss),
        ("sbert-softmax", losses.SoftmaxLoss),
        ("CoSENT", losses.CoSENTLoss),
    ],
)
def test_names_map_to_classes(name, cls):
    assert keras_cosent.losses.get(name) is cls


@pytest.mark.parametrize("name", ["mse", "", None])
def test_unknown_name_lists_the_choices(name):
    with pytest.raises(ValueError, match=f"Unknown loss name {name!r}.*cosent, infonce"):
        keras_cosent.losses.get(name)
