"""The packaged all-MiniLM-L6-v2, exported and served, against sentence-transformers.

End to end on a real checkpoint: `SentenceEncoder.from_checkpoint` on the
current backend, export, then the Keras-free TF1 session serves the sentences
(tokenised in the graph with TensorFlow Text) and the token ids. The served
embeddings must match the Keras encoder to 1e-5 and sentence-transformers (the
reference implementation of this checkpoint, run on PyTorch) to 1e-4.
"""

import os

import numpy as np
import pytest

import keras_cosent
import keras_cosent.export
from tests.export.conftest import run_tf1_session
from tests.models.test_sentence_transformers_peer import _sentences

SENTENCES = [
    "A man is playing a guitar.",
    "A woman is slicing an onion in the kitchen.",
    "Café au lait in Zürich, naïvely priced at 4.50 CHF!",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG",
    "Stocks rallied on Tuesday after the central bank held rates steady.",
    # 162, 252, 256 and 308 tokens: the checkpoint's max_seq_length is 256.
    *[_sentences()[i] for i in (5, 8, 9, 10)],
]


def test_packaged_minilm_exports_at_its_max_seq_length(minilm_path):
    from keras_cosent.export.serving_graph import resolve_max_length
    from keras_cosent.models import load_encoder

    # No explicit max_length: the checkpoint's sentence_bert_config.json (256).
    assert resolve_max_length(load_encoder("all-MiniLM-L6-v2")) == 256


@pytest.mark.slow
def test_packaged_minilm_serves_like_sentence_transformers(minilm_path, tmp_path):
    # Read with the checkpoint's own settings (mean pooling, 256 tokens).
    encoder = keras_cosent.models.SentenceEncoder.from_checkpoint(str(minilm_path))
    assert encoder.max_length == 256
    export_dir = keras_cosent.export.export_saved_model(encoder, str(tmp_path / "minilm"))
    tokens = encoder.preprocess(SENTENCES)
    out = run_tf1_session(
        [
            {"model": export_dir, "signature": "serving_default",
             "inputs": {"sentences": SENTENCES}},
            {"model": export_dir, "signature": "encode_tokens",
             "inputs": {"token_ids": tokens["token_ids"].tolist(),
                        "padding_mask": tokens["padding_mask"].astype("int32").tolist(),
                        "segment_ids": tokens["segment_ids"].tolist()}},
        ],  # fmt: skip
        str(tmp_path),
    )
    assert out["keras_in_sys_modules"] is False
    served = np.asarray(out["results"][0]["embeddings"])
    served_tokens = np.asarray(out["results"][1]["embeddings"])
    assert served.shape == (len(SENTENCES), 384)

    keras_embeddings = encoder.encode(SENTENCES, batch_size=4)
    np.testing.assert_allclose(served, keras_embeddings, atol=1e-5)
    np.testing.assert_allclose(served_tokens, keras_embeddings, atol=1e-5)

    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(minilm_path), device="cpu").encode(
        SENTENCES, normalize_embeddings=True
    )
    # keras-hub's BERT uses tanh GELU; the encoder restores the checkpoint's
    # exact GELU when it can (`exact_gelu`). Without it expect ~1e-3.
    exact = getattr(encoder, "exact_gelu", False)
    np.testing.assert_allclose(served, reference, atol=1e-4 if exact else 5e-3)
    assert os.path.isfile(os.path.join(export_dir, "saved_model.pb"))
