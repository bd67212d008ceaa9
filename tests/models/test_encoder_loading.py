"""The one rule for which encoder a MODEL names (`keras_cosent.models.encoder_loading`)."""

import os

import pytest

import keras_cosent
from keras_cosent.models.encoder_loading import resolve_checkpoint
from keras_cosent.models.encoder_loading import saved_encoder_file


def test_keras_file_and_run_directory(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "encoder.keras").write_text("x")
    (run / "other.keras").write_text("x")
    assert saved_encoder_file(run) == str(run / "encoder.keras")
    assert saved_encoder_file(run / "other.keras") == str(run / "other.keras")
    single = tmp_path / "single"
    single.mkdir()
    (single / "model.keras").write_text("x")
    assert saved_encoder_file(single) == str(single / "model.keras")


def test_checkpoint_folders_and_names_are_not_saved_encoders(tmp_path, minilm_path):
    assert saved_encoder_file(minilm_path) is None
    assert saved_encoder_file("bert_tiny_en_uncased") is None
    assert resolve_checkpoint("all-MiniLM-L6-v2") == keras_cosent.models.default_checkpoint()
    assert resolve_checkpoint("bert_tiny_en_uncased") == "bert_tiny_en_uncased"
    assert resolve_checkpoint(tmp_path) == os.path.abspath(tmp_path)


def test_ambiguous_directory_and_stray_file_refused(tmp_path):
    (tmp_path / "a.keras").write_text("x")
    (tmp_path / "b.keras").write_text("x")
    with pytest.raises(ValueError, match=r"\['a.keras', 'b.keras'\]"):
        saved_encoder_file(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="notes.txt"):
        saved_encoder_file(tmp_path / "notes.txt")
    with pytest.raises(FileNotFoundError, match="missing"):
        resolve_checkpoint(str(tmp_path / "missing"))
