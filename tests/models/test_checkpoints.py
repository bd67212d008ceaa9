"""Reading checkpoint folders that keras-hub cannot read as they are: a vocabulary from tokenizer.json."""

import json

import pytest

from keras_cosent.models.checkpoints import vocabulary_from_tokenizer_json


def test_vocabulary_equals_the_vocab_txt_beside_it(minilm_path):
    # The packaged folder carries both files: vocab.txt is the reference.
    expected = (minilm_path / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert vocabulary_from_tokenizer_json(str(minilm_path / "tokenizer.json")) == expected
    assert len(expected) == 30522


def _wordpiece(vocab, added=()):
    return {"model": {"type": "WordPiece", "vocab": vocab},
            "added_tokens": [{"id": i, "content": c} for i, c in added]}


@pytest.mark.parametrize(
    "data,match",
    [
        ({"model": {"type": "BPE", "vocab": {"a": 0}}}, "tokenizer model 'BPE' is not supported"),
        (_wordpiece({"[PAD]": 0, "a": 2}), r"token 'a' has id 2; expected the 2 ids 0..1"),
        (_wordpiece({"[PAD]": 0, "a": 0}), "has id 0; expected the 2 ids 0..1, each once"),
        (_wordpiece({"[PAD]": 0, "a\nb": 1}), "holds a line break"),
        (_wordpiece({"[PAD]": 0, "a": 1}, added=[(2, "<new>")]),
         r"added token '<new>' \(id 2\) is not in the WordPiece vocabulary"),
    ],
)
def test_unreadable_vocabularies_refused_naming_the_file(tmp_path, data, match):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=match) as info:
        vocabulary_from_tokenizer_json(str(path))
    assert str(path) in str(info.value)


def test_added_tokens_inside_the_vocabulary_are_read(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(_wordpiece({"[PAD]": 0, "a": 1}, added=[(0, "[PAD]")])))
    assert vocabulary_from_tokenizer_json(str(path)) == ["[PAD]", "a"]


@pytest.mark.parametrize("name, text, match", [
    ("config.json", "{not json", r"config\.json: line 1: not valid JSON"),
    ("tokenizer_config.json", "[1, 2]", r"tokenizer_config\.json: expected a JSON object, "
                                        r"found \[1, 2\]"),
    ("1_Pooling/config.json", "[]", r"1_Pooling/config\.json: expected a JSON object"),
    ("modules.json", "{}", r"modules\.json: expected a JSON list, found \{\}"),
])
def test_a_malformed_json_file_of_a_checkpoint_is_named(tmp_path, minilm_path, name, text,
                                                        match):
    import shutil

    from keras_cosent.models import SentenceEncoder

    folder = tmp_path / "ckpt"
    shutil.copytree(minilm_path, folder, ignore=shutil.ignore_patterns("model.safetensors"))
    (folder / "model.safetensors").symlink_to(minilm_path / "model.safetensors")
    (folder / name).write_text(text)
    with pytest.raises(ValueError, match=match):
        SentenceEncoder.from_checkpoint(str(folder))


def test_unreadable_pytorch_weights_are_named_and_leave_no_temporary_folder(
        tmp_path, monkeypatch):
    import glob
    import tempfile

    from keras_cosent.models import SentenceEncoder
    from tests.models.conftest import write_tiny_hf_checkpoint

    folder = tmp_path / "ckpt"
    write_tiny_hf_checkpoint(folder, weights="bin")
    (folder / "pytorch_model.bin").write_bytes(b"not a torch file")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with pytest.raises(ValueError, match=r"pytorch_model\.bin: cannot be read as PyTorch "
                                         "weights"):
        SentenceEncoder.from_checkpoint(str(folder))
    assert glob.glob(str(scratch / "keras_cosent_checkpoint_*")) == []


def test_a_config_key_the_converter_needs_is_named_with_its_file(tmp_path, minilm_path):
    import shutil

    from keras_cosent.models import SentenceEncoder

    folder = tmp_path / "ckpt"
    shutil.copytree(minilm_path, folder, ignore=shutil.ignore_patterns("model.safetensors"))
    (folder / "model.safetensors").symlink_to(minilm_path / "model.safetensors")
    config = json.loads((folder / "config.json").read_text())
    del config["hidden_size"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"config\.json: no 'hidden_size', which keras-hub "
                                         "needs to build the 'bert' backbone"):
        SentenceEncoder.from_checkpoint(str(folder))


@pytest.mark.parametrize("name, hint", [("config.json", ""),
                                        ("encoder.keras", "keras.saving.load_model")])
def test_a_file_given_for_the_checkpoint_folder_is_named(tmp_path, name, hint):
    # keras-hub said the "preset" .../config.json had no config.json.
    from keras_cosent.models import SentenceEncoder

    path = tmp_path / name
    path.write_text("{}")
    with pytest.raises(ValueError, match=r"is a file; give the checkpoint's folder") as error:
        SentenceEncoder.from_checkpoint(str(path))
    assert hint in str(error.value)


def test_a_train_output_folder_is_named_and_load_encoder_reads_it(tmp_path, tiny_encoder):
    # keras-hub read the run's config.json as a checkpoint's: "Unrecognized format
    # for config.json", followed by the whole run configuration.
    import json

    import numpy as np

    from keras_cosent.models import SentenceEncoder
    from keras_cosent.models import load_encoder

    tiny_encoder.save(str(tmp_path / "encoder.keras"))
    (tmp_path / "config.json").write_text(json.dumps({"command": "keras-cosent train",
                                                      "config": {"loss": "cosent"}}))
    with pytest.raises(ValueError, match=r"holds a saved encoder \(encoder.keras: a `keras-cosent "
                       r"train` output\), not a checkpoint; load it with "
                       r"keras_cosent.models.load_encoder\("):
        SentenceEncoder.from_checkpoint(str(tmp_path))
    sentences = ["a cat sat", "the dog barked"]
    np.testing.assert_allclose(load_encoder(str(tmp_path)).encode(sentences),
                               tiny_encoder.encode(sentences), atol=1e-6)


@pytest.mark.parametrize("weights, damage", [
    ("safetensors", "garbage"), ("safetensors", "truncated"), ("sharded", "truncated")])
def test_unreadable_safetensors_weights_are_named(tmp_path, weights, damage):
    # safetensors' own error ("header too large") named no file, on a shard neither.
    import os
    import re

    from keras_cosent.models import SentenceEncoder
    from tests.models.conftest import write_tiny_hf_checkpoint

    folder = tmp_path / "ckpt"
    write_tiny_hf_checkpoint(folder, weights=weights)
    target = sorted(folder.glob("*.safetensors"))[-1]
    if damage == "garbage":
        target.write_bytes(b"\xff" * 64)
    else:
        os.truncate(target, target.stat().st_size // 2)
    with pytest.raises(ValueError, match=re.escape(f"{target}: cannot be read as safetensors "
                                                   "weights")):
        SentenceEncoder.from_checkpoint(str(folder))


def test_a_vocabulary_keras_hub_refuses_is_named(tmp_path):
    import re

    from keras_cosent.models import SentenceEncoder
    from tests.models.conftest import write_tiny_hf_checkpoint

    folder = tmp_path / "ckpt"
    write_tiny_hf_checkpoint(folder)
    (folder / "vocab.txt").write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"{folder / 'vocab.txt'}: ") + r".*\[UNK\]"):
        SentenceEncoder.from_checkpoint(str(folder))
