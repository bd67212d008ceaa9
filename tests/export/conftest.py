"""Fixtures for the export tests: a tiny random BERT checkpoint and the TF1 serving runner.

The tiny checkpoint is a Hugging Face folder (config.json, model.safetensors,
vocab.txt, tokenizer_config.json) with random weights, 1 layer and hidden size
8, so that `SentenceEncoder.from_checkpoint` builds it in a second and the
export tests stay fast while going through the same loader as real checkpoints.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf1_session_runner.py")

VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "quick", "brown", "fox",
    "jump", "##ed", "##s", "over", "lazy", "dog", "a", "cat", "sat", "on", "mat",
    ".", ",", "!", "?", "hello", "world", "is", "run", "##ning", "man", "woman",
    "play", "##ing", "guitar", "piano", "in", "park", "red", "blue", "car", "cafe",
]  # fmt: skip

SENTENCES = [
    "The quick brown fox jumped over the lazy dog.",
    "Hello world!",
    "A man is PLAYING the guitar in the park, a woman is playing the piano.",
    "cat",
    "The red car is running, the blue car sat on a mat?",
    "The CAFÉ is red.",  # lower-cased and accent-stripped in the graph, like HF
]

HIDDEN, HEADS, INTERMEDIATE, POSITIONS = 8, 2, 16, 32


def write_tiny_checkpoint(path, seed=0):
    """A 1-layer BERT in Hugging Face layout with random weights."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)

    def dense(rows, cols):
        return rng.normal(0.0, 0.3, (rows, cols)).astype("float32")

    def vector(size, mean=0.0):
        return (mean + rng.normal(0.0, 0.1, (size,))).astype("float32")

    weights = {
        "embeddings.word_embeddings.weight": dense(len(VOCAB), HIDDEN),
        "embeddings.position_embeddings.weight": dense(POSITIONS, HIDDEN),
        "embeddings.token_type_embeddings.weight": dense(2, HIDDEN),
        "embeddings.LayerNorm.weight": vector(HIDDEN, 1.0),
        "embeddings.LayerNorm.bias": vector(HIDDEN),
        "pooler.dense.weight": dense(HIDDEN, HIDDEN),
        "pooler.dense.bias": vector(HIDDEN),
    }
    layer = "encoder.layer.0."
    for name in ("attention.self.query", "attention.self.key", "attention.self.value",
                 "attention.output.dense"):
        weights[f"{layer}{name}.weight"] = dense(HIDDEN, HIDDEN)
        weights[f"{layer}{name}.bias"] = vector(HIDDEN)
    weights[f"{layer}intermediate.dense.weight"] = dense(INTERMEDIATE, HIDDEN)
    weights[f"{layer}intermediate.dense.bias"] = vector(INTERMEDIATE)
    weights[f"{layer}output.dense.weight"] = dense(HIDDEN, INTERMEDIATE)
    weights[f"{layer}output.dense.bias"] = vector(HIDDEN)
    for name in ("attention.output.LayerNorm", "output.LayerNorm"):
        weights[f"{layer}{name}.weight"] = vector(HIDDEN, 1.0)
        weights[f"{layer}{name}.bias"] = vector(HIDDEN)

    os.makedirs(path, exist_ok=True)
    save_file(weights, os.path.join(path, "model.safetensors"))
    config = {
        "architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu",
        "hidden_size": HIDDEN, "num_attention_heads": HEADS, "num_hidden_layers": 1,
        "intermediate_size": INTERMEDIATE, "max_position_embeddings": POSITIONS,
        "vocab_size": len(VOCAB), "type_vocab_size": 2, "layer_norm_eps": 1e-12,
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "pad_token_id": 0,
    }  # fmt: skip
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)
    with open(os.path.join(path, "vocab.txt"), "w") as f:
        f.write("\n".join(VOCAB) + "\n")
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": True, "tokenizer_class": "BertTokenizer"}, f)
    return path


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    return write_tiny_checkpoint(str(tmp_path_factory.mktemp("tiny_bert")))


def build_encoder(checkpoint, max_length):
    from keras_cosent.models import SentenceEncoder

    return SentenceEncoder.from_checkpoint(str(checkpoint), pooling="mean", max_length=max_length)


def run_tf1_session(requests, tmp_path):
    """Serves `requests` (each naming its `model` dir) in a fresh, Keras-free TF process."""
    requests_path = os.path.join(tmp_path, "requests.json")
    results_path = os.path.join(tmp_path, "results.json")
    with open(requests_path, "w") as f:
        json.dump(requests, f)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("KERAS_BACKEND", None)
    result = subprocess.run(
        [sys.executable, RUNNER, requests_path, results_path],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    with open(results_path) as f:
        return json.load(f)
