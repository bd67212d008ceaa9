"""Packed training batches: layout, and the same function and the same training as padding."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_cosent.data import PairBatches
from keras_cosent.data import PairDataset
from keras_cosent.data.packing import pack_batch
from keras_cosent.data.padding import pad_batch
from keras_cosent.losses import CoSENTLoss
from keras_cosent.models import SiameseEncoder
from tests.models.conftest import make_tiny_encoder
from tests.models.test_sentence_encoder import TEXTS
from tests.models.test_sequence_packing import POOLINGS

# Rows of three columns (anchor, positive, negative), lengths from 2 to 15 tokens:
# the empty text (a PairDataset's anchors and positives may not be blank) is a
# negative only.
NONEMPTY = [text for text in TEXTS if text]
ROWS = [
    (NONEMPTY[i % len(NONEMPTY)], NONEMPTY[(3 * i + 1) % len(NONEMPTY)],
     TEXTS[(5 * i + 2) % len(TEXTS)])
    for i in range(12)
]
SCORES = np.linspace(0.0, 5.0, len(ROWS)).astype("float32")


def _padded(encoder, rows):
    columns = len(rows[0])
    flat = pad_batch(encoder.tokenize([t for row in rows for t in row]))
    return {k: v.reshape(len(rows), columns, -1) for k, v in flat.items()}


def _packed(encoder, rows, row_length=32, rows_multiple=1):
    columns = len(rows[0])
    x = pack_batch(
        encoder.tokenize([t for row in rows for t in row]), row_length, rows_multiple=rows_multiple
    )
    for key in ("gather_index", "gather_mask"):
        x[key] = x[key].reshape(len(rows), columns, row_length)
    return x


@pytest.mark.parametrize("rows_multiple", [1, 3])
def test_pack_batch_keeps_slot_order(rows_multiple):
    rng = np.random.default_rng(1)
    token_lists = [
        np.array([101, *rng.integers(5, 100, size=n), 102], "int32")
        for n in rng.integers(0, 14, size=23)
    ]
    x = pack_batch(token_lists, row_length=16, rows_multiple=rows_multiple)
    volume_rows = -(-sum(len(t) for t in token_lists) // 16)
    assert x["token_ids"].shape[0] % rows_multiple == 0
    assert volume_rows <= x["token_ids"].shape[0] <= volume_rows + 1 + rows_multiple
    assert x["gather_index"].shape == (23, 16)
    flat_tokens = x["token_ids"].reshape(-1)
    flat_positions = x["positions"].reshape(-1)
    flat_ids = x["pack_ids"].reshape(-1)
    taken = []
    for i, ids in enumerate(token_lists):  # slot i is sentence i
        where = x["gather_index"][i][x["gather_mask"][i]]
        np.testing.assert_array_equal(flat_tokens[where], ids)
        np.testing.assert_array_equal(flat_positions[where], np.arange(len(ids)))
        assert len(set(flat_ids[where])) == 1 and flat_ids[where][0] > 0
        taken.extend(where.tolist())
    assert len(set(taken)) == len(taken)  # no position read by two sentences
    assert (flat_ids > 0).sum() == len(taken)
    with pytest.raises(ValueError, match="empty"):
        pack_batch([], row_length=16)


@pytest.mark.parametrize("pooling", POOLINGS)
def test_packed_siamese_call_matches_padded(pooling):
    encoder = make_tiny_encoder(pooling=pooling, dropout=0.1)
    model = SiameseEncoder(encoder)
    padded = ops.convert_to_numpy(model(_padded(encoder, ROWS), training=False))
    packed = ops.convert_to_numpy(model(_packed(encoder, ROWS), training=False))
    assert packed.shape == (len(ROWS), 3, 16)
    np.testing.assert_allclose(packed, padded, atol=1e-5)
    # ... and against the encoder on one column at a time.
    for c in range(3):
        column = encoder.preprocess([row[c] for row in ROWS])
        np.testing.assert_allclose(
            packed[:, c], ops.convert_to_numpy(encoder(column, training=False)), atol=1e-5
        )


def test_packed_call_needs_its_mask():
    encoder = make_tiny_encoder()
    model = SiameseEncoder(encoder)
    x = _packed(encoder, ROWS)
    expected = ops.convert_to_numpy(model(x))
    x["pack_ids"] = np.minimum(x["pack_ids"], 1)  # every sentence of a row sees the others
    assert np.abs(ops.convert_to_numpy(model(x)) - expected).max() > 1e-4


def _batches(encoder, packing, batch_size=4):
    data = PairDataset([[r[0] for r in ROWS], [r[1] for r in ROWS]], SCORES, "rows")
    return PairBatches(
        data, encoder.tokenize, batch_size=batch_size, shuffle=True, seed=3, packing=packing
    )


def _train(packing, epochs=3):
    encoder = make_tiny_encoder(num_layers=2, seed=7)
    model = SiameseEncoder(encoder)
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss=CoSENTLoss())
    history = model.fit(_batches(encoder, packing), epochs=epochs, verbose=0)
    return history.history["loss"], [ops.convert_to_numpy(w) for w in model.trainable_weights]


@pytest.mark.heavy
def test_packed_training_takes_the_same_steps_as_padded():
    # Same start, same batches, no dropout: the same function has the same
    # gradients, so every weight must follow the same path through 9 steps.
    padded_losses, padded_weights = _train(packing=False)
    packed_losses, packed_weights = _train(packing=True)
    np.testing.assert_allclose(packed_losses, padded_losses, rtol=1e-4)
    assert padded_losses[-1] < padded_losses[0]
    # Round-off of the two layouts' sums, grown by Adam's normalised steps: up to
    # 2.7e-5 on a weight of 1.39 on TensorFlow (2e-5 relative); a wrong gradient
    # moves weights by 1e-3 and more (below).
    for before, after in zip(padded_weights, packed_weights):
        np.testing.assert_allclose(after, before, rtol=2e-5, atol=2e-5)
    start = [ops.convert_to_numpy(w) for w in SiameseEncoder(
        make_tiny_encoder(num_layers=2, seed=7)).trainable_weights]
    moved = sum(np.abs(a - b).max() > 1e-3 for a, b in zip(start, packed_weights))
    assert moved > len(start) // 2


def test_pair_batches_packing_layout():
    encoder = make_tiny_encoder()
    batches = _batches(encoder, packing=True, batch_size=5)
    plain = _batches(encoder, packing=False, batch_size=5)
    longest = max(len(t) for t in encoder.tokenize([t for r in ROWS for t in r[:2]]))
    assert batches.row_length >= longest and batches.row_length == plain.row_length
    for index in range(len(batches)):
        x, y = batches[index]
        px, py = plain[index]
        np.testing.assert_array_equal(y, py)  # the same rows, in the same order
        n = len(y)
        assert x["gather_index"].shape == (n, 2, batches.row_length)
        assert x["token_ids"].shape[1] == batches.row_length
        assert x["token_ids"].shape[0] % batches.rows_multiple == 0
        # Every sentence of the padded batch, token for token, in its slot.
        flat = x["token_ids"].reshape(-1)
        for r in range(n):
            for c in range(2):
                where = x["gather_index"][r, c][x["gather_mask"][r, c]]
                np.testing.assert_array_equal(
                    flat[where], px["token_ids"][r, c][px["padding_mask"][r, c]]
                )
    assert batches.num_tokens == plain.num_tokens
    positions = sum(batches[i][0]["token_ids"].size for i in range(len(batches)))
    assert batches.padding_ratio == pytest.approx(1 - batches.num_tokens / positions)
    assert batches.padding_ratio < plain.padding_ratio


def test_packing_arguments_are_checked():
    encoder = make_tiny_encoder()
    data = PairDataset([["a cat"], ["a dog"]], np.array([1.0], "float32"), "one")
    with pytest.raises(ValueError, match=r"`packing`='yes'"):
        PairBatches(data, encoder.tokenize, batch_size=1, packing="yes")
    with pytest.raises(ValueError, match=r"`rows_multiple`=0"):
        PairBatches(data, encoder.tokenize, batch_size=1, packing=True, rows_multiple=0)
    model = SiameseEncoder(encoder)
    x = _packed(encoder, ROWS)
    flat = dict(x, gather_index=x["gather_index"].reshape(-1, 32))
    with pytest.raises(ValueError, match=r"`gather_index` of shape \(batch, columns, row_length\)"):
        model(flat)
    del x["positions"]
    with pytest.raises(ValueError, match=r"needs \['positions'\]"):
        model(x)
