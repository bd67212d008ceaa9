"""The packaged all-MiniLM-L6-v2 against Hugging Face `transformers` and sentence-transformers.

The references run in torch on CPU, independently of the Keras backend under
test. They check keras-hub's conversion plus our fixes: exact GELU, accent
stripping and Hugging Face's lowercasing (full-width text, `HFBertTokenizer`).
"""

import keras
import numpy as np
import pytest

from keras_cosent.models import SentenceEncoder
from keras_cosent.models import checkpoints

SENTENCES = [
    "A man is playing a guitar.",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG!",
    "Café crème, naïve façade, São Paulo and Zürich.",
    "",
    "tokenization of unusual words: antidisestablishmentarianism, 3.14159, e-mail@example.com",
    "中文句子也可以编码。",
    "全角标点，ＦＵＬＬ　ｗｉｄｔｈ！",
    "Short.",
    " ".join(["A very long sentence that keeps going"] * 30),  # > 128 tokens: truncated
]
MAX_LENGTH = 128
TOL = 1e-4


@pytest.fixture(scope="module")
def encoder(minilm_path):
    return SentenceEncoder.from_checkpoint(minilm_path, pooling="mean", max_length=MAX_LENGTH)


@pytest.fixture(scope="module")
def hf_reference(minilm_path):
    import torch
    import transformers
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_path))
    model = transformers.BertModel.from_pretrained(str(minilm_path)).eval()
    batch = tokenizer(
        SENTENCES, padding=True, truncation=True, max_length=MAX_LENGTH, return_tensors="pt"
    )
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state.numpy().astype("float64")
    mask = batch["attention_mask"].numpy().astype("float64")
    # Manual mean pooling and L2 normalisation, as sentence-transformers does.
    pooled = (hidden * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
    embeddings = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return {
        "input_ids": batch["input_ids"].numpy(),
        "mask": mask.astype(bool),
        "hidden": hidden,
        "embeddings": embeddings,
    }


def _hidden_states(encoder, ref):
    x = {
        "token_ids": ref["input_ids"].astype("int32"),
        "padding_mask": ref["mask"],
        "segment_ids": np.zeros_like(ref["input_ids"], dtype="int32"),
    }
    # Compiled forward: eager jax would compile each op for each new shape.
    out = encoder.backbone.predict_on_batch(x)["sequence_output"]
    return keras.ops.convert_to_numpy(out)


def test_token_ids_match_hugging_face(encoder, hf_reference):
    ours = encoder.tokenize(SENTENCES)
    for row, ids in enumerate(ours):
        expected = hf_reference["input_ids"][row][hf_reference["mask"][row]]
        np.testing.assert_array_equal(ids, expected, err_msg=repr(SENTENCES[row]))
    assert len(ours[-1]) == MAX_LENGTH and ours[-1][-1] == 102


def test_hidden_states_match_transformers(encoder, hf_reference):
    ours = _hidden_states(encoder, hf_reference)
    mask = hf_reference["mask"]
    diff = np.abs(ours - hf_reference["hidden"])[mask].max()
    print(f"[{keras.backend.backend()}] max |hidden - transformers| = {diff:.2e}")
    assert diff <= TOL


def test_embeddings_match_transformers_mean_pooling(encoder, hf_reference):
    ours = encoder.encode(SENTENCES, batch_size=3)
    diff = np.abs(ours - hf_reference["embeddings"]).max()
    print(f"[{keras.backend.backend()}] max |embedding - transformers| = {diff:.2e}")
    assert ours.dtype == np.float32 and ours.shape == (len(SENTENCES), 384)
    assert diff <= TOL


def test_embeddings_match_sentence_transformers(encoder, minilm_path):
    import sentence_transformers as st
    model = st.SentenceTransformer(str(minilm_path), device="cpu")
    model.max_seq_length = MAX_LENGTH
    expected = model.encode(SENTENCES, batch_size=4, convert_to_numpy=True)
    ours = encoder.encode(SENTENCES)
    diff = np.abs(ours - expected).max()
    print(f"[{keras.backend.backend()}] max |embedding - sentence-transformers| = {diff:.2e}")
    assert diff <= TOL


def test_without_exact_gelu_the_difference_is_larger(encoder, hf_reference):
    # Proves the parity tests can fail: keras-hub's own tanh GELU misses 1e-4.
    layers = checkpoints.transformer_encoder_layers(encoder.backbone)
    approximate = keras.activations.get("gelu")

    def tanh_gelu(x):
        return approximate(x, approximate=True)

    try:
        for layer in layers:
            layer._feedforward_intermediate_dense.activation = tanh_gelu
        # a fresh compiled predict function sees the swapped activation
        encoder.backbone.predict_function = None
        diff = np.abs(_hidden_states(encoder, hf_reference) - hf_reference["hidden"])
        diff = diff[hf_reference["mask"]].max()
    finally:
        checkpoints.set_exact_gelu(encoder.backbone)
        encoder.backbone.predict_function = None
    print(f"[{keras.backend.backend()}] max |hidden - transformers| with tanh GELU = {diff:.2e}")
    assert diff > 10 * TOL
    # and the fix is back
    assert np.abs(_hidden_states(encoder, hf_reference) - hf_reference["hidden"])[
        hf_reference["mask"]
    ].max() <= TOL


def test_from_checkpoint_reads_exact_gelu_and_accents(encoder):
    assert encoder.exact_gelu is True
    # Lowercasing as transformers does (HFBertTokenizer), keras-hub's own off.
    assert encoder.tokenizer.hf_lowercase is True and encoder.tokenizer.lowercase is False
    assert encoder.tokenizer.strip_accents is True
    assert encoder.pooling == "mean" and encoder.max_length == MAX_LENGTH and encoder.pad_id == 0


def test_save_and_reload_keeps_exact_gelu_and_embeddings(encoder, tmp_path):
    path = tmp_path / "minilm.keras"
    encoder.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, SentenceEncoder) and restored.exact_gelu
    for layer in checkpoints.transformer_encoder_layers(restored.backbone):
        assert layer._feedforward_intermediate_dense.activation is keras.activations.gelu
    assert restored.tokenizer.strip_accents is True and restored.tokenizer.hf_lowercase
    # identical up to float32 rounding (TensorFlow's graph may fuse ops differently)
    np.testing.assert_allclose(restored.encode(SENTENCES), encoder.encode(SENTENCES), atol=1e-6)
