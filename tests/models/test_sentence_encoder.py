"""SentenceEncoder on tiny random backbones: shapes, pooling, text utilities, saving."""

import os
import re
import subprocess
import sys
import warnings

import keras
import numpy as np
import pytest

import keras_cosent
from keras_cosent.data.padding import pad_batch
from keras_cosent.models import SentenceEncoder
from keras_cosent.models import checkpoints
from keras_cosent.utils import pair_cosine
from tests.models.conftest import VOCAB
from tests.models.conftest import make_tiny_encoder
from tests.models.conftest import write_tiny_hf_checkpoint

TEXTS = [
    "The cat sat on the mat.",
    "a dog",
    "",
    "A man is playing a guitar, a woman is playing piano!",
    "red car",
    "big small big small big small big small big small big small tree",
    "The quick brown fox runs fast.",
]


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def _sequence_output(encoder, x):
    return _numpy(encoder.backbone(x)["sequence_output"]).astype("float64")


def _normalize(v):
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


# References for the composition backbone -> pooling -> normalisation.
def _ref_mean(h, m):
    return (h * m[..., None]).sum(1) / m.sum(1, keepdims=True)


def _ref_max(h, m):
    return np.where(m[..., None], h, -np.inf).max(1)


REFERENCES = {
    "mean": _ref_mean,
    "cls": lambda h, m: h[:, 0],
    "max": _ref_max,
    "mean_sqrt_len": lambda h, m: (h * m[..., None]).sum(1) / np.sqrt(m.sum(1, keepdims=True)),
    "weighted_mean": lambda h, m: (h * (np.cumsum(m, 1) * m)[..., None]).sum(1)
    / (np.cumsum(m, 1) * m).sum(1, keepdims=True),
}


@pytest.fixture(scope="module")
def batch(tiny_encoder):
    return tiny_encoder.preprocess(TEXTS)


@pytest.fixture(scope="module")
def sequence_output(tiny_encoder, batch):
    return _sequence_output(tiny_encoder, batch)


@pytest.mark.parametrize("pooling", sorted(REFERENCES))
def test_call_matches_reference(tiny_encoder, batch, sequence_output, pooling):
    # The same backbone under each pooling head.
    encoder = SentenceEncoder(tiny_encoder.backbone, tiny_encoder.tokenizer, pooling=pooling, max_length=16)
    out = encoder(batch)
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    assert tuple(out.shape) == (len(TEXTS), 16)
    expected = _normalize(REFERENCES[pooling](sequence_output, batch["padding_mask"]))
    np.testing.assert_allclose(_numpy(out), expected, atol=1e-5)


def test_first_last_average_uses_first_transformer_layer(tiny_encoder, batch, sequence_output):
    backbone = tiny_encoder.backbone
    encoder = SentenceEncoder(backbone, tiny_encoder.tokenizer, pooling="first_last_avg", max_length=16)
    first_model = keras.Model(backbone.input, backbone.transformer_layers[0].output)
    first = _numpy(first_model(batch)).astype("float64")
    expected = _normalize(_ref_mean((first + sequence_output) / 2, batch["padding_mask"]))
    np.testing.assert_allclose(_numpy(encoder(batch)), expected, atol=1e-5)
    # one copy of the weights, shared by the two views of the backbone
    assert len(encoder.weights) == len(backbone.weights)


def test_padding_does_not_change_embeddings(tiny_encoder, batch):
    longer = pad_batch(tiny_encoder.tokenize(TEXTS), pad_to_multiple_of=24)
    assert longer["token_ids"].shape[1] > batch["token_ids"].shape[1]
    np.testing.assert_allclose(
        _numpy(tiny_encoder(batch)), _numpy(tiny_encoder(longer)), atol=1e-5
    )


def test_tokenize(tiny_encoder):
    ids = tiny_encoder.tokenize(["The cat sat.", "", "zzz"] + [" ".join(["cat"] * 40)])
    cls, sep, unk = VOCAB.index("[CLS]"), VOCAB.index("[SEP]"), VOCAB.index("[UNK]")
    expected = [cls, VOCAB.index("the"), VOCAB.index("cat"), VOCAB.index("sat"), VOCAB.index("."), sep]
    assert all(isinstance(a, np.ndarray) and a.dtype == np.int32 for a in ids)
    assert ids[0].tolist() == expected
    assert ids[1].tolist() == [cls, sep]
    assert ids[2].tolist() == [cls, unk, sep]
    assert len(ids[3]) == 16 and ids[3][0] == cls and ids[3][-1] == sep
    assert ids[3][1:-1].tolist() == [VOCAB.index("cat")] * 14


