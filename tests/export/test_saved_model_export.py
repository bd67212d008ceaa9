"""SavedModel export: served the TF Serving way, in a process with no Keras at all.

A tiny random BERT encoder is built on the current backend (the suite runs under
TensorFlow, JAX and PyTorch, so each backend's saved weights are covered) and
exported twice: from the encoder object (version 1) and from a training output
directory holding `encoder.keras`, with a `max_length` override (version 2).
A fresh subprocess then loads both with the TF1 SavedModelBundle path, runs every
signature by the tensor names in its SignatureDef and the results are compared
with the Keras encoder's own embeddings.
"""

import json
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_cosent
import keras_cosent.export
from keras_cosent.data.padding import pad_batch
from tests.backends import once_in
from tests.export.conftest import SENTENCES
from tests.export.conftest import VOCAB
from tests.export.conftest import build_encoder
from tests.export.conftest import run_tf1_session
from tests.export.rest_emulation import request_to_signature_inputs
from tests.export.rest_emulation import signature_outputs_to_response

MAX_LENGTH = 12
OVERRIDE_LENGTH = 6
PAIRS = (
    ["Hello world!", "A man is playing the guitar.", "the lazy dog"],
    ["hello WORLD !", "A woman is playing the piano.", "The quick brown fox jumped."],
)

# The request bodies README.md's "Serving with TensorFlow Serving" section documents,
# verbatim in structure: two sentences of different token lengths, so that the
# columnar request pads one row and `encode_tokens` must honour the client's
# `padding_mask`.
ROW_REQUEST = {"instances": ["A man is playing the guitar.", "Dogs run."]}


def _columnar_request(batch):
    return {
        "signature_name": "encode_tokens",
        "inputs": {
            "token_ids": batch["token_ids"].tolist(),
            "padding_mask": batch["padding_mask"].astype("int32").tolist(),
            "segment_ids": batch["segment_ids"].tolist(),
        },
    }


def _forward(encoder, batch):
    return keras.ops.convert_to_numpy(encoder(batch, training=False))


def _truncated_reference(encoder, texts, max_length):
    """Embeddings of `texts` cut to `max_length` tokens, via the Keras forward pass."""
    ids = [
        t if len(t) <= max_length else np.concatenate([t[: max_length - 1], t[-1:]])
        for t in encoder.tokenize(texts)
    ]
    return _forward(encoder, pad_batch(ids, pad_id=encoder.pad_id))


# Off TensorFlow every export is a `KERAS_BACKEND=tensorflow` subprocess (tens
# of seconds on a busy CPU), so there only the encoder-object export runs; the
# path + `max_length` and core-only exports, cheap in-process, run under the
# TensorFlow backend. Their worker flags are checked in test_export_versions.py.
IN_PROCESS = keras.backend.backend() == "tensorflow"
needs_in_process = pytest.mark.skipif(
    not IN_PROCESS, reason="extra exports run under the TensorFlow backend only (in-process)"
)


