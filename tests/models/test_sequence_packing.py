"""Sequence packing: the bin packing, the packed inputs, and packed `encode` vs padded."""

import keras
import numpy as np
import pytest

from keras_cosent.data import packing
from keras_cosent.data.packing import pack_lengths
from keras_cosent.data.packing import packed_batches
from tests.models.conftest import make_tiny_encoder
from tests.models.test_sentence_encoder import TEXTS


def _reference_best_fit_decreasing(lengths, row_length):
    # The textbook loop: scan every open row, take the one left with least room.
    free = []
    for n in sorted(lengths, reverse=True):
        fits = [r for r, f in enumerate(free) if f >= n]
        if fits:
            best = min(fits, key=lambda r: free[r])
            free[best] -= n
        else:
            free.append(row_length - n)
    return sorted(row_length - f for f in free)


@pytest.mark.parametrize("seed", range(5))
def test_pack_lengths_is_best_fit_decreasing(seed):
    rng = np.random.default_rng(seed)
    row_length = 64
    lengths = rng.integers(3, 65, size=300).tolist()
    rows = pack_lengths(lengths, row_length)
    placed = sorted(i for row in rows for i in row)
    assert placed == list(range(len(lengths)))  # each sequence exactly once
    fill = [sum(lengths[i] for i in row) for row in rows]
    assert max(fill) <= row_length
    # Ties between rows with equal room may be broken differently; the fills may not.
    assert sorted(fill) == _reference_best_fit_decreasing(lengths, row_length)
    # Never worse than 11/9 of the volume bound, plus one row.
    assert len(rows) <= 11 / 9 * np.ceil(sum(lengths) / row_length) + 1


def test_pack_lengths_example():
    import doctest

    result = doctest.testmod(packing, verbose=False)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("lengths", [[3, 9, 2], [3, 0]])
def test_pack_lengths_rejects_what_does_not_fit(lengths):
    with pytest.raises(ValueError, match=r"Sequence 1 has \d+ tokens; `row_length`=8"):
        pack_lengths(lengths, 8)


def test_packing_nothing_is_refused():
    with pytest.raises(ValueError, match="`token_lists` is empty"):
        list(packed_batches([], row_length=16, rows_per_batch=3))


@pytest.mark.parametrize("multiple", [0, -8, 2.5, True])
def test_the_padding_multiple_is_checked(multiple):
    from keras_cosent.data.padding import pad_batch

    with pytest.raises(ValueError, match=f"`pad_to_multiple_of`={multiple!r}"):
        pad_batch([[101, 7, 102]], pad_to_multiple_of=multiple)


def test_packed_batches_lay_out_each_sentence_whole():
    rng = np.random.default_rng(0)
    token_lists = [
        np.array([101, *rng.integers(5, 100, size=n), 102], "int32")
        for n in rng.integers(0, 14, size=37)
    ]
    batches = list(packed_batches(token_lists, row_length=16, rows_per_batch=3, pad_id=0))
    assert len(batches) > 2
    # One shape per input for every pass, the last one included.
    for name in batches[0][0]:
        assert len({inputs[name].shape for inputs, _ in batches}) == 1, name
    assert batches[0][0]["token_ids"].shape == (3, 16)
    assert batches[0][0]["gather_index"].shape[0] % 8 == 0
    seen = []
    for inputs, index in batches:
        flat_tokens = inputs["token_ids"].reshape(-1)
        flat_positions = inputs["positions"].reshape(-1)
        flat_pack_ids = inputs["pack_ids"].reshape(-1)
        for slot, i in enumerate(index):
            mask = inputs["gather_mask"][slot]
            where = inputs["gather_index"][slot][mask]
            np.testing.assert_array_equal(flat_tokens[where], token_lists[i])
            np.testing.assert_array_equal(flat_positions[where], np.arange(len(token_lists[i])))
            # One sentence id, not 0, shared by no other sentence of the row.
            assert len(set(flat_pack_ids[where])) == 1 and flat_pack_ids[where][0] > 0
            row = where[0] // 16
            same = inputs["pack_ids"][row] == flat_pack_ids[where][0]
            assert same.sum() == len(token_lists[i])
        # Unused positions hold padding with sentence id 0.
        unused = inputs["pack_ids"] == 0
        assert (inputs["token_ids"][unused] == 0).all()
        assert not inputs["segment_ids"].any()
        seen.extend(index.tolist())
    assert sorted(seen) == list(range(len(token_lists)))


