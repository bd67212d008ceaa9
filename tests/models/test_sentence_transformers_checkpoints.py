"""Sentence-transformers folders are encoded with their own settings.

The reference is sentence-transformers itself, run on the packaged
all-MiniLM-L6-v2 (its `sentence_bert_config.json` says 256 tokens, its Pooling
module mean, then Normalize), on sentences from a few tokens to past 256.
"""

import json
import os
import shutil

import numpy as np
import pytest

from keras_cosent.models import SentenceEncoder
from keras_cosent.models.checkpoints import sentence_transformers_settings

_WORDS = ("the committee reviewed an unusually detailed proposal about regional rail "
          "timetables , ticket prices and accessibility improvements for older stations").split()


def _sentence(words):
    return " ".join(_WORDS[i % len(_WORDS)] for i in range(words)).capitalize() + "."


# From a handful of tokens to past the checkpoint's 256 (truncated alike by both).
SENTENCES = [_sentence(n) for n in (4, 30, 120, 150, 232, 320)]


@pytest.fixture(scope="module")
def peer_embeddings(minilm_path):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(minilm_path), device="cpu")
    assert model.max_seq_length == 256
    lengths = [len(ids) for ids in model.tokenizer(SENTENCES)["input_ids"]]
    # The spread the check needs: around 162 tokens, near 256, and past it.
    assert min(lengths) < 16 and any(150 <= n <= 200 for n in lengths)
    assert any(240 <= n <= 256 for n in lengths) and max(lengths) > 300
    return model.encode(SENTENCES, normalize_embeddings=True)


@pytest.fixture(scope="module")
def encoder(minilm_path):
    return SentenceEncoder.from_checkpoint(str(minilm_path))


def test_packaged_folder_settings(minilm_path):
    assert sentence_transformers_settings(str(minilm_path)) == {
        "max_length": 256, "pooling": "mean", "normalize": True}


def test_no_options_take_the_checkpoints_settings(encoder):
    assert encoder.max_length == 256 and encoder.pooling == "mean"


@pytest.mark.parametrize("packing", [True, False])
def test_encodes_as_sentence_transformers_up_to_its_maximum(encoder, peer_embeddings, packing):
    ours = encoder.encode(SENTENCES, packing=packing)
    np.testing.assert_allclose(ours, peer_embeddings, atol=1e-4)


def test_an_explicit_max_length_still_wins(minilm_path, peer_embeddings):
    short = SentenceEncoder.from_checkpoint(str(minilm_path), max_length=128)
    assert short.max_length == 128
    ours = short.encode(SENTENCES[:2] + SENTENCES[4:5])
    # Sentences under 128 tokens agree; the ~250-token one is cut at 128 and does not.
    np.testing.assert_allclose(ours[:2], peer_embeddings[:2], atol=1e-4)
    assert np.abs(ours[2] - peer_embeddings[4]).max() > 1e-3


def test_the_cli_model_loader_takes_the_checkpoints_settings():
    from recipes.model_loading import load_encoder

    encoder = load_encoder("all-MiniLM-L6-v2")
    assert encoder.max_length == 256 and encoder.pooling == "mean"
    assert load_encoder("all-MiniLM-L6-v2", pooling="cls", max_length=64).max_length == 64


def _copy_settings(minilm_path, tmp_path):
    """The packaged folder's JSON files in a new folder (weights linked), to edit."""
    folder = tmp_path / "ckpt"
    shutil.copytree(minilm_path, folder, ignore=shutil.ignore_patterns("model.safetensors"))
    os.symlink(os.path.join(minilm_path, "model.safetensors"), folder / "model.safetensors")
    return folder


def _edit_json(path, **changes):
    data = json.loads(path.read_text())
    if isinstance(data, dict):
        data.update(changes)
    path.write_text(json.dumps(data))
    return data


def test_cls_pooling_is_read_and_an_explicit_pooling_wins(minilm_path, tmp_path):
    folder = _copy_settings(minilm_path, tmp_path)
    _edit_json(folder / "1_Pooling" / "config.json", pooling_mode_mean_tokens=False,
               pooling_mode_cls_token=True)
    _edit_json(folder / "sentence_bert_config.json", max_seq_length=96)
    assert sentence_transformers_settings(str(folder)) == {
        "max_length": 96, "pooling": "cls", "normalize": True}
    encoder = SentenceEncoder.from_checkpoint(str(folder))
    assert (encoder.pooling, encoder.max_length) == ("cls", 96)
    explicit = SentenceEncoder.from_checkpoint(str(folder), pooling="max", max_length=40)
    assert (explicit.pooling, explicit.max_length) == ("max", 40)


def test_a_dense_module_is_refused_by_name(minilm_path, tmp_path):
    folder = _copy_settings(minilm_path, tmp_path)
    modules = json.loads((folder / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense",
                       "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ValueError, match=r"sentence_transformers\.models\.Dense.*2_Dense"):
        SentenceEncoder.from_checkpoint(str(folder))


@pytest.mark.parametrize("flags, fragment", [
    ({"pooling_mode_mean_tokens": False, "pooling_mode_lasttoken": True}, "lasttoken"),
    ({"pooling_mode_max_tokens": True}, "pooling_mode_max_tokens"),
    ({"include_prompt": False}, "include_prompt"),
])
def test_unsupported_pooling_is_refused_by_name(minilm_path, tmp_path, flags, fragment):
    folder = _copy_settings(minilm_path, tmp_path)
    _edit_json(folder / "1_Pooling" / "config.json", **flags)
    with pytest.raises(ValueError, match=fragment):
        sentence_transformers_settings(str(folder))


def test_a_folder_without_modules_json_keeps_the_defaults(minilm_path, tmp_path):
    folder = _copy_settings(minilm_path, tmp_path)
    os.remove(folder / "modules.json")
    assert sentence_transformers_settings(str(folder)) is None
    encoder = SentenceEncoder.from_checkpoint(str(folder))
    assert (encoder.pooling, encoder.max_length) == ("mean", 128)