@pytest.fixture(scope="module")
def served(tiny_checkpoint, tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("served"))
    base = os.path.join(tmp, "models", "tiny")
    encoder = build_encoder(tiny_checkpoint, MAX_LENGTH)
    tokens = encoder.preprocess(SENTENCES)
    token_inputs = _columnar_request(tokens)["inputs"]

    # Exported from a folder holding another `keras_cosent`: off TensorFlow the
    # worker ran `python -m` there, and imported that one.
    shadow = os.path.join(tmp, "shadow", "keras_cosent")
    os.makedirs(shadow)
    with open(os.path.join(shadow, "__init__.py"), "w") as f:
        f.write("raise ImportError('the keras_cosent of the working directory')\n")
    cwd = os.getcwd()
    os.chdir(os.path.dirname(shadow))
    try:
        v1 = keras_cosent.export.export_saved_model(encoder, base)
    finally:
        os.chdir(cwd)
    requests = {
        "sentences": {"model": v1, "signature": "serving_default",
                      "inputs": {"sentences": SENTENCES}},
        "tokens": {"model": v1, "signature": "encode_tokens", "inputs": token_inputs},
        "similarity": {"model": v1, "signature": "similarity",
                       "inputs": {"sentences1": PAIRS[0], "sentences2": PAIRS[1]}},
        # Loaded before TF Text's ops are registered, like a server without them.
        "full_without_text": {"model": v1, "signature": "encode_tokens", "tf_text": False,
                              "inputs": token_inputs},
    }  # fmt: skip
    result = {"encoder": encoder, "base": base, "v1": v1, "tokens": tokens}
    if IN_PROCESS:
        run_dir = os.path.join(tmp, "run")
        os.makedirs(run_dir)
        encoder.save(os.path.join(run_dir, "encoder.keras"))
        result["v2"] = keras_cosent.export.export_saved_model(
            run_dir, base, max_length=OVERRIDE_LENGTH
        )
        result["core"] = keras_cosent.export.export_saved_model(
            encoder, os.path.join(tmp, "models", "core"), string_signatures=False
        )
        requests["override"] = {"model": result["v2"], "signature": "serving_default",
                                "inputs": {"sentences": SENTENCES}}
        requests["core"] = {"model": result["core"], "signature": "serving_default",
                            "tf_text": False, "inputs": token_inputs}  # fmt: skip

    # The documented REST bodies, through TF Serving's JSON -> signature mapping.
    columnar = _columnar_request(encoder.preprocess(ROW_REQUEST["instances"]))
    signature_inputs = {"serving_default": ["sentences"],
                        "encode_tokens": ["padding_mask", "segment_ids", "token_ids"]}
    for key, body in (("rest_row", ROW_REQUEST), ("rest_columnar", columnar)):
        name, inputs = request_to_signature_inputs(
            body, signature_inputs[body.get("signature_name", "serving_default")]
        )
        requests[key] = {"model": v1, "signature": name, "inputs": inputs}

    keys = list(requests)
    out = run_tf1_session([requests[k] for k in keys], tmp)
    results = dict(zip(keys, out["results"]))
    result.update(
        out=out,
        results=results,
        sentences=np.asarray(results["sentences"]["embeddings"]),
        rest=[
            (ROW_REQUEST, signature_outputs_to_response(ROW_REQUEST, results["rest_row"])),
            (columnar, signature_outputs_to_response(columnar, results["rest_columnar"])),
        ],
    )
    return result


def test_versions_are_numbered_directories(served):
    versions = ["1", "2"] if IN_PROCESS else ["1"]
    assert served["v1"] == os.path.join(served["base"], "1")
    if IN_PROCESS:
        assert served["v2"] == os.path.join(served["base"], "2")
    for version in versions:
        assert os.path.isfile(os.path.join(served["base"], version, "saved_model.pb"))
        assert os.path.isdir(os.path.join(served["base"], version, "variables"))
    # The staging directories are gone: TF Serving only ever sees whole versions.
    assert sorted(os.listdir(served["base"])) == versions


def test_serving_process_never_imports_keras(served):
    assert served["out"]["keras_modules"] == []
    assert served["out"]["keras_in_sys_modules"] is False


def test_string_signature_matches_the_keras_encoder(served):
    encoder = served["encoder"]
    # The long sentence really is cut to the training length.
    assert max(len(ids) for ids in encoder.tokenize(SENTENCES)) == MAX_LENGTH
    # "CAFÉ" -> "cafe", a vocabulary word, not [UNK] (id 1).
    assert encoder.tokenize(["CAFÉ"])[0].tolist() == [2, VOCAB.index("cafe"), 3]
    expected = encoder.encode(SENTENCES)
    np.testing.assert_allclose(served["sentences"], expected, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(served["sentences"], axis=-1), 1.0, atol=1e-5)


def test_encode_tokens_signature_matches_the_keras_encoder(served):
    expected = _forward(served["encoder"], served["tokens"])
    np.testing.assert_allclose(served["results"]["tokens"]["embeddings"], expected, atol=1e-5)