# Mean (the default), CLS (position 0 of each packed sentence) and first-last
# (a second layer's output) in the default run; the other poolings, whose packed
# path is the masked reduction mean already takes, on demand (-m slow).
POOLINGS = [
    "cls",
    *(pytest.param(p, marks=pytest.mark.heavy) for p in ("mean", "first_last_avg")),
    *(pytest.param(p, marks=pytest.mark.slow) for p in ("max", "mean_sqrt_len", "weighted_mean")),
]


@pytest.mark.parametrize("pooling", POOLINGS)
def test_packed_encode_matches_padded_encode_and_call(pooling):
    # Dropout in the config: encode must still be deterministic inference.
    encoder = make_tiny_encoder(pooling=pooling, dropout=0.1)
    texts = TEXTS * 3
    padded = encoder.encode(texts, batch_size=4, packing=False)
    packed = encoder.encode(texts, batch_size=4, packing=True)
    np.testing.assert_allclose(packed, padded, atol=1e-5)
    # The padded path itself against one direct call on a padded batch.
    direct = keras.ops.convert_to_numpy(encoder(encoder.preprocess(texts), training=False))
    np.testing.assert_allclose(packed, direct, atol=1e-5)
    # Other pass sizes change the packing, not the result.
    np.testing.assert_allclose(encoder.encode(texts, batch_size=1), padded, atol=1e-5)
    np.testing.assert_allclose(encoder.encode(texts, batch_size=500), padded, atol=1e-5)


def test_attention_stays_inside_each_sentence(monkeypatch):
    # Without the block-diagonal mask, sentences sharing a row would mix.
    encoder = make_tiny_encoder()
    expected = encoder.encode(TEXTS, packing=False)
    original = packing.packed_batches

    def one_sentence_id_per_row(*args, **kwargs):
        for inputs, index in original(*args, **kwargs):
            inputs["pack_ids"][:] = 1
            yield inputs, index

    monkeypatch.setattr(packing, "packed_batches", one_sentence_id_per_row)
    mixed = encoder.encode(TEXTS, packing=True)
    assert np.abs(mixed - expected).max() > 1e-4


# Two encodes per path and a save and reload: 35 s on TensorFlow; the packed and padded
# paths are compared on every backend by the tests above.
@pytest.mark.heavy
def test_packed_model_is_shared_and_not_saved(tmp_path):
    encoder = make_tiny_encoder()
    n_weights = len(encoder.weights)
    before = encoder.encode(TEXTS)
    assert len(encoder.weights) == n_weights
    packed = encoder._packed_model()
    assert packed is encoder._packed_model()  # built once
    assert {id(w) for w in packed.weights} <= {id(w) for w in encoder.weights}
    # A weight change is seen by the next packed call, as by the padded path.
    encoder.backbone.token_embedding.embeddings.assign(
        encoder.backbone.token_embedding.embeddings * 0.5
    )
    after = encoder.encode(TEXTS)
    assert np.abs(after - before).max() > 1e-4
    np.testing.assert_allclose(after, encoder.encode(TEXTS, packing=False), atol=1e-5)
    path = tmp_path / "encoder.keras"
    encoder.save(path)
    reloaded = keras.saving.load_model(path)
    assert len(reloaded.weights) == n_weights
    np.testing.assert_allclose(reloaded.encode(TEXTS), after, atol=1e-5)


def test_packing_argument_is_checked():
    import keras_hub

    from keras_cosent.models import SentenceEncoder
    from tests.models.conftest import VOCAB

    encoder = make_tiny_encoder()
    with pytest.raises(ValueError, match=r"`packing`='yes'"):
        encoder.encode(TEXTS, packing="yes")
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    backbone = keras_hub.models.DistilBertBackbone(
        vocabulary_size=len(VOCAB), num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16,
    )
    other = SentenceEncoder(backbone, tokenizer, max_length=16)
    with pytest.raises(ValueError, match="needs a keras-hub `BertBackbone`.*backbone is `DistilBertBackbone`"):
        other.encode(TEXTS, packing=True)
    # Left to None, such a backbone takes the padded path.
    out = other.encode(TEXTS)
    assert out.shape == (len(TEXTS), 8)
    np.testing.assert_allclose(out, other.encode(TEXTS, packing=False), atol=1e-6)


def test_packed_model_follows_the_encoders_xla_setting():
    encoder = make_tiny_encoder()
    expected = encoder.jit_compile is True  # XLA on JAX/TensorFlow, eager on torch
    assert encoder._packed_model().jit_compile is expected
    before = encoder.encode(TEXTS)
    encoder.compile(loss="mse", jit_compile=False)
    assert encoder._packed_model().jit_compile is False
    np.testing.assert_allclose(encoder.encode(TEXTS), before, atol=1e-5)
