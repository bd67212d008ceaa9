"""Reading sentence-transformers folders: synthetic copies of the packaged config files."""

import json
import shutil

import pytest

from keras_cosent.models.sentence_transformers_config import pooling_from_config
from keras_cosent.models.sentence_transformers_config import read_sentence_transformers_config
from tests.backends import once_in

ST_FILES = ("modules.json", "sentence_bert_config.json", "1_Pooling/config.json")


def _st_folder(minilm_path, tmp_path, modules=None, pooling=None, bert=None):
    folder = tmp_path / "st"
    (folder / "1_Pooling").mkdir(parents=True)
    for name in ST_FILES:
        shutil.copy(minilm_path / name, folder / name)
    for name, edit in (("modules.json", modules), ("1_Pooling/config.json", pooling),
                       ("sentence_bert_config.json", bert)):
        if edit is not None:
            data = json.loads((folder / name).read_text())
            (folder / name).write_text(json.dumps(edit(data)))
    return folder


def test_packaged_folder_read_as_its_json_says(minilm_path):
    config = read_sentence_transformers_config(minilm_path)
    bert = json.loads((minilm_path / "sentence_bert_config.json").read_text())
    assert config["max_length"] == bert["max_seq_length"] == 256
    assert config["do_lower_case"] is bert["do_lower_case"]
    assert config["pooling"] == "mean"
    assert config["normalize"] is True


def test_not_a_sentence_transformers_folder(tmp_path):
    assert read_sentence_transformers_config(tmp_path) is None
    assert read_sentence_transformers_config("bert_tiny_en_uncased") is None


def test_dense_module_refused_by_name(minilm_path, tmp_path):
    dense = {"idx": 2, "name": "2", "path": "2_Dense",
             "type": "sentence_transformers.models.Dense"}
    folder = _st_folder(minilm_path, tmp_path, modules=lambda m: [m[0], m[1], dense])
    with pytest.raises(ValueError, match=r"'2_Dense'.*sentence_transformers\.models\.Dense"):
        read_sentence_transformers_config(folder)


def test_cls_pooling_read_and_normalize_optional(minilm_path, tmp_path):
    def cls(config):
        return dict(config, pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)

    folder = _st_folder(minilm_path, tmp_path, modules=lambda m: m[:2], pooling=cls)
    config = read_sentence_transformers_config(folder)
    assert config["pooling"] == "cls"
    assert config["normalize"] is False


@pytest.mark.parametrize(
    "flag, name",
    [("pooling_mode_max_tokens", "max"), ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"),
     ("pooling_mode_weightedmean_tokens", "weighted_mean")],
)
def test_pooling_flags_map_onto_our_names(flag, name):
    assert pooling_from_config({flag: True}) == name


def test_a_pooling_mode_list_of_one_is_that_mode_as_for_sentence_transformers():
    # ST reads ["mean"] as mean; it was refused with 'mean' among the modes expected.
    assert pooling_from_config({"pooling_mode": ["mean"]}) == "mean"
    assert pooling_from_config({"pooling_mode": ["weightedmean"]}) == "weighted_mean"
    assert pooling_from_config({"pooling_mode": "cls"}) == "cls"


@pytest.mark.parametrize(
    "config, message",
    [({"pooling_mode_lasttoken": True}, "last-token"),
     ({"pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True}, "combined"),
     ({}, "found none"),
     ({"pooling_mode": ["mean", "max"]}, r"names 2 modes \(combined"),
     ({"pooling_mode": []}, "names 0 modes"),
     ({"pooling_mode_mean_tokens": True, "include_prompt": False}, "include_prompt")],
)
def test_unsupported_pooling_refused(config, message):
    with pytest.raises(ValueError, match=message):
        pooling_from_config(config, "x/config.json")


# Reads the folder's settings, the same on every backend; it loads MiniLM three times.
@once_in("torch", "reading a checkpoint folder's settings")
def test_from_checkpoint_reads_folder_and_explicit_option_wins(minilm_path, tmp_path):
    from keras_cosent.models import SentenceEncoder

    def cls(config):
        return dict(config, pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)

    folder = _st_folder(minilm_path, tmp_path, pooling=cls,
                        bert=lambda c: dict(c, max_seq_length=200))
    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json",
                 "special_tokens_map.json", "tokenizer.json"):
        (folder / name).symlink_to(minilm_path / name)
    encoder = SentenceEncoder.from_checkpoint(folder)
    assert (encoder.pooling, encoder.max_length) == ("cls", 200)
    encoder = SentenceEncoder.from_checkpoint(folder, pooling="max", max_length=64)
    assert (encoder.pooling, encoder.max_length) == ("max", 64)
    # No sentence-transformers files: today's defaults.
    for name in ST_FILES:
        (folder / name).unlink()
    encoder = SentenceEncoder.from_checkpoint(folder)
    assert (encoder.pooling, encoder.max_length) == ("mean", 128)


def test_max_seq_length_beyond_positions_refused(minilm_path, tmp_path):
    from keras_cosent.models import SentenceEncoder

    folder = _st_folder(minilm_path, tmp_path, bert=lambda c: dict(c, max_seq_length=1024))
    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"):
        (folder / name).symlink_to(minilm_path / name)
    with pytest.raises(ValueError, match="max_position_embeddings 512"):
        SentenceEncoder.from_checkpoint(folder)


@pytest.mark.parametrize("value", [-1, 0, 12.5, "64", True])
def test_a_max_seq_length_that_is_no_length_is_named_with_its_file(minilm_path, tmp_path, value):
    # -1 was reported as `max_length`=-1, an argument the caller never gave.
    folder = _st_folder(minilm_path, tmp_path, bert=lambda c: dict(c, max_seq_length=value))
    with pytest.raises(ValueError, match=r"sentence_bert_config\.json: max_seq_length "
                                         r".* should be a positive integer"):
        read_sentence_transformers_config(folder)
    ok = _st_folder(minilm_path, tmp_path / "float", bert=lambda c: dict(c, max_seq_length=64.0))
    assert read_sentence_transformers_config(ok)["max_length"] == 64


def test_max_length_read_from_the_tokenizer_when_sentence_bert_config_has_none(
        minilm_path, tmp_path):
    # sentence-transformers 6 saves `max_seq_length` as the tokenizer's `model_max_length`.
    folder = _st_folder(minilm_path, tmp_path,
                        bert=lambda c: {k: v for k, v in c.items() if k != "max_seq_length"})
    assert read_sentence_transformers_config(folder)["max_length"] is None
    for value, expected in ((200, 200), (int(1e30), None), ("256", None), (True, None)):
        (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": value}))
        assert read_sentence_transformers_config(folder)["max_length"] == expected, value
    # An explicit max_seq_length still wins over the tokenizer's.
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 64}))
    assert read_sentence_transformers_config(folder)["max_length"] == 64