def test_similarity_signature_is_the_cosine_of_the_embeddings(served):
    first = served["encoder"].encode(PAIRS[0])
    second = served["encoder"].encode(PAIRS[1])
    expected = np.sum(first * second, axis=-1) / (
        np.linalg.norm(first, axis=-1) * np.linalg.norm(second, axis=-1)
    )
    cosine = np.asarray(served["results"]["similarity"]["cosine"])
    np.testing.assert_allclose(cosine, expected, atol=1e-5)
    assert cosine[0] > 0.999  # same words, different case and spacing


@needs_in_process
def test_max_length_override_truncates_in_the_graph(served):
    override = np.asarray(served["results"]["override"]["embeddings"])
    expected = _truncated_reference(served["encoder"], SENTENCES, OVERRIDE_LENGTH)
    np.testing.assert_allclose(override, expected, atol=1e-5)
    # Sentences that fit in OVERRIDE_LENGTH tokens are unchanged, longer ones differ.
    fits = [len(t) <= OVERRIDE_LENGTH for t in served["encoder"].tokenize(SENTENCES)]
    assert any(fits) and not all(fits)
    diff = np.abs(override - served["sentences"]).max(axis=-1)
    assert np.all(diff[fits] < 1e-5) and np.all(diff[~np.asarray(fits)] > 1e-3)


def test_signature_defs_have_the_documented_names_dtypes_and_shapes(served):
    signatures = served["out"]["signatures"][served["v1"]]
    dim = served["sentences"].shape[1]
    assert set(signatures) >= {"serving_default", "encode_tokens", "similarity"}

    def spec(name, side):
        return {k: v[1:] for k, v in signatures[name][side].items()}

    assert spec("serving_default", "inputs") == {"sentences": ["DT_STRING", [-1]]}
    assert spec("serving_default", "outputs") == {"embeddings": ["DT_FLOAT", [-1, dim]]}
    assert spec("encode_tokens", "inputs") == {
        key: ["DT_INT32", [-1, -1]] for key in ("token_ids", "padding_mask", "segment_ids")
    }
    assert spec("encode_tokens", "outputs") == {"embeddings": ["DT_FLOAT", [-1, dim]]}
    assert spec("similarity", "inputs") == {
        "sentences1": ["DT_STRING", [-1]], "sentences2": ["DT_STRING", [-1]]
    }
    assert spec("similarity", "outputs") == {"cosine": ["DT_FLOAT", [-1]]}


def test_rest_requests_give_the_documented_responses(served):
    encoder = served["encoder"]
    (row, row_response), (columnar, columnar_response) = served["rest"]
    dim = served["sentences"].shape[1]
    # Row format: {"predictions": [[dim floats], ...]}, one row per instance.
    assert list(row_response) == ["predictions"]
    predictions = np.asarray(row_response["predictions"])
    assert predictions.shape == (len(row["instances"]), dim)
    np.testing.assert_allclose(predictions, encoder.encode(row["instances"]), atol=1e-5)
    # Columnar format on encode_tokens: {"outputs": [[dim floats], ...]}.
    masks = columnar["inputs"]["padding_mask"]
    assert sum(masks[0]) != sum(masks[1]) and 0 in masks[1], masks  # one row is padded
    assert list(columnar_response) == ["outputs"]
    outputs = np.asarray(columnar_response["outputs"])
    assert outputs.shape == (len(row["instances"]), dim)
    np.testing.assert_allclose(outputs, predictions, atol=1e-5)
    # The bodies are plain JSON, as curl sends them.
    assert json.loads(json.dumps(columnar)) == columnar


