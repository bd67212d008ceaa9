"""The CLI's spelled-out choices match the library's, and MODEL resolution."""

import pytest

import keras_cosent
from recipes.errors import CliError
from recipes.model_loading import resolve_checkpoint
from recipes.model_loading import saved_encoder_path
from recipes.options import FORMATS
from recipes.options import MARGIN_FORMS
from recipes.options import OBJECTIVE
from recipes.options import POOLINGS
from recipes.options import TRIPLET_DISTANCES


def test_choices_match_the_library():
    assert FORMATS == keras_cosent.data.READ_FORMATS
    assert OBJECTIVE.choices == tuple(keras_cosent.training.OBJECTIVES)
    assert keras_cosent.losses.NAMES == tuple(keras_cosent.training.OBJECTIVES)
    assert set(POOLINGS) == set(keras_cosent.layers.POOLING_LAYERS)
    from keras_cosent.losses.triplet_loss import DISTANCES

    assert TRIPLET_DISTANCES == DISTANCES
    from keras_cosent.losses.margin_ranking_loss import FORMS

    assert MARGIN_FORMS == FORMS


def test_packaged_checkpoint_alias():
    assert resolve_checkpoint("all-MiniLM-L6-v2") == keras_cosent.models.default_checkpoint()


def test_directories_files_and_preset_names(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "encoder.keras").write_text("x")
    assert saved_encoder_path(tmp_path / "run") == tmp_path / "run" / "encoder.keras"
    saved = tmp_path / "run" / "encoder.keras"
    assert saved_encoder_path(saved) == saved
    assert saved_encoder_path(tmp_path) is None
    assert resolve_checkpoint(str(tmp_path)) == str(tmp_path)
    assert resolve_checkpoint("bert_tiny_en_uncased") == "bert_tiny_en_uncased"
    with pytest.raises(CliError, match="no such directory"):
        resolve_checkpoint(str(tmp_path / "missing"))
    # Named as the command names it: `train` has no MODEL.
    with pytest.raises(CliError, match=r"^--backbone '.*missing': no such directory"):
        resolve_checkpoint(str(tmp_path / "missing"), "--backbone")
    with pytest.raises(CliError, match="is a file"):
        resolve_checkpoint(str(tmp_path / "run" / "encoder.keras"))