def test_tokenize_accepts_arrays_and_tuples(tiny_encoder):
    a = tiny_encoder.tokenize(np.array(["the cat", "a dog"]))
    b = tiny_encoder.tokenize(("the cat", "a dog"))
    assert [x.tolist() for x in a] == [x.tolist() for x in b]


def test_tokenize_thousands_in_one_call(tiny_encoder):
    texts = [f"the cat sat on the mat {i % 7}" for i in range(5000)]
    ids = tiny_encoder.tokenize(texts)
    assert len(ids) == 5000 and ids[4999].tolist() == ids[4999 - 7].tolist()


def test_preprocess_pads_to_batch_length(tiny_encoder):
    x = tiny_encoder.preprocess(["the cat sat", "a dog"])
    # Rounded up to 8 where functions compile per shape, exact on eager PyTorch.
    length = 5 if keras.backend.backend() == "torch" else 8
    assert x["token_ids"].shape == (2, length) and x["padding_mask"].dtype == bool
    assert x["padding_mask"].sum(1).tolist() == [5, 4]
    assert x["token_ids"][1, 4:].tolist() == [tiny_encoder.pad_id] * (length - 4)
    x = tiny_encoder.preprocess([" ".join(["cat"] * 40)])
    assert x["token_ids"].shape == (1, 16)  # capped at max_length


