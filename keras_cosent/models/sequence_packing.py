"""Sequence packing: several sentences share one row of tokens.

`SentenceEncoder.encode` packs sentences end to end into rows of a fixed length,
with a block-diagonal attention mask (a token attends only to tokens of its own
sentence) and positions restarting at 0 for every sentence, so each sentence's
token states are exactly those it gets alone in a padded batch. The pooling
layer then reads each sentence's tokens back out of the rows.

Why: a padded batch computes every padding position through every layer. With
lengths rounded to a multiple of 8 (what keeps JAX/TensorFlow from compiling one
function per length) that is 30% more tokens than the STS-B test sentences hold;
packed rows add 3-4% (the last pass's empty rows included), and every pass has
one shape, so a compiled backend compiles once per call instead of once per
padded length. The price is attention over the row length instead of the
sentence length: about 3% of a MiniLM layer's work at 64 tokens (BENCHMARKS.md,
"Sequence packing").

Training packs too: `keras_cosent.data.PairBatches(packing=True)` lays out
each batch with `pack_batch` (as few rows as the batch needs, slots in input
order) and `keras_cosent.models.SiameseEncoder` runs them through
`packed_embeddings`. On the STS-B train split (batches of 16 pairs) that is
1.16x the real tokens on JAX/TensorFlow (rows rounded to an even count) and
1.10x on PyTorch, instead of 1.88x / 1.63x for padded batches (1.54x for
sentence-transformers, which pads each column to its own longest), for the
same function and the same gradients.

The host-side layout (`pack_lengths`, `packed_batches`, `pack_batch`) is
NumPy in `keras_cosent.data.packing`; this module is the model side:
`packed_embeddings` reuses the encoder's own layers (weights shared, nothing
copied) for keras-hub `BertBackbone`s, the structure it knows how to rewire.
"""

import keras
from keras import ops

from keras_cosent.data.packing import PACKED_KEYS


def supports_packing(backbone):
    """Whether `build_packed_model` can rewire this backbone (keras-hub BERT)."""
    import keras_hub

    return isinstance(backbone, keras_hub.models.BertBackbone)


def check_supports_packing(backbone):
    """Raises the ValueError that names the backbone when it cannot be packed."""
    if not supports_packing(backbone):
        raise ValueError(
            "Sequence packing needs a keras-hub `BertBackbone`; this encoder's "
            f"backbone is `{type(backbone).__name__}`. Encode with `packing=False`."
        )


def packed_embeddings(encoder, inputs, training=None):
    """Runs `encoder` over packed rows: `(slots, dim)` L2-normalised embeddings.

    It calls the backbone's own embedding, transformer and pooling layers (so
    exact GELU, dtype policies, dropout and trained weights carry over), with
    the positions and the block-diagonal attention mask that packing needs.
    Works on symbolic inputs (`build_packed_model`) and inside a train step
    (`keras_cosent.models.SiameseEncoder`), where gradients reach the same
    variables as the padded path.

    Args:
        encoder: a `keras_cosent.models.SentenceEncoder` on a keras-hub
            `BertBackbone` (see `supports_packing`).
        inputs: dict with the keys of `PACKED_KEYS`, laid out as
            `packed_batches` / `pack_batch` lay them out.
        training: passed to the dropout layers.
    """
    backbone = encoder.backbone
    check_supports_packing(backbone)
    pack_ids = inputs["pack_ids"]
    # Token i attends to token j of its row only if both belong to the same
    # sentence; unused positions (id 0) attend among themselves, so no query
    # row is fully masked.
    attention_mask = ops.equal(ops.expand_dims(pack_ids, 2), ops.expand_dims(pack_ids, 1))
    tokens = backbone.token_embedding(inputs["token_ids"])
    positions = backbone.position_embedding(tokens, positions=inputs["positions"])
    segments = backbone.segment_embedding(inputs["segment_ids"])
    x = backbone.embeddings_add((tokens, positions, segments))
    x = backbone.embeddings_layer_norm(x)
    x = backbone.embeddings_dropout(x, training=training)
    states = []
    for layer in backbone.transformer_layers:
        x = layer(x, attention_mask=attention_mask, training=training)
        states.append(x)

    def unpack(rows):
        # (rows, row_length, dim) -> (slots, row_length, dim), slot by slot.
        flat = ops.reshape(rows, (-1, rows.shape[-1]))
        return ops.take(flat, inputs["gather_index"], axis=0)

    if encoder.pooling == "first_last_avg":
        features = [unpack(states[0]), unpack(states[-1])]
    else:
        features = unpack(states[-1])
    pooled = encoder.pooling_layer(features, inputs["gather_mask"])
    return encoder.normalization(pooled)


def build_packed_model(encoder):
    """A model over packed rows that shares every layer of `encoder`.

    A functional model around `packed_embeddings`: it takes the dicts of
    `packed_batches` and returns `(slots, dim)` L2-normalised embeddings, one
    per gather slot.

    Args:
        encoder: a `keras_cosent.models.SentenceEncoder` on a keras-hub
            `BertBackbone` (see `supports_packing`).

    Returns:
        A functional `keras.Model` taking the dicts of `packed_batches`.
    """
    check_supports_packing(encoder.backbone)
    inputs = {
        key: keras.Input((None,), dtype="bool" if key == "gather_mask" else "int32", name=key)
        for key in PACKED_KEYS
    }
    outputs = packed_embeddings(encoder, inputs)
    # XLA (`jit_compile`) follows the encoder's; `SentenceEncoder` keeps it in step.
    return keras.Model(inputs, outputs, name=f"{encoder.name}_packed")