@once_in("tensorflow", "reading the SavedModel, which TensorFlow writes on every backend")
def test_saved_model_cli_lists_the_signatures(served):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    command = [cli] if os.path.exists(cli) else [
        sys.executable, "-m", "tensorflow.python.tools.saved_model_cli"]
    result = subprocess.run(
        command + ["show", "--all", "--dir", served["v1"]],
        capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    text = result.stdout
    dim = served["sentences"].shape[1]
    for name in ("serving_default", "encode_tokens", "similarity"):
        assert f"signature_def['{name}']" in text
    blocks = {b.split("']")[0]: b for b in text.split("signature_def['")[1:]}
    assert "inputs['sentences'] tensor_info:\n        dtype: DT_STRING\n        shape: (-1)" in blocks["serving_default"]
    assert f"outputs['embeddings'] tensor_info:\n        dtype: DT_FLOAT\n        shape: (-1, {dim})" in blocks["serving_default"]
    for key in ("token_ids", "padding_mask", "segment_ids"):
        assert f"inputs['{key}'] tensor_info:\n        dtype: DT_INT32\n        shape: (-1, -1)" in blocks["encode_tokens"]
    assert "outputs['cosine'] tensor_info:\n        dtype: DT_FLOAT\n        shape: (-1)" in blocks["similarity"]
    assert text.count("Method name is: tensorflow/serving/predict") == 3


@once_in("tensorflow", "reading the SavedModel, which TensorFlow writes on every backend")
def test_op_audit(served):
    report = keras_cosent.export.audit_saved_model(served["v1"])
    signatures = report["signatures"]
    assert set(signatures) == {"serving_default", "encode_tokens", "similarity"}
    tokens = signatures["encode_tokens"]
    assert tokens["core_only"] and tokens["non_core_ops"] == []
    # The transformer itself is there, inside the called functions.
    assert {"StatefulPartitionedCall", "MatMul", "Softmax", "ReadVariableOp"} <= set(tokens["ops"])
    for name in ("serving_default", "similarity"):
        info = signatures[name]
        assert not info["core_only"]
        assert {"FastWordpieceTokenizeWithOffsets", "RegexSplitWithOffsets",
                "NormalizeUTF8"} <= set(info["non_core_ops"])  # fmt: skip
        # HFBertTokenizer lowercases with core string ops, not TF Text's NFKC.
        assert "CaseFoldUTF8" not in info["ops"]
        assert "StringLower" in info["ops"]
        assert set(info["providers"].values()) == {"tensorflow_text"}
        assert "RaggedTensorToTensor" in info["ops"]  # core, not flagged
    text_info = report["tensorflow_text"]
    assert text_info["minimum_version"] == "2.7"
    assert text_info["ops"]["FastWordpieceTokenizeWithOffsets"] == "2.7"
    assert text_info["installed"] == __import__("tensorflow_text").__version__
    rendered = keras_cosent.export.format_audit(report)
    assert "signature encode_tokens" in rendered
    assert "core TensorFlow ops only" in rendered
    assert "NOT core TensorFlow: FastWordpieceTokenizeWithOffsets (tensorflow_text)" in rendered
    assert "needs >= 2.7" in rendered and "Op type not registered" in rendered
    # The version is this process's: the SavedModel does not record the exporter's.
    assert f"tensorflow-text {text_info['installed']} is installed here." in rendered
    assert "not installed here" in keras_cosent.export.format_audit(
        {**report, "tensorflow_text": {**text_info, "installed": None}})


def test_full_export_needs_tensorflow_text_ops_to_load(served):
    # Even its core-only encode_tokens is unreachable: the whole model is refused.
    error = served["results"]["full_without_text"]["load_error"]
    assert "Op type not registered" in error


@needs_in_process
def test_core_only_export_serves_without_tensorflow_text(served):
    # string_signatures=False: encode_tokens, also as serving_default.
    expected = _forward(served["encoder"], served["tokens"])
    np.testing.assert_allclose(served["results"]["core"]["embeddings"], expected, atol=1e-5)
    signatures = served["out"]["signatures"][served["core"]]
    def specs(name):  # dtype and shape; tensor names differ per signature
        return {k: v[1:] for k, v in signatures[name]["inputs"].items()}

    assert specs("serving_default") == specs("encode_tokens")
    report = keras_cosent.export.audit_saved_model(served["core"])
    assert set(report["signatures"]) == {"serving_default", "encode_tokens"}
    assert all(info["core_only"] for info in report["signatures"].values())
    assert report["tensorflow_text"]["minimum_version"] is None
    assert "TensorFlow Text: not needed." in keras_cosent.export.format_audit(report)


def test_audit_of_a_directory_without_saved_model_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"No saved_model.pb in {tmp_path}; pass the "
                                                "version directory that `keras-cosent export`"):
        keras_cosent.export.audit_saved_model(str(tmp_path))
    # A run directory: the hint names the newest version under it (RUN/1 was wrong).
    for version in ("2", "10"):
        (tmp_path / "export" / version).mkdir(parents=True)
        (tmp_path / "export" / version / "saved_model.pb").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match=re.escape(
            f"pass a version directory such as {tmp_path / 'export' / '10'}.")):
        keras_cosent.export.audit_saved_model(str(tmp_path))