def test_encode_restores_order_and_matches_call(tiny_encoder, batch):
    out = tiny_encoder.encode(TEXTS, batch_size=3)
    assert out.dtype == np.float32 and out.shape == (len(TEXTS), 16)
    # batch rows are in input order; encode sorted them by length internally
    np.testing.assert_allclose(out, _numpy(tiny_encoder(batch)), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(tiny_encoder.encode(TEXTS, batch_size=100), out, atol=1e-5)


def test_encode_takes_fused_attention_only_at_inference(monkeypatch, batch):
    from keras.src import ops as keras_src_ops

    from tests.models.conftest import make_tiny_encoder

    encoder = make_tiny_encoder(dropout=0.1)
    attention = [
        layer
        for layer in encoder._flatten_layers()
        if isinstance(layer, keras.layers.MultiHeadAttention)
    ]
    assert len(attention) == 2
    calls = []
    fused = keras_src_ops.dot_product_attention

    def spy(*args, **kwargs):
        calls.append(1)
        return fused(*args, **kwargs)

    monkeypatch.setattr(keras_src_ops, "dot_product_attention", spy)
    # The explicit softmax(QK^T)V path outside `encode` is the reference.
    explicit = _numpy(encoder(batch, training=False))
    assert calls == []
    out = encoder.encode(TEXTS, batch_size=len(TEXTS))
    assert len(calls) >= 2  # once per layer per trace (or per eager run)
    np.testing.assert_allclose(out, explicit, atol=1e-5)
    # The rate is back, and training still drops attention weights.
    assert [layer._dropout for layer in attention] == [0.1, 0.1]
    a = _numpy(encoder(batch, training=True))
    b = _numpy(encoder(batch, training=True))
    assert np.abs(a - b).max() > 1e-4


def test_xla_on_by_default_where_it_compiles():
    # Keras' "auto" leaves XLA off on CPU-only TensorFlow; the encoder turns it on
    # (encode ~1.9x faster, BENCHMARKS.md). JAX compiles anyway; torch stays eager.
    import doctest

    from keras_cosent.models import xla

    backend = keras.backend.backend()
    encoder = make_tiny_encoder()
    assert encoder.jit_compile is (backend in ("tensorflow", "jax"))
    encoder.compile(loss="mse", jit_compile=False)
    assert encoder.jit_compile is False
    encoder.compile(loss="mse")
    assert encoder.jit_compile is (backend in ("tensorflow", "jax"))
    encoder.compile(loss="mse", run_eagerly=True)
    assert encoder.jit_compile is False
    result = doctest.testmod(xla, verbose=False)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("packing", [True, False])
def test_encode_truncate_dim_is_numpy_truncation_and_renormalisation(tiny_encoder, packing):
    full = tiny_encoder.encode(TEXTS, batch_size=3, packing=packing).astype("float64")
    for dim in (16, 5, 1):
        out = tiny_encoder.encode(TEXTS, batch_size=3, packing=packing, truncate_dim=dim)
        expected = full[:, :dim] / np.linalg.norm(full[:, :dim], axis=1, keepdims=True)
        assert out.dtype == np.float32 and out.shape == (len(TEXTS), dim)
        np.testing.assert_allclose(out, expected, atol=1e-5)
    assert tiny_encoder.encode([], truncate_dim=4).shape == (0, 4)


@pytest.mark.parametrize("bad", [0, -3, 17, 2.0, True])
def test_encode_refuses_a_bad_truncate_dim_naming_it(tiny_encoder, bad):
    with pytest.raises(ValueError, match=rf"at most the embedding dimension 16\. "
                                         rf"Received: `truncate_dim`={bad!r}"):
        tiny_encoder.encode(["a"], truncate_dim=bad)


@pytest.mark.parametrize("packing", [True, False])
def test_texts_that_tokenize_alike_get_one_embedding(tiny_encoder, packing, monkeypatch):
    # The same sentence twice, and sentences that differ only in case (uncased
    # vocabulary) or past max_length, are one token sequence: embedded once, so
    # their rows are equal bit for bit and their cosine is exactly 1 (on
    # TensorFlow a sequence run in two different batches came out 1e-7 apart).
    long = " ".join(["cat"] * 30)
    texts = ["a dog runs", "The cat sat", "a dog runs", "the CAT sat", long + " dog",
             long + " tree", "big red car"] * 3
    embedded = []
    for name in ("_padded_batches", "_packed_batches"):
        real = getattr(SentenceEncoder, name)

        def spy(self, token_lists, batch_size, real=real):
            embedded.append(len(token_lists))
            return real(self, token_lists, batch_size)

        monkeypatch.setattr(SentenceEncoder, name, spy)
    out = tiny_encoder.encode(texts, batch_size=2, packing=packing)
    assert out.shape == (len(texts), 16)
    assert embedded == [4]  # "a dog runs", "the cat sat", the long one, "big red car"
    for i, j in ((0, 2), (1, 3), (4, 5), (0, 7), (6, 20)):
        np.testing.assert_array_equal(out[i], out[j])
    pairs = np.stack([out[[0, 1, 4]], out[[2, 3, 5]]], axis=1)
    assert np.all(keras.ops.convert_to_numpy(pair_cosine(pairs)) == 1.0)
    # Each distinct text embeds as it does alone.
    for i in (0, 1, 4, 6):
        np.testing.assert_allclose(out[i], tiny_encoder.encode([texts[i]])[0], atol=1e-5)


def test_encode_empty_list(tiny_encoder):
    out = tiny_encoder.encode([])
    assert out.shape == (0, 16) and out.dtype == np.float32


def test_encode_progress_bar(tiny_encoder, capsys):
    tiny_encoder.encode(TEXTS, batch_size=2, progress=True)
    assert f"{len(TEXTS)}/{len(TEXTS)}" in capsys.readouterr().out
    # A bar of the caller's, advanced over several calls (a corpus in chunks).
    bar = keras.utils.Progbar(2 * len(TEXTS) + 1, unit_name="sentence")
    tiny_encoder.encode(TEXTS, batch_size=2, progress=bar)
    tiny_encoder.encode(TEXTS + TEXTS[:1], batch_size=2, progress=bar)
    shown = capsys.readouterr().out
    assert f"{2 * len(TEXTS) + 1}/{2 * len(TEXTS) + 1}" in shown and f"/{len(TEXTS)} " not in shown


@pytest.mark.parametrize(
    "texts,match",
    [
        ("a single string", "single str"),
        (["fine", 3, "fine"], "item 1 is int"),
        ([b"bytes"], "item 0 is bytes"),
        (42, "list of strings"),
        # Unordered: the rows could not be matched back to the texts.
        ({"query": "a cat sat"}, r"an ordered sequence\)\. Received: dict"),
        ({"a cat", "a dog"}, r"an ordered sequence\)\. Received: set"),
    ],
)
def test_encode_rejects_non_strings(tiny_encoder, texts, match):
    with pytest.raises(TypeError, match=match):
        tiny_encoder.encode(texts)


def test_encode_rejects_bad_batch_size(tiny_encoder):
    with pytest.raises(ValueError, match="`batch_size`=0"):
        tiny_encoder.encode(["a"], batch_size=0)
    with pytest.raises(ValueError, match="`progress`='no'"):
        tiny_encoder.encode(["a"], progress="no")


def test_without_tokenizer_text_methods_raise(tiny_encoder):
    encoder = SentenceEncoder(tiny_encoder.backbone, None, max_length=16)
    with pytest.raises(ValueError, match="no tokenizer"):
        encoder.encode(["a"])
    assert encoder.pad_id == 0


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"pooling": "avg"}, "Unknown `pooling`='avg'"),
        ({"max_length": 2}, "`max_length`=2"),
        ({"max_length": 64}, "exceeds the backbone's `max_sequence_length`=32"),
    ],
)
def test_bad_arguments(tiny_encoder, kwargs, match):
    with pytest.raises(ValueError, match=match):
        SentenceEncoder(tiny_encoder.backbone, tiny_encoder.tokenizer, **kwargs)


