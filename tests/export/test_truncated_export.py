"""`export_saved_model(truncate_dim=d)`: every signature serves Matryoshka-truncated embeddings.

The export is served the way test_saved_model_export.py serves it (a fresh,
Keras-free TensorFlow process) and compared with `SentenceEncoder.encode(truncate_dim=d)`
and with NumPy truncation of the full embeddings. Under TensorFlow the export runs
in-process and the test is quick; elsewhere it needs the TensorFlow subprocess and is slow.
"""

import keras
import numpy as np
import pytest

import keras_cosent
from tests.export.conftest import SENTENCES
from tests.export.conftest import build_encoder
from tests.export.conftest import run_tf1_session

DIM = 5

# Off TensorFlow the export is a TensorFlow subprocess: tens of seconds.
quick_on_tensorflow = pytest.mark.skipif(False, reason="") if (
    keras.backend.backend() == "tensorflow") else pytest.mark.slow


@quick_on_tensorflow
def test_truncated_export_serves_truncated_renormalised_embeddings(tiny_checkpoint, tmp_path):
    encoder = build_encoder(tiny_checkpoint, 12)
    path = keras_cosent.export.export_saved_model(encoder, str(tmp_path / "m"), truncate_dim=DIM)
    pairs = (SENTENCES[:3], SENTENCES[3:6])
    out = run_tf1_session([
        {"model": path, "signature": "serving_default", "inputs": {"sentences": SENTENCES}},
        {"model": path, "signature": "similarity",
         "inputs": {"sentences1": pairs[0], "sentences2": pairs[1]}},
    ], str(tmp_path))["results"]
    served = np.asarray(out[0]["embeddings"])
    full = encoder.encode(SENTENCES).astype("float64")
    expected = full[:, :DIM] / np.linalg.norm(full[:, :DIM], axis=1, keepdims=True)
    assert served.shape == (len(SENTENCES), DIM)
    np.testing.assert_allclose(served, expected, atol=1e-5)
    np.testing.assert_allclose(served, encoder.encode(SENTENCES, truncate_dim=DIM), atol=1e-5)
    np.testing.assert_allclose(np.asarray(out[1]["cosine"]),
                               np.sum(expected[:3] * expected[3:6], axis=1), atol=1e-5)


@pytest.mark.parametrize("bad", [0, 9])
def test_bad_truncate_dim_fails_before_exporting(tiny_checkpoint, tmp_path, bad):
    encoder = build_encoder(tiny_checkpoint, 12)
    with pytest.raises(ValueError, match=rf"`truncate_dim`={bad}"):
        keras_cosent.export.export_saved_model(encoder, str(tmp_path), truncate_dim=bad)
    assert not any(tmp_path.iterdir())
    # Nor the folders it made above BASE_DIR.
    with pytest.raises(ValueError, match=rf"`truncate_dim`={bad}"):
        keras_cosent.export.export_saved_model(encoder, str(tmp_path / "new" / "models"),
                                               truncate_dim=bad)
    assert not any(tmp_path.iterdir())


def test_string_signatures_without_a_tokenizer_fail_before_exporting(tiny_checkpoint, tmp_path):
    # Off TensorFlow the export runs in a TensorFlow subprocess: refused before it
    # starts, with the same message as on TensorFlow.
    encoder = build_encoder(tiny_checkpoint, 12)
    bare = keras_cosent.models.SentenceEncoder(encoder.backbone, None,
                                               max_length=encoder.max_length)
    with pytest.raises(ValueError, match="The encoder has no tokenizer"):
        keras_cosent.export.export_saved_model(bare, str(tmp_path / "base"))
    assert not any(tmp_path.iterdir())
