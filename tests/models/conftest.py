"""Tiny randomly initialised encoders and Hugging Face checkpoints for fast model tests."""

import json

import pytest

WORDS = (
    "the a cat dog sat on mat man is playing guitar piano woman runs fast slow "
    "red blue car house tree big small cafe zurich quick brown fox ##s ##ing"
).split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, ".", ",", "!"]


def make_tiny_encoder(
    pooling="mean", max_length=16, exact_gelu=False, num_layers=2, seed=0, dropout=0.0
):
    import keras
    import keras_hub

    from keras_cosent.models import SentenceEncoder

    keras.utils.set_random_seed(seed)
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(VOCAB),
        num_layers=num_layers,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        dropout=dropout,
        max_sequence_length=32,
    )
    return SentenceEncoder(
        backbone, tokenizer, pooling=pooling, max_length=max_length, exact_gelu=exact_gelu
    )


@pytest.fixture(scope="module")
def tiny_encoder():
    """Shared by the tests of a module that do not change it (one compile on jax)."""
    return make_tiny_encoder()


def write_tiny_hf_checkpoint(path, hidden_act="gelu", weights="safetensors", seed=0,
                             pooler=True):
    """A random 2-layer transformers BertModel saved as a Hugging Face folder.

    `weights`: "safetensors", "bin" or "sharded" (safetensors files and their
    index); `pooler=False` saves it without its pooler.
    """
    import torch
    import transformers
    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        hidden_act=hidden_act,
    )
    model = transformers.BertModel(config, add_pooling_layer=pooler).eval()
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(path), max_shard_size="8KB" if weights == "sharded" else "5GB")
    if weights == "bin":
        (path / "model.safetensors").unlink()
        torch.save(model.state_dict(), str(path / "pytorch_model.bin"))
    (path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    (path / "tokenizer_config.json").write_text(
        json.dumps({"do_lower_case": True, "tokenizer_class": "BertTokenizer"})
    )
    return model