@pytest.mark.parametrize("backbone, shown", [
    ("bert_tiny_en_uncased", r"SentenceEncoder.from_checkpoint.*of type str"),
    (None, "of type NoneType"),
    (keras.layers.Dense(3), "of type Dense"),
])
def test_a_backbone_that_is_not_one_is_refused_by_name(tiny_encoder, backbone, shown):
    # A preset name gave compat's "install another keras version" error; a plain
    # layer an AttributeError from inside the backend.
    with pytest.raises(TypeError, match=r"`backbone` should be a keras-hub backbone .*"
                                        + shown):
        SentenceEncoder(backbone, tiny_encoder.tokenizer, max_length=16)


@pytest.mark.parametrize("kwargs, match", [
    ({"exact_gelu": "no"}, r"`exact_gelu` should be a bool"),  # was truthy: GELU switched
    ({"pooling": ["mean"]}, r"Unknown `pooling`=\['mean'\]"),  # was "unhashable type"
])
def test_option_values_of_the_wrong_type_are_named(tiny_encoder, kwargs, match):
    with pytest.raises(ValueError, match=match):
        SentenceEncoder(tiny_encoder.backbone, tiny_encoder.tokenizer, max_length=16, **kwargs)


@pytest.mark.parametrize("family, size_argument", [
    ("BertBackbone", "vocabulary_size"),
    ("ElectraBackbone", "vocab_size"),  # was not checked: it names the size otherwise
])
def test_a_tokenizer_larger_than_the_backbone_vocabulary_is_refused(
        tiny_encoder, family, size_argument):
    import keras_hub

    sizes = {"num_layers": 1, "num_heads": 2, "hidden_dim": 16, "intermediate_dim": 32,
             "max_sequence_length": 32}
    if family == "ElectraBackbone":
        sizes["embedding_dim"] = 16
    small = getattr(keras_hub.models, family)(**{size_argument: len(VOCAB) - 3}, **sizes)
    shown = (f"vocabulary has {len(VOCAB)} tokens but the backbone's token embedding has "
             f"{len(VOCAB) - 3} rows: ids {len(VOCAB) - 3} to {len(VOCAB) - 1}")
    with pytest.raises(ValueError, match=shown):
        SentenceEncoder(small, tiny_encoder.tokenizer, max_length=16)
    # A tokenizer whose vocabulary comes later (as a .keras file loads it) is not checked.
    SentenceEncoder(small, keras_hub.models.BertTokenizer(), max_length=16)


def test_attributes(tiny_encoder):
    assert tiny_encoder.pooling == "mean" and tiny_encoder.max_length == 16
    assert tiny_encoder.pad_id == 0 and tiny_encoder.embedding_dim == 16
    assert tiny_encoder.backbone is not None and tiny_encoder.tokenizer is not None