def test_existing_version_is_never_overwritten_silently(served):
    before = sorted(os.listdir(served["base"]))
    with pytest.raises(FileExistsError, match=os.path.join(served["base"], "1")):
        keras_cosent.export.export_saved_model(served["encoder"], served["base"], version=1)
    assert sorted(os.listdir(served["base"])) == before


def test_bad_max_length_fails_before_exporting(served, tmp_path):
    for bad in (2, 10_000, 4.5):
        with pytest.raises(ValueError, match=f"`max_length`={bad!r}"):
            keras_cosent.export.export_saved_model(
                served["encoder"], str(tmp_path), max_length=bad
            )
    # Nothing half-written is left behind.
    assert os.listdir(tmp_path) == []


def test_bad_arguments_fail_before_exporting_on_every_backend(served, tmp_path):
    # Off TensorFlow, a path's max_length went unchecked to the export worker ('8'
    # was exported, 2 came back as a RuntimeError), a SiameseEncoder failed with
    # AttributeError, and a truthy string took the place of True.
    encoder = served["encoder"]
    saved = tmp_path / "encoder.keras"
    encoder.save(saved)
    siamese = keras_cosent.models.SiameseEncoder(encoder)
    siamese_file = tmp_path / "siamese.keras"
    siamese.save(siamese_file)
    text_file = tmp_path / "train.tsv"
    text_file.write_text("a\tb\t1\n")
    base = tmp_path / "base"
    for model, kwargs, match in (
            # Named as this function's argument, offering what it exports (the
            # loaders' wording said MODEL and offered checkpoints and presets).
            (text_file, {}, f"`encoder_or_path` {str(text_file)!r} is a file but not a "
                            "`.keras` file saved with `encoder.save(...)`; expected a "
                            "SentenceEncoder, a `.keras` file or a `keras-cosent train` "
                            "output directory"),
            (saved, {"max_length": "8"}, "`max_length`='8'"),
            (saved, {"max_length": 2}, "`max_length`=2"),
            (siamese, {}, "should be a keras_cosent SentenceEncoder. Received: a SiameseEncoder"),
            (siamese_file, {}, f"SentenceEncoder. {siamese_file} holds a SiameseEncoder"),
            (encoder, {"overwrite": "no"}, "`overwrite` should be a bool"),
            (saved, {"string_signatures": "False"}, "`string_signatures` should be a bool")):
        with pytest.raises(ValueError, match=re.escape(match)):
            keras_cosent.export.export_saved_model(model, base, **kwargs)
    assert not base.exists()


def test_arguments_the_model_refuses_raise_value_error_on_every_backend(served, tmp_path):
    # Off TensorFlow, a saved encoder's `max_length` above its backbone's length, or a
    # `truncate_dim` above its dimension, came back as a RuntimeError around the export
    # worker's start-up logs (CUDA probing first), where TensorFlow raised ValueError.
    encoder = served["encoder"]
    saved = tmp_path / "encoder.keras"
    encoder.save(saved)
    too_long = encoder.backbone.max_sequence_length + 1
    too_wide = encoder.embedding_dim + 1
    base = tmp_path / "base"
    for kwargs, message in (
            ({"max_length": too_long},
             f"`max_length`={too_long} exceeds the backbone's `max_sequence_length`="
             f"{too_long - 1}."),
            ({"truncate_dim": too_wide}, f"Received: `truncate_dim`={too_wide}")):
        with pytest.raises(ValueError) as info:
            keras_cosent.export.export_saved_model(saved, base, **kwargs)
        assert message in str(info.value) and "cuda" not in str(info.value).lower()
    assert not base.exists()


