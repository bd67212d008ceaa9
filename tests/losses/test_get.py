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


def test_the_docstring_names_every_objective_whose_arguments_get_leaves_out():
    # `get` returns the bare class; its docstring lists the objectives whose loss
    # `training.build` makes with further arguments, so that none is missed.
    from keras_cosent.training.objectives import OBJECTIVES

    with_arguments = {name for name, objective in OBJECTIVES.items()
                      if objective.loss_kwargs is not None}
    assert with_arguments == {"infonce", "simcse", "cosine-mse", "sbert-softmax",
                              "batch-hard-triplet"}
    for name in with_arguments:
        assert f"`{name}`" in keras_cosent.losses.get.__doc__
    built = OBJECTIVES["batch-hard-triplet"].make_loss({}, None)
    assert built.mining == "batch_hard" and isinstance(built, keras_cosent.losses.get(
        "batch-hard-triplet"))