def _exact_gelu(z):
    from scipy.special import erf

    return 0.5 * z * (1.0 + erf(z / np.sqrt(2.0)))


def _tanh_gelu(z):
    return 0.5 * z * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (z + 0.044715 * z**3)))


def _feedforward_matches(backbone, gelu):
    """Whether every intermediate Dense computes `gelu(x @ W + b)` (NumPy reference)."""
    x = np.random.default_rng(0).normal(scale=3.0, size=(4, 16)).astype("float32")
    for layer in checkpoints.transformer_encoder_layers(backbone):
        dense = layer._feedforward_intermediate_dense
        z = x.astype("float64") @ _numpy(dense.kernel) + _numpy(dense.bias)
        # Random init is tiny (stddev 0.02): amplify so the two GELUs differ clearly.
        z = z * 100.0
        out = _numpy(dense.activation(keras.ops.convert_to_tensor(z.astype("float32"))))
        if np.abs(out - gelu(z)).max() > 1e-4:
            return False
    return True


def test_exact_gelu_changes_the_backbone_and_survives_saving(tmp_path):
    # Own backbones: exact_gelu=True changes the backbone it is given.
    approx = make_tiny_encoder(exact_gelu=False)
    assert _feedforward_matches(approx.backbone, _tanh_gelu) and not _feedforward_matches(approx.backbone, _exact_gelu)
    exact = make_tiny_encoder(exact_gelu=True)
    assert _feedforward_matches(exact.backbone, _exact_gelu) and not _feedforward_matches(exact.backbone, _tanh_gelu)
    path = tmp_path / "exact.keras"
    exact.save(path)
    restored = keras.saving.load_model(path)
    assert restored.exact_gelu is True
    assert _feedforward_matches(restored.backbone, _exact_gelu)
    # and the reloaded backbone alone would have come back approximate
    bare = keras.layers.deserialize(keras.layers.serialize(exact.backbone))
    assert not _feedforward_matches(bare, _exact_gelu)


def test_an_encoder_over_another_encoders_exact_backbone_records_it(tmp_path):
    # Re-wrapping a checkpoint encoder's backbone (to change pooling, say): the
    # backbone already runs the exact GELU, and a reload must too.
    exact = make_tiny_encoder(exact_gelu=True)
    rewrapped = SentenceEncoder(exact.backbone, exact.tokenizer, pooling="cls", max_length=16)
    assert rewrapped.exact_gelu is True and rewrapped.get_config()["exact_gelu"] is True
    path = tmp_path / "rewrapped.keras"
    rewrapped.save(path)
    restored = keras.saving.load_model(path)
    assert _feedforward_matches(restored.backbone, _exact_gelu)
    np.testing.assert_allclose(restored.encode(TEXTS), rewrapped.encode(TEXTS), atol=1e-6)
    # An approximate backbone stays approximate.
    approx = make_tiny_encoder(exact_gelu=False)
    assert SentenceEncoder(approx.backbone, approx.tokenizer, max_length=16).exact_gelu is False


@pytest.mark.parametrize("pooling", ["mean", "first_last_avg"])
def test_keras_save_and_load(tmp_path, pooling):
    encoder = make_tiny_encoder(pooling=pooling)
    path = tmp_path / "encoder.keras"
    encoder.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, SentenceEncoder)
    assert restored.pooling == pooling and restored.max_length == 16
    assert restored.tokenizer.vocabulary == VOCAB  # the vocabulary asset came back
    np.testing.assert_allclose(restored.encode(TEXTS), encoder.encode(TEXTS), atol=1e-6)


def test_weights_h5_round_trip(tmp_path):
    encoder = make_tiny_encoder(seed=0)
    other = make_tiny_encoder(seed=1)
    assert np.abs(other.encode(TEXTS) - encoder.encode(TEXTS)).max() > 1e-3
    path = tmp_path / "encoder.weights.h5"
    encoder.save_weights(path)
    other.load_weights(path)
    np.testing.assert_allclose(other.encode(TEXTS), encoder.encode(TEXTS), atol=1e-6)


