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

`pack_lengths`, `packed_batches` and `pack_batch` are host-side NumPy;
`packed_embeddings` reuses the encoder's own layers (weights shared, nothing
copied) for keras-hub `BertBackbone`s, the structure it knows how to rewire.
"""

import keras
import numpy as np
from keras import ops


def pack_lengths(lengths, row_length):
    """Assigns sequences to rows of `row_length` tokens, best fit decreasing.

    Sequences are placed longest first, each into the row whose free space it
    fills most tightly (a new row when none has room): the classic bin-packing
    heuristic, never more than 11/9 of the fewest rows possible, plus one.

    Args:
        lengths: sequence of ints, the token count of each sequence (>= 1).
        row_length: int, tokens per row; every length must fit.

    Returns:
        A list of rows, each a list of indices into `lengths` in placement order.

    Example:

    >>> from keras_cosent.models.sequence_packing import pack_lengths
    >>> pack_lengths([5, 3, 4, 2, 2], row_length=8)
    [[0, 1], [2, 3, 4]]
    """
    row_length = int(row_length)
    lengths = [int(n) for n in lengths]
    for i, n in enumerate(lengths):
        if not 1 <= n <= row_length:
            raise ValueError(
                f"Sequence {i} has {n} tokens; `row_length`={row_length} needs "
                "every sequence to have between 1 and row_length tokens."
            )
    rows = []
    free = []
    # rows_with_free[c]: the rows with exactly c free tokens, so best fit is a
    # scan over at most row_length counts rather than over every row.
    rows_with_free = [[] for _ in range(row_length + 1)]
    for i in np.argsort([-n for n in lengths], kind="stable"):
        n = lengths[i]
        row = None
        for capacity in range(n, row_length + 1):
            if rows_with_free[capacity]:
                row = rows_with_free[capacity].pop()
                break
        if row is None:
            row = len(rows)
            rows.append([])
            free.append(row_length)
        rows[row].append(int(i))
        free[row] -= n
        rows_with_free[free[row]].append(row)
    return rows


def packed_batches(token_lists, row_length, rows_per_batch, pad_id=0, slot_multiple=8):
    """Packs tokenised sentences into equally shaped model inputs.

    Args:
        token_lists: list of 1-D int arrays (special tokens included).
        row_length: int, tokens per packed row (at least the longest sequence).
        rows_per_batch: int, rows per forward pass.
        pad_id: id written into unused row positions.
        slot_multiple: the number of sentence slots per pass (the most sentences
            any pass holds) is rounded up to a multiple of this, so that inputs
            of similar size share compiled functions.

    Yields:
        One `(inputs, indices)` per forward pass, built when asked for, so a
        large corpus is never laid out in memory at once. `inputs` is a dict of
        numpy arrays, `token_ids`, `positions`, `segment_ids`, `pack_ids` of shape
        `(rows_per_batch, row_length)` (`pack_ids` numbers the sentences of a
        row from 1, 0 marks unused positions) and `gather_index`,
        `gather_mask` of shape `(slots, row_length)` (where each slot's tokens
        sit in the flattened rows); `indices` the positions in `token_lists` of
        the sentences in slot order. Every pass has the same shapes: the last
        is filled with empty rows and slots.
    """
    rows = pack_lengths([len(ids) for ids in token_lists], row_length)
    groups = [rows[i : i + rows_per_batch] for i in range(0, len(rows), rows_per_batch)]
    slots = max(sum(len(row) for row in group) for group in groups)
    slots = -(-slots // slot_multiple) * slot_multiple
    for group in groups:
        indices = [i for row in group for i in row]
        slot_of = {i: slot for slot, i in enumerate(indices)}
        inputs = _lay_out(token_lists, group, rows_per_batch, row_length, slots, slot_of, pad_id)
        yield inputs, np.asarray(indices, dtype="int64")


def pack_batch(token_lists, row_length, pad_id=0, rows_multiple=1):
    """Packs one training batch: sentence `i` of `token_lists` is slot `i`.

    Unlike `packed_batches` (inference over a corpus, in passes of a fixed
    number of rows), a training batch is packed into as few rows as it needs,
    rounded up to `rows_multiple` so that a compiled train step sees few
    distinct shapes, and its slots keep the input order, so the embeddings
    come out in the order the loss expects.

    Args:
        token_lists: list of 1-D int arrays (special tokens included).
        row_length: int, tokens per row (at least the longest sequence).
        pad_id: id written into unused row positions.
        rows_multiple: round the number of rows up to a multiple of this
            (with empty rows).

    Returns:
        A dict of numpy arrays: `token_ids`, `positions`, `segment_ids`,
        `pack_ids` of shape `(rows, row_length)` and `gather_index`,
        `gather_mask` of shape `(len(token_lists), row_length)`, as in
        `packed_batches`.

    Example:

    >>> import numpy as np
    >>> from keras_cosent.models.sequence_packing import pack_batch
    >>> out = pack_batch([np.array([101, 7, 102]), np.array([101, 102])], row_length=6)
    >>> out["token_ids"].tolist(), out["pack_ids"].tolist()
    ([[101, 7, 102, 101, 102, 0]], [[1, 1, 1, 2, 2, 0]])
    >>> out["gather_index"][1].tolist()
    [3, 4, 0, 0, 0, 0]
    """
    if len(token_lists) == 0:
        raise ValueError("`token_lists` is empty: cannot pack an empty batch.")
    rows = pack_lengths([len(ids) for ids in token_lists], row_length)
    num_rows = -(-len(rows) // rows_multiple) * rows_multiple
    slot_of = {i: i for i in range(len(token_lists))}
    return _lay_out(token_lists, rows, num_rows, row_length, len(token_lists), slot_of, pad_id)


def _lay_out(token_lists, rows, num_rows, row_length, slots, slot_of, pad_id):
    """The packed input arrays for `rows` (lists of indices into `token_lists`).

    Rows past `len(rows)` and slots no sentence takes stay empty.
    """
    shape = (num_rows, row_length)
    token_ids = np.full(shape, pad_id, dtype="int32")
    positions = np.zeros(shape, dtype="int32")
    pack_ids = np.zeros(shape, dtype="int32")
    gather_index = np.zeros((slots, row_length), dtype="int32")
    gather_mask = np.zeros((slots, row_length), dtype=bool)
    # An empty slot reads one real position, so that no pooling sees an
    # all-False mask (a max over nothing is -inf); its output is dropped.
    gather_mask[:, 0] = True
    for r, row in enumerate(rows):
        offset = 0
        for k, i in enumerate(row):
            ids = token_lists[i]
            n = len(ids)
            token_ids[r, offset : offset + n] = ids
            positions[r, offset : offset + n] = np.arange(n)
            pack_ids[r, offset : offset + n] = k + 1
            slot = slot_of[i]
            gather_index[slot, :n] = r * row_length + offset + np.arange(n)
            gather_mask[slot, :n] = True
            offset += n
    return {
        "token_ids": token_ids,
        "positions": positions,
        "segment_ids": np.zeros_like(token_ids),
        "pack_ids": pack_ids,
        "gather_index": gather_index,
        "gather_mask": gather_mask,
    }


def supports_packing(backbone):
    """Whether `build_packed_model` can rewire this backbone (keras-hub BERT)."""
    import keras_hub

    return isinstance(backbone, keras_hub.models.BertBackbone)


def check_supports_packing(backbone):
    """Raises the ValueError that names the backbone when it cannot be packed."""
    if not supports_packing(backbone):
        raise ValueError(
            "Sequence packing needs a keras-hub `BertBackbone`; this encoder's "
            f"backbone is a {type(backbone).__name__}. Encode with `packing=False`."
        )


PACKED_KEYS = ("token_ids", "positions", "segment_ids", "pack_ids", "gather_index", "gather_mask")


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
