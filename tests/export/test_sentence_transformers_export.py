"""`export_sentence_transformers`: sentence-transformers and transformers load the folder, and
embed as the encoder does; refusals leave nothing written."""

import json
import os

import numpy as np
import pytest

from keras_cosent.export import export_sentence_transformers
from keras_cosent.models import SentenceEncoder
from keras_cosent.models import load_encoder
from tests.backends import once_in
from tests.export.conftest import SENTENCES


def _trained(encoder, seed=1):
    """Moves every backbone weight, as training would: the export must carry these."""
    import keras

    rng = np.random.default_rng(seed)
    for variable in encoder.backbone.weights:
        value = keras.ops.convert_to_numpy(variable)
        variable.assign(value + rng.normal(0.0, 0.05, value.shape).astype("float32"))
    return encoder


def _peer(folder):
    import sentence_transformers as st
    import transformers
    # transformers' own loader: every BertModel weight present, none left over.
    _, info = transformers.BertModel.from_pretrained(folder, output_loading_info=True)
    assert not any(info[key] for key in ("missing_keys", "unexpected_keys", "mismatched_keys"))
    return st.SentenceTransformer(folder, device="cpu")


@pytest.mark.parametrize("pooling,exact_gelu", [
    ("mean", True), ("cls", False), ("max", True), ("mean_sqrt_len", False),
    ("weighted_mean", True),
])
def test_the_peer_embeds_the_folder_as_the_encoder_does(tiny_checkpoint, tmp_path, pooling,
                                                        exact_gelu):
    encoder = _trained(SentenceEncoder.from_checkpoint(
        tiny_checkpoint, pooling=pooling, max_length=24, exact_gelu=exact_gelu))
    folder = export_sentence_transformers(encoder, tmp_path / "st")
    config = json.loads(open(os.path.join(folder, "config.json")).read())
    assert config["hidden_act"] == ("gelu" if exact_gelu else "gelu_new")
    peer = _peer(folder)
    assert peer.max_seq_length == 24
    ours = encoder.encode(SENTENCES)
    np.testing.assert_allclose(peer.encode(SENTENCES), ours, atol=1e-5, rtol=0)
    # The moved weights matter: the checkpoint as read embeds visibly differently.
    untouched = SentenceEncoder.from_checkpoint(tiny_checkpoint, pooling=pooling, max_length=24,
                                                exact_gelu=exact_gelu)
    assert np.abs(untouched.encode(SENTENCES) - ours).max() > 1e-2


def test_truncate_dim_is_the_peers_setting_with_the_same_directions(tiny_checkpoint, tmp_path):
    encoder = _trained(SentenceEncoder.from_checkpoint(tiny_checkpoint, max_length=24))
    with pytest.raises(ValueError, match="at most the embedding dimension 8"):
        export_sentence_transformers(encoder, tmp_path / "st", truncate_dim=9)
    folder = export_sentence_transformers(encoder, tmp_path / "st", truncate_dim=4)
    theirs = _peer(folder).encode(SENTENCES)
    assert theirs.shape == (len(SENTENCES), 4)
    # The peer cuts the unit-length embedding and does not re-normalise: same directions.
    theirs = theirs / np.linalg.norm(theirs, axis=1, keepdims=True)
    np.testing.assert_allclose(theirs, encoder.encode(SENTENCES, truncate_dim=4),
                               atol=1e-5, rtol=0)


@once_in("torch", "a 6-layer round trip through the peer (weight reading is tested per backend "
         "on the tiny checkpoint)")
def test_minilm_round_trip_through_the_peer_and_back(minilm_path, tmp_path):
    encoder = _trained(SentenceEncoder.from_checkpoint(minilm_path), seed=2)
    folder = export_sentence_transformers(encoder, tmp_path / "st")
    peer = _peer(folder)
    sentences = SENTENCES + ["Ｆｕｌｌ-width，text in a café", "飞机正在起飞。", "word " * 300]
    ours = encoder.encode(sentences, batch_size=4)
    assert peer.max_seq_length == encoder.max_length == 256
    np.testing.assert_allclose(peer.encode(sentences, batch_size=4), ours, atol=1e-5, rtol=0)
    again = load_encoder(folder)
    assert (again.pooling, again.max_length, again.exact_gelu) == ("mean", 256, True)
    np.testing.assert_allclose(again.encode(sentences, batch_size=4), ours, atol=1e-6, rtol=0)


def test_refusals_name_the_problem_and_write_nothing(tiny_checkpoint, tmp_path, monkeypatch):
    encoder = SentenceEncoder.from_checkpoint(tiny_checkpoint, pooling="first_last_avg",
                                              max_length=16)
    with pytest.raises(ValueError, match="pooling='first_last_avg' has no sentence-transformers"):
        export_sentence_transformers(encoder, tmp_path / "st")
    assert os.listdir(tmp_path) == []

    import keras_hub

    roberta = SentenceEncoder(
        keras_hub.models.RobertaBackbone(vocabulary_size=16, num_layers=1, num_heads=2,
                                         hidden_dim=8, intermediate_dim=16,
                                         max_sequence_length=16), None, max_length=16)
    with pytest.raises(ValueError, match="Only BERT encoders .* backbone is `RobertaBackbone`"):
        export_sentence_transformers(roberta, tmp_path / "st")
    assert os.listdir(tmp_path) == []

    encoder = SentenceEncoder.from_checkpoint(tiny_checkpoint, max_length=16)
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="pass `overwrite=True`"):
        export_sentence_transformers(encoder, occupied)
    assert os.listdir(occupied) == ["keep.txt"]

    # A failure while writing leaves neither the folder nor a staging directory.
    import safetensors.numpy

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(safetensors.numpy, "save_file", fail)
    with pytest.raises(OSError, match="disk full"):
        export_sentence_transformers(encoder, occupied, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["occupied"]
    assert os.listdir(occupied) == ["keep.txt"]
    monkeypatch.undo()

    folder = export_sentence_transformers(encoder, occupied, overwrite=True)
    assert "keep.txt" not in os.listdir(folder) and "model.safetensors" in os.listdir(folder)
    assert sorted(os.listdir(tmp_path)) == ["occupied"]


def test_a_keras_hub_tokenizer_is_written_with_a_warning(tmp_path):
    # keras-hub's BertTokenizer splits "ma\x00n" where transformers' drops the NUL (and
    # cleans spaces, zero-width characters and case otherwise): the folder is written,
    # and the export says that such text embeds otherwise there. An encoder read from a
    # Hugging Face checkpoint (HFBertTokenizer) exports without a word.
    import keras_hub

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "man", "ma", "##n"]
    encoder = SentenceEncoder(
        keras_hub.models.BertBackbone(vocabulary_size=len(vocab), num_layers=1, num_heads=2,
                                      hidden_dim=8, intermediate_dim=16, max_sequence_length=16),
        keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=True), max_length=16)
    with pytest.warns(UserWarning, match="keras-hub's BertTokenizer.*other token ids"):
        folder = export_sentence_transformers(encoder, tmp_path / "st")
    assert "model.safetensors" in os.listdir(folder)
    peer_ids = _peer(folder).tokenizer("the ma\x00n")["input_ids"]
    assert [int(t) for t in encoder.tokenize(["the ma\x00n"])[0]] != peer_ids


def test_an_hf_tokenizer_exports_without_a_warning(tiny_checkpoint, tmp_path):
    import warnings

    encoder = SentenceEncoder.from_checkpoint(tiny_checkpoint, max_length=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        export_sentence_transformers(encoder, tmp_path / "st")