_SAVE_SCRIPT = """
import sys
import numpy as np
from tests.models.conftest import make_tiny_encoder
encoder = make_tiny_encoder(pooling="max", exact_gelu=True, seed=3)
encoder.save(sys.argv[1])
np.save(sys.argv[2], encoder.encode(sys.argv[3:]))
"""


@pytest.mark.slow  # a second Python process importing keras on another backend
def test_saved_under_another_backend_reloads_identically(tmp_path):
    others = [b for b in ("jax", "torch", "tensorflow") if b != keras.backend.backend()]
    other = others[0]
    path, emb_path = tmp_path / "encoder.keras", tmp_path / "emb.npy"
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, KERAS_BACKEND=other, PYTHONPATH=os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")]))
    subprocess.run(
        [sys.executable, "-c", _SAVE_SCRIPT, str(path), str(emb_path), *TEXTS],
        env=env, cwd=repo, check=True, capture_output=True,
    )
    restored = keras.saving.load_model(path)
    assert restored.pooling == "max" and restored.exact_gelu
    np.testing.assert_allclose(restored.encode(TEXTS), np.load(emb_path), atol=1e-5)


def test_registered_for_serialization(tiny_encoder):
    assert keras.saving.get_registered_name(SentenceEncoder) == "keras_cosent>SentenceEncoder"
    config = keras.saving.serialize_keras_object(tiny_encoder)
    restored = keras.saving.deserialize_keras_object(config)
    assert isinstance(restored, SentenceEncoder) and restored.get_config()["pooling"] == "mean"


@pytest.mark.parametrize("weights", ["safetensors", "bin"])
def test_from_hugging_face_folder_matches_transformers(tmp_path, weights):
    import torch
    model = write_tiny_hf_checkpoint(tmp_path / "ckpt", weights=weights)
    encoder = SentenceEncoder.from_checkpoint(tmp_path / "ckpt", max_length=16)
    assert encoder.exact_gelu and encoder.tokenizer.strip_accents
    texts = ["The cat sat on the mat.", "A café in Zürich!", "big"]
    x = encoder.preprocess(texts)
    with torch.no_grad():
        expected = model(
            input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
            attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long),
        ).last_hidden_state.numpy()
    mask = x["padding_mask"]
    np.testing.assert_allclose(_sequence_output(encoder, x)[mask], expected[mask], atol=1e-5)
    # accents stripped as Hugging Face does: "café" -> "cafe", "zürich" -> "zurich"
    assert VOCAB.index("cafe") in encoder.tokenize(texts)[1]
    assert VOCAB.index("zurich") in encoder.tokenize(texts)[1]


@pytest.mark.parametrize("weights", ["safetensors", "bin", "sharded"])
def test_a_bert_saved_without_its_pooler_loads_and_matches_transformers(tmp_path, weights):
    # keras-hub's loader reads the pooler, which BertModel(add_pooling_layer=False)
    # does not save: a SafetensorError. Sentence pooling never uses it.
    import torch

    model = write_tiny_hf_checkpoint(tmp_path / "ckpt", weights=weights, pooler=False)
    names = {p.name for p in (tmp_path / "ckpt").iterdir()}
    assert ("model.safetensors.index.json" in names) == (weights == "sharded")
    encoder = SentenceEncoder.from_checkpoint(tmp_path / "ckpt", max_length=16)
    texts = ["The cat sat on the mat.", "big"]
    x = encoder.preprocess(texts)
    with torch.no_grad():
        hidden = model(
            input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
            attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long),
        ).last_hidden_state.numpy().astype("float64")
    mask = x["padding_mask"][..., None]
    mean = (hidden * mask).sum(axis=1) / mask.sum(axis=1)
    expected = mean / np.linalg.norm(mean, axis=1, keepdims=True)
    np.testing.assert_allclose(encoder.encode(texts), expected, atol=1e-5)
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == sorted(names)  # untouched


