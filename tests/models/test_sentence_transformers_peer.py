"""The packaged all-MiniLM-L6-v2 read with its own settings, against sentence-transformers.

`SentenceEncoder.from_checkpoint` with no `pooling`/`max_length` reads the
folder's `sentence_bert_config.json` (`max_seq_length` 256) and
`1_Pooling/config.json`; sentence-transformers (torch, CPU) is the reference,
at token lengths spread up to 256 and beyond (where both truncate).
"""

import json

import numpy as np
import pytest

from keras_cosent.models import SentenceEncoder
from keras_cosent.models import load_encoder

TEXT = (
    "The committee met on Tuesday to review the quarterly report, which showed that revenue "
    "from the northern region had grown by twelve percent while costs in logistics, "
    "marketing and customer support stayed flat. Several members asked whether the growth "
    "could last through winter, when shipping delays usually increase and demand for "
    "outdoor equipment falls sharply; the finance director answered that contracts signed "
    "in August already covered most of the expected orders. Café owners in Zürich, naïve "
    "investors and seasoned analysts alike followed the discussion closely. "
)
WORD_COUNTS = (3, 12, 40, 90, 118, 147, 185, 215, 229, 232, 280)
TOL = 1e-4


def _sentences():
    words = (TEXT * 4).split()
    return [" ".join(words[i: i + n]) for i, n in enumerate(WORD_COUNTS)]


@pytest.fixture(scope="module")
def peer(minilm_path):
    import sentence_transformers as st
    model = st.SentenceTransformer(str(minilm_path), device="cpu")
    sentences = _sentences()
    lengths = [len(model.tokenizer(s)["input_ids"]) for s in sentences]
    return {
        "sentences": sentences,
        "lengths": lengths,
        "max_seq_length": model.max_seq_length,
        "embeddings": model.encode(sentences, batch_size=4, convert_to_numpy=True),
    }


@pytest.fixture(scope="module")
def encoder(minilm_path):
    return SentenceEncoder.from_checkpoint(minilm_path)


def test_lengths_cover_the_range(peer):
    lengths = peer["lengths"]
    assert peer["max_seq_length"] == 256
    assert min(lengths) < 16 and max(lengths) > 256
    assert any(150 <= n <= 175 for n in lengths)  # the issue's ~162-token case
    assert any(240 <= n <= 256 for n in lengths)


def test_reads_the_checkpoint_settings(encoder, peer):
    assert encoder.max_length == peer["max_seq_length"]
    assert encoder.pooling == "mean"
    tokens = encoder.tokenize(peer["sentences"])
    assert [len(t) for t in tokens] == [min(n, 256) for n in peer["lengths"]]


@pytest.mark.parametrize("packing", [None, False])
def test_encode_matches_sentence_transformers(encoder, peer, packing):
    ours = encoder.encode(peer["sentences"], batch_size=4, packing=packing)
    np.testing.assert_allclose(ours, peer["embeddings"], atol=TOL, rtol=0)


def test_cli_loader_passes_none(minilm_path):
    from recipes.model_loading import load_encoder as cli_load_encoder

    assert cli_load_encoder("all-MiniLM-L6-v2").max_length == 256
    assert load_encoder(str(minilm_path), max_length=64).max_length == 64


def test_folder_saved_by_sentence_transformers_reads_as_the_peer_reads_it(minilm_path, tmp_path):
    # sentence-transformers 6 saves the tokenizer as tokenizer.json only (no vocab.txt,
    # which keras-hub reads) and the length limit on the tokenizer, not in
    # sentence_bert_config.json: a model fine-tuned with the peer is saved like this.
    import sentence_transformers as st
    st.SentenceTransformer(str(minilm_path), device="cpu").save(str(tmp_path))
    assert not (tmp_path / "vocab.txt").exists()
    assert "max_seq_length" not in json.loads((tmp_path / "sentence_bert_config.json").read_text())
    saved = st.SentenceTransformer(str(tmp_path), device="cpu")
    sentences = _sentences()[:6] + ["Ｆｕｌｌ-width，text in a café", "飞机正在起飞。"]
    ours = load_encoder(str(tmp_path))
    assert (ours.max_length, ours.pooling) == (saved.max_seq_length, "mean") == (256, "mean")
    np.testing.assert_allclose(
        ours.encode(sentences, batch_size=4), saved.encode(sentences, batch_size=4),
        atol=TOL, rtol=0)


def test_folder_with_the_transformer_in_a_subfolder_reads_as_the_peer_reads_it(
        minilm_path, tmp_path):
    # Older sentence-transformers saves put the Hugging Face files in
    # `0_Transformer/` (modules.json names the path): the settings were read
    # there but the weights and tokenizer looked for in the root, "no config.json".
    import sentence_transformers as st
    folder = tmp_path / "st"
    (folder / "0_Transformer").mkdir(parents=True)
    for entry in minilm_path.iterdir():
        module_level = entry.name in ("modules.json", "config_sentence_transformers.json",
                                      "README.md") or entry.is_dir()
        target = folder / entry.name if module_level else folder / "0_Transformer" / entry.name
        target.symlink_to(entry.absolute(), target_is_directory=entry.is_dir())
    modules = json.loads((minilm_path / "modules.json").read_text())
    modules[0]["path"] = "0_Transformer"
    (folder / "modules.json").unlink()
    (folder / "modules.json").write_text(json.dumps(modules))
    sentences = _sentences()[:4]
    peer = st.SentenceTransformer(str(folder), device="cpu")
    ours = load_encoder(str(folder))
    assert (ours.max_length, ours.pooling) == (peer.max_seq_length, "mean") == (256, "mean")
    np.testing.assert_allclose(ours.encode(sentences, batch_size=4),
                               peer.encode(sentences, batch_size=4), atol=TOL, rtol=0)


def test_a_folders_default_prompt_is_warned_of_and_prepending_it_gives_the_peers_vectors(
        minilm_path, tmp_path):
    # sentence-transformers prepends the default prompt on encode; keras-cosent encoded
    # the bare texts, cosine 0.86-0.97 to the peer's, and said nothing (probe).
    import sentence_transformers as st
    folder = tmp_path / "prompted"
    folder.mkdir()
    for entry in minilm_path.iterdir():
        if entry.name != "config_sentence_transformers.json":
            (folder / entry.name).symlink_to(entry.absolute(), target_is_directory=entry.is_dir())
    config = json.loads((minilm_path / "config_sentence_transformers.json").read_text())
    config.update(prompts={"query": "query: ", "doc": "passage: "}, default_prompt_name="query")
    (folder / "config_sentence_transformers.json").write_text(json.dumps(config))
    with pytest.warns(UserWarning, match=r"default_prompt_name 'query': sentence-transformers "
                                         r"prepends 'query: ' to every text it encodes"):
        ours = load_encoder(str(folder))
    sentences = _sentences()[:4]
    peer = st.SentenceTransformer(str(folder), device="cpu").encode(sentences, batch_size=4)
    assert np.min(np.sum(ours.encode(sentences) * peer, axis=1)) < 0.99
    np.testing.assert_allclose(ours.encode(["query: " + s for s in sentences]), peer,
                               atol=TOL, rtol=0)
    # Without a default prompt (the packaged folder's null), nothing to warn of.
    config["default_prompt_name"] = None
    (folder / "config_sentence_transformers.json").write_text(json.dumps(config))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        load_encoder(str(folder))