def _sentencepiece_albert():
    """A tiny ALBERT encoder with a SentencePiece tokenizer trained here (no download)."""
    import io

    import keras_hub
    import sentencepiece

    from keras_cosent.models import SentenceEncoder

    proto = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(["the man plays", "a man plays a guitar", "the cat sat"] * 20),
        model_writer=proto, vocab_size=12, model_type="word", pad_id=0, unk_id=1, bos_id=-1,
        eos_id=-1, pad_piece="<pad>", user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"],
        minloglevel=2, hard_vocab_limit=False)
    tokenizer = keras_hub.models.AlbertTokenizer(proto=proto.getvalue())
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=tokenizer.vocabulary_size(), num_layers=1, num_heads=2, embedding_dim=4,
        hidden_dim=8, intermediate_dim=16, max_sequence_length=16)
    return SentenceEncoder(backbone, tokenizer, max_length=16)


def _wordpiece_bert():
    import keras_hub

    from keras_cosent.models import SentenceEncoder

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "man", "plays", "ma", "##n"]
    return SentenceEncoder(
        keras_hub.models.BertBackbone(vocabulary_size=len(vocab), num_layers=1, num_heads=2,
                                      hidden_dim=8, intermediate_dim=16, max_sequence_length=16),
        keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=True), max_length=16)


@needs_in_process
@pytest.mark.parametrize("make_encoder", [_wordpiece_bert, _sentencepiece_albert])
def test_a_keras_hub_tokenizer_reads_nul_in_the_graph_as_encode_does(tmp_path, make_encoder):
    # keras-hub's BertTokenizer, run in Python by `encode`, splits words at NUL; in the
    # graph TensorFlow Text's regex split ended the sentence there ("\x00the man" was
    # served as an empty sentence). SentencePiece reads NUL alike on both paths: the
    # space put in its place for WordPiece served "the ma\x00n" as "the ma n"
    # (cosine 0.89 to `encode`'s on a probe's model).
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the ops the signature needs)

    from keras_cosent.export.serving_graph import write_serving_saved_model

    encoder = make_encoder()
    texts = ["the man plays", "the man\x00 plays", "\x00the man plays", "the ma\x00n plays"]
    write_serving_saved_model(encoder, str(tmp_path / "1"))
    served = tf.saved_model.load(str(tmp_path / "1")).signatures["serving_default"](
        sentences=tf.constant(texts))["embeddings"].numpy()
    np.testing.assert_allclose(served, encoder.encode(texts), atol=1e-5)


@once_in("tensorflow", "the serving probe (a subprocess of its own, whatever the backend)")
def test_the_probe_runs_every_signature_and_fails_a_model_that_does_not_load(served, tmp_path):
    import shutil

    from keras_cosent.export import probe_saved_model
    from keras_cosent.export.serving_probe import probe_problems

    probe = probe_saved_model(served["v1"])
    assert probe["loaded"] and sorted(probe["signatures"]) == [
        "encode_tokens", "serving_default", "similarity"]
    assert probe_problems(probe) == []
    assert probe["signatures"]["similarity"]["outputs"] == {"cosine": [2]}
    # The op audit reads the graph alone: without its variables it still passes.
    broken = tmp_path / "1"
    shutil.copytree(served["v1"], broken)
    shutil.rmtree(broken / "variables")
    keras_cosent.export.audit_saved_model(str(broken))
    (problem,) = probe_problems(probe_saved_model(str(broken)))
    assert problem.startswith("the SavedModel does not load")
