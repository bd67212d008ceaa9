"""The `>>>` examples in the loss and head docstrings run and print what they say."""

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module_name",
    [
        "keras_cosent.losses",
        "keras_cosent.losses.cosent_loss",
        "keras_cosent.losses.infonce_loss",
        "keras_cosent.losses.angle_loss",
        "keras_cosent.losses.cosine_mse_loss",
        "keras_cosent.losses.softmax_loss",
        "keras_cosent.losses.ntxent_loss",
        "keras_cosent.losses.triplet_loss",
        "keras_cosent.losses.margin_ranking_loss",
        "keras_cosent.losses.supcon_loss",
        "keras_cosent.losses.matryoshka_loss",
        "keras_cosent.losses.joint_loss",
        "keras_cosent.losses.multi_task_loss",
        "keras_cosent.utils.similarity",
        "keras_cosent.utils.truncation",
        "keras_cosent.data.beir",
        "keras_cosent.retrieval.search",
        "keras_cosent.retrieval.metrics",
        "keras_cosent.retrieval.mining",
        "keras_cosent.layers.softmax_classifier_head",
        "keras_cosent.export.sentence_transformers_export",
        "keras_cosent.models.checkpoints",
    ],
)
def test_examples_run(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, verbose=False)
    assert result.failed == 0
    if module_name != "keras_cosent.losses":
        assert result.attempted > 0