@pytest.mark.parametrize("split_cjk", [None, True, False])
def test_from_checkpoint_splits_cjk_as_the_tokenizer_config_says(tmp_path, split_cjk):
    import json

    import transformers

    write_tiny_hf_checkpoint(tmp_path / "ckpt")
    vocab = ["你" if w == "piano" else "好" if w == "guitar" else "你好" if w == "tree" else w
             for w in VOCAB]
    (tmp_path / "ckpt" / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = {"do_lower_case": True, "tokenizer_class": "BertTokenizer"}
    if split_cjk is not None:
        config["tokenize_chinese_chars"] = split_cjk
    (tmp_path / "ckpt" / "tokenizer_config.json").write_text(json.dumps(config))
    encoder = SentenceEncoder.from_checkpoint(tmp_path / "ckpt", max_length=16)
    reference = transformers.BertTokenizer.from_pretrained(str(tmp_path / "ckpt"))
    texts = ["你好 cat", "the你好cat", "好你"]
    assert [ids.tolist() for ids in encoder.tokenize(texts)] == [
        reference(text)["input_ids"] for text in texts]


@pytest.mark.parametrize("hidden_act, exact", [
    ("gelu_new", False), ("gelu_pytorch_tanh", False),
    # transformers' erf GELU under another name, and its default when absent:
    # both were read as the tanh approximation (2.6e-4 off the peer).
    ("gelu_python", True), (None, True),
])
def test_from_checkpoint_reads_the_gelu_form(tmp_path, hidden_act, exact):
    import json

    write_tiny_hf_checkpoint(tmp_path / "ckpt", hidden_act=hidden_act or "gelu")
    if hidden_act is None:
        config_path = tmp_path / "ckpt" / "config.json"
        config = json.loads(config_path.read_text())
        del config["hidden_act"]
        config_path.write_text(json.dumps(config))
    encoder = SentenceEncoder.from_checkpoint(str(tmp_path / "ckpt"), max_length=16)
    assert encoder.exact_gelu is exact


@pytest.mark.parametrize("exact_gelu", [None, True])
def test_from_checkpoint_refuses_an_activation_other_than_gelu(tmp_path, exact_gelu):
    # keras-hub's BERT computes GELU whatever config.json says: a ReLU checkpoint
    # loaded silently and embedded 0.45 cosine away from transformers.
    write_tiny_hf_checkpoint(tmp_path / "ckpt", hidden_act="relu")
    with pytest.raises(ValueError, match=r"ckpt/config\.json: `hidden_act` 'relu' is not "
                                         r"supported; keras-hub's backbone computes GELU"):
        SentenceEncoder.from_checkpoint(tmp_path / "ckpt", max_length=16, exact_gelu=exact_gelu)


def test_from_checkpoint_lowercases_without_do_lower_case(tmp_path):
    # transformers' BertTokenizer defaults to lowercasing; keras-hub's converter
    # failed with KeyError: 'do_lower_case'.
    import json

    import transformers

    write_tiny_hf_checkpoint(tmp_path / "ckpt")
    (tmp_path / "ckpt" / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "BertTokenizer"}))
    encoder = SentenceEncoder.from_checkpoint(tmp_path / "ckpt", max_length=16)
    reference = transformers.BertTokenizer.from_pretrained(str(tmp_path / "ckpt"))
    texts = ["The CAT sat on the Mat.", "A Café in Zürich!"]
    assert [ids.tolist() for ids in encoder.tokenize(texts)] == [
        reference(text)["input_ids"] for text in texts]
    assert VOCAB.index("cafe") in encoder.tokenize(texts)[1]  # accents stripped too


def test_from_checkpoint_default_length_fits_the_position_table(tmp_path):
    """No `sentence_bert_config.json`: 128 tokens, cut to a smaller position table
    (this checkpoint has 32 positions); an explicit length beyond it is refused."""
    write_tiny_hf_checkpoint(tmp_path / "ckpt")
    encoder = SentenceEncoder.from_checkpoint(tmp_path / "ckpt")
    assert encoder.max_length == 32
    long_text = " ".join(["the cat sat on the mat ."] * 10)
    assert len(encoder.tokenize([long_text])[0]) == 32
    with pytest.raises(ValueError, match="max_length 64 exceeds .* 32"):
        SentenceEncoder.from_checkpoint(tmp_path / "ckpt", max_length=64)


@pytest.mark.slow  # bfloat16 compiles slowly on CPU
def test_from_checkpoint_dtype(tmp_path):
    write_tiny_hf_checkpoint(tmp_path / "ckpt")
    encoder = SentenceEncoder.from_checkpoint(tmp_path / "ckpt", max_length=16, dtype="bfloat16")
    assert encoder.backbone.dtype_policy.compute_dtype == "bfloat16"
    texts = ["the cat sat", "a dog"]
    out = encoder.encode(texts)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-4)
    # Against the float32 encoder of the same checkpoint: bfloat16 keeps 8
    # significant bits (0.4% per rounding), so unit vectors agree to about 1e-2
    # per component after one layer.
    expected = SentenceEncoder.from_checkpoint(tmp_path / "ckpt", max_length=16).encode(texts)
    np.testing.assert_allclose(out, expected, atol=2e-2, rtol=0)


def test_backbone_without_segment_ids():
    import keras_hub

    # Same sizes as the BERT tests, so jax reuses its compiled primitives.
    backbone = keras_hub.models.RobertaBackbone(
        vocabulary_size=len(VOCAB), num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=32,
    )
    encoder = SentenceEncoder(backbone, None, max_length=16, exact_gelu=True)
    x = pad_batch([[0, 5, 6, 2], [0, 7, 2]])
    out = encoder(x)  # segment_ids is sent and dropped
    assert tuple(out.shape) == (2, 16)
    expected = _normalize(_ref_mean(_numpy(backbone({k: x[k] for k in ("token_ids", "padding_mask")})).astype("float64"), x["padding_mask"]))
    np.testing.assert_allclose(_numpy(out), expected, atol=1e-5)


def test_default_checkpoint_is_packaged_minilm():
    path = checkpoints.default_checkpoint()
    assert isinstance(path, str) and os.path.isfile(os.path.join(path, "config.json"))


def test_the_unused_bert_pooler_is_frozen_through_training_and_reloading(tmp_path):
    # No pooling mode reads `pooled_dense`. Trainable, it made Keras warn on every
    # step that it had no gradient (TensorFlow, PyTorch), and JAX's AdamW decayed it.
    encoder = make_tiny_encoder(num_layers=1)
    pooler = encoder.backbone.get_layer("pooled_dense")
    before = [keras.ops.convert_to_numpy(w) for w in pooler.weights]
    encoder.trainable = False
    encoder.trainable = True  # a freeze and unfreeze (staged training) keeps it frozen
    assert not {id(w) for w in pooler.weights} & {id(w) for w in encoder.trainable_weights}
    dataset = keras_cosent.data.PairDataset(
        [["a cat sat", "the dog ran", "a bird flew", "the cat ran"],
         ["the cat sat", "a dog ran", "the bird sat", "a cat flew"]],
        np.array([4.0, 3.0, 1.0, 2.0], "float32"), source="inline")
    setup = keras_cosent.training.build(encoder, dataset, "cosent", batch_size=4, epochs=1,
                                        learning_rate=1e-2, weight_decay=0.5, warmup=0.0)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Gradients do not exist")
        setup.model.fit(setup.batches, epochs=1, verbose=0, shuffle=False)
    for got, want in zip(pooler.weights, before):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(got), want)
    path = tmp_path / "encoder.keras"
    encoder.save(path)
    restored = keras.saving.load_model(path)
    assert restored.backbone.get_layer("pooled_dense").trainable is False
    assert len(restored.trainable_weights) == len(encoder.trainable_weights)
    # Freezing and unfreezing the backbone itself (Keras' setter) unfreezes it, as README
    # says; freezing and unfreezing the encoder freezes it again. (On TensorFlow, Keras
    # skips setting `trainable` to the value it has: both go through a change.)
    encoder.backbone.trainable = False
    encoder.backbone.trainable = True
    assert pooler.trainable
    encoder.trainable = False
    encoder.trainable = True
    assert not pooler.trainable


@pytest.mark.parametrize("name", ["nope/minilm", "./minilm", "../minilm"])
def test_from_checkpoint_names_a_local_folder_that_does_not_exist(tmp_path, monkeypatch, name):
    # keras-hub took it for a preset name: "Unknown preset identifier", then every
    # kind of handle, without saying that the folder was missing.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=re.escape(
            f"`path_or_preset`={name!r}: no such folder (a keras-hub preset is a name")):
        SentenceEncoder.from_checkpoint(name)
