"""Pooling layers against NumPy references written here, on random inputs and masks."""

import re

import keras
import numpy as np
import pytest
from keras import ops

import keras_cosent
from keras_cosent.layers import CLSPooling
from keras_cosent.layers import FirstLastAveragePooling
from keras_cosent.layers import L2Normalization
from keras_cosent.layers import MaxPooling
from keras_cosent.layers import MeanPooling
from keras_cosent.layers import MeanSqrtLenPooling
from keras_cosent.layers import WeightedMeanPooling
from keras_cosent.layers import get_pooling
from tests import kit


def _random_batch(batch=5, seq=7, dim=4, prefix=True, dtype="float32"):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, seq, dim)).astype(dtype)
    if prefix:
        lengths = rng.integers(1, seq + 1, size=batch)
        lengths[0] = seq  # one full row
        mask = np.arange(seq)[None, :] < lengths[:, None]
    else:
        mask = rng.random((batch, seq)) < 0.6
        mask[:, 0] = True
    return x, mask


# Independent references: explicit loops over tokens, float64.
def ref_mean(x, mask):
    out = np.zeros((x.shape[0], x.shape[2]))
    for b in range(x.shape[0]):
        rows = [x[b, t].astype("float64") for t in range(x.shape[1]) if mask[b, t]]
        out[b] = np.mean(rows, axis=0) if rows else 0.0
    return out


def ref_max(x, mask):
    out = np.zeros((x.shape[0], x.shape[2]))
    for b in range(x.shape[0]):
        rows = [x[b, t].astype("float64") for t in range(x.shape[1]) if mask[b, t]]
        out[b] = np.max(rows, axis=0) if rows else 0.0
    return out


def ref_mean_sqrt_len(x, mask):
    out = np.zeros((x.shape[0], x.shape[2]))
    for b in range(x.shape[0]):
        rows = [x[b, t].astype("float64") for t in range(x.shape[1]) if mask[b, t]]
        out[b] = np.sum(rows, axis=0) / np.sqrt(len(rows)) if rows else 0.0
    return out


def ref_weighted_mean(x, mask):
    out = np.zeros((x.shape[0], x.shape[2]))
    for b in range(x.shape[0]):
        real = [t for t in range(x.shape[1]) if mask[b, t]]
        weights = np.arange(1, len(real) + 1, dtype="float64")
        if real:
            out[b] = (weights[:, None] * x[b, real].astype("float64")).sum(0) / weights.sum()
    return out


def ref_sentence_transformers_weighted_mean(x, mask):
    # sentence-transformers: weights = absolute positions 1..seq times the mask.
    w = np.arange(1, x.shape[1] + 1)[None, :, None] * mask[:, :, None]
    return (x * w).sum(1) / np.maximum(w.sum(1), 1e-9)


POOLINGS = [
    (MeanPooling, ref_mean),
    (MaxPooling, ref_max),
    (MeanSqrtLenPooling, ref_mean_sqrt_len),
    (WeightedMeanPooling, ref_weighted_mean),
]


@pytest.mark.parametrize("prefix", [True, False], ids=["right_padded", "random_mask"])
@pytest.mark.parametrize("layer_cls,reference", POOLINGS, ids=lambda v: getattr(v, "__name__", ""))
def test_matches_reference(layer_cls, reference, prefix):
    x, mask = _random_batch(prefix=prefix)
    out = layer_cls()(x, mask)
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    np.testing.assert_allclose(ops.convert_to_numpy(out), reference(x, mask), atol=1e-5)
    # int 0/1 masks work like bool ones
    out_int = layer_cls()(x, mask.astype("int32"))
    np.testing.assert_allclose(ops.convert_to_numpy(out_int), reference(x, mask), atol=1e-5)


@pytest.mark.parametrize("layer_cls,reference", POOLINGS, ids=lambda v: getattr(v, "__name__", ""))
def test_no_mask_uses_every_token(layer_cls, reference):
    x, _ = _random_batch()
    full = np.ones(x.shape[:2], dtype=bool)
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer_cls()(x)), reference(x, full), atol=1e-5
    )


def test_weighted_mean_equals_sentence_transformers_on_right_padding():
    x, mask = _random_batch(prefix=True)
    out = ops.convert_to_numpy(WeightedMeanPooling()(x, mask))
    np.testing.assert_allclose(out, ref_sentence_transformers_weighted_mean(x, mask), atol=1e-5)


def test_cls_pooling_takes_first_token():
    x, mask = _random_batch()
    np.testing.assert_allclose(ops.convert_to_numpy(CLSPooling()(x, mask)), x[:, 0], atol=0)


@pytest.mark.parametrize("prefix", [True, False])
def test_first_last_average(prefix):
    x, mask = _random_batch(prefix=prefix)
    last = np.random.default_rng(1).normal(size=x.shape).astype("float32")
    out = FirstLastAveragePooling()([x, last], mask)
    np.testing.assert_allclose(ops.convert_to_numpy(out), ref_mean((x + last) / 2, mask), atol=1e-5)


def test_first_last_average_rejects_single_tensor():
    x, mask = _random_batch()
    with pytest.raises(ValueError, match="first_layer_output"):
        FirstLastAveragePooling()(x, mask)


@pytest.mark.parametrize("other", [(5, 7, 1), (5, 6, 4), (5, 7)])
def test_first_last_average_names_two_outputs_of_different_shapes(other):
    # Each backend raised its own broadcasting error, or broadcast (5, 7, 1)
    # silently: the layer names the two shapes.
    x, mask = _random_batch()
    last = np.zeros(other, "float32")
    with pytest.raises(ValueError, match=r"two layer outputs of one shape. Received shapes"):
        FirstLastAveragePooling()([x, last], mask)


@pytest.mark.parametrize("layer_cls", [MeanPooling, MaxPooling, MeanSqrtLenPooling,
                                       WeightedMeanPooling, CLSPooling])
def test_a_mask_or_input_of_the_wrong_shape_is_named(layer_cls):
    # It used to reach the backend's broadcast error (CLS pooling took any mask).
    x, mask = _random_batch()  # (5, 7, 4), (5, 7)
    with pytest.raises(ValueError, match=r"`padding_mask` should have shape \(batch, seq\) = "
                                         r"\(5, 7\).*Received `padding_mask` of shape \(5, 6\)"):
        layer_cls()(x, mask[:, :6])
    with pytest.raises(ValueError, match=r"shape \(5, 7, 1\)"):
        layer_cls()(x, mask[:, :, None])
    with pytest.raises(ValueError, match=r"\(batch, seq, dim\). Received `inputs` of shape "
                                         r"\(5, 7\)"):
        layer_cls()(x[:, :, 0], mask)


@pytest.mark.parametrize("layer_cls,reference", POOLINGS, ids=lambda v: getattr(v, "__name__", ""))
def test_a_mask_selects_tokens_and_does_not_weigh_them(layer_cls, reference):
    x, mask = _random_batch(prefix=False)
    weights = np.where(mask, 2.0, 0.0).astype("float32")  # 0/2 instead of 0/1
    np.testing.assert_allclose(ops.convert_to_numpy(layer_cls()(x, weights)),
                               reference(x, mask), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layer_cls", [MeanPooling, MaxPooling, MeanSqrtLenPooling, WeightedMeanPooling])
def test_all_masked_row_is_zero_and_finite(layer_cls):
    x, mask = _random_batch()
    mask[2] = False
    out = ops.convert_to_numpy(layer_cls()(x, mask))
    assert np.all(np.isfinite(out))
    np.testing.assert_array_equal(out[2], 0.0)


def test_max_pooling_ignores_large_padded_values():
    x, mask = _random_batch()
    x = np.where(mask[:, :, None], x, 1e4).astype("float32")
    np.testing.assert_allclose(ops.convert_to_numpy(MaxPooling()(x, mask)), ref_max(x, mask), atol=1e-5)


@pytest.mark.parametrize("layer_cls,reference", POOLINGS, ids=lambda v: getattr(v, "__name__", ""))
def test_float16_inputs_give_float32(layer_cls, reference):
    x, mask = _random_batch(seq=64, dim=8, dtype="float16")
    x = x * 100  # sums of 64 such values lose digits in float16
    out = layer_cls()(x, mask)
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    np.testing.assert_allclose(ops.convert_to_numpy(out), reference(x, mask), rtol=1e-5, atol=1e-4)


def test_float16_under_mixed_precision_policy():
    x, mask = _random_batch(dtype="float16")
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        out = MeanPooling()(x, mask)
    finally:
        keras.config.set_dtype_policy(previous)
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    np.testing.assert_allclose(ops.convert_to_numpy(out), ref_mean(x, mask), atol=1e-5)


def test_l2_normalization():
    x = np.random.default_rng(0).normal(size=(4, 6)).astype("float16")
    x[1] = 0.0
    out = L2Normalization()(x)
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    x64 = x.astype("float64")
    norms = np.linalg.norm(x64, axis=1, keepdims=True)
    expected = np.divide(x64, norms, out=np.zeros_like(x64), where=norms > 0)
    np.testing.assert_allclose(ops.convert_to_numpy(out), expected, atol=1e-6)


@pytest.mark.parametrize("epsilon", [0, -1e-12, float("nan"), float("inf"), True, "1e-12"])
def test_l2_normalization_rejects_bad_epsilon(epsilon):
    # NaN made every output NaN, inf every output 0, and True was read as 1.
    with pytest.raises(ValueError, match=re.escape(f"`epsilon`={epsilon!r}")):
        L2Normalization(epsilon=epsilon)


@pytest.mark.parametrize("axis", ["x", True, 1.0])
def test_l2_normalization_rejects_an_axis_that_is_not_an_int(axis):
    with pytest.raises(ValueError, match=r"`axis` should be an int. Received: `axis`="):
        L2Normalization(axis=axis)


@pytest.mark.parametrize(
    "name,cls",
    [
        ("mean", MeanPooling),
        ("cls", CLSPooling),
        ("max", MaxPooling),
        ("mean_sqrt_len", MeanSqrtLenPooling),
        ("weighted_mean", WeightedMeanPooling),
        ("first_last_avg", FirstLastAveragePooling),
    ],
)
def test_get_pooling(name, cls):
    layer = get_pooling(name, name="pool")
    assert type(layer) is cls and layer.name == "pool"


def test_get_pooling_rejects_unknown():
    with pytest.raises(ValueError, match="'avg'.*Expected one of"):
        get_pooling("avg")
    # A list is unhashable: a TypeError from the table lookup before.
    with pytest.raises(ValueError, match=r"Unknown pooling \['mean'\]"):
        get_pooling(["mean"])


@pytest.mark.parametrize(
    "layer",
    [MeanPooling(), CLSPooling(), MaxPooling(), MeanSqrtLenPooling(), WeightedMeanPooling(),
     FirstLastAveragePooling(), L2Normalization(axis=1, epsilon=1e-6)],
    ids=lambda l: type(l).__name__,
)
def test_serialization_round_trip(layer):
    config = keras.saving.serialize_keras_object(layer)
    assert config["module"] is None or "keras_cosent" in str(config)
    restored = keras.saving.deserialize_keras_object(config)
    assert type(restored) is type(layer)
    assert restored.get_config() == layer.get_config()


def test_in_saved_model(tmp_path):
    x, mask = _random_batch()
    seq_in = keras.Input((None, 4))
    mask_in = keras.Input((None,), dtype="bool")
    out = L2Normalization()(MeanPooling()(seq_in, mask_in))
    model = keras.Model([seq_in, mask_in], out)
    path = tmp_path / "pool.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_allclose(
        ops.convert_to_numpy(restored([x, mask])), ops.convert_to_numpy(model([x, mask])), atol=1e-6
    )
    assert any(isinstance(l, MeanPooling) for l in restored.layers)


def test_fit_step_through_pooling_lowers_loss():
    x, mask = _random_batch(batch=16, seq=6, dim=4)
    target = ref_mean(x, mask)[:, :1].astype("float32") * 3.0
    seq_in = keras.Input((None, 4))
    mask_in = keras.Input((None,), dtype="bool")
    hidden = keras.layers.Dense(4)(seq_in)
    out = keras.layers.Dense(1)(MaxPooling()(hidden, mask_in) + WeightedMeanPooling()(hidden, mask_in))
    model = keras.Model([seq_in, mask_in], out)
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    # One batch per epoch: epoch 1's loss is the loss before any update.
    losses = model.fit([x, mask], target, epochs=10, batch_size=16, verbose=0).history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]


def test_public_names():
    for name in ["MeanPooling", "CLSPooling", "MaxPooling", "MeanSqrtLenPooling",
                 "WeightedMeanPooling", "FirstLastAveragePooling", "L2Normalization", "get_pooling"]:
        assert hasattr(keras_cosent.layers, name)


def ref_cls(x, mask):
    return x[:, 0].astype("float64")


def ref_l2(x):
    x64 = np.asarray(x, "float64")
    norms = np.linalg.norm(x64, axis=-1, keepdims=True)
    return np.divide(x64, norms, out=np.zeros_like(x64), where=norms > 0)


@pytest.mark.parametrize(
    "layer_cls,reference", POOLINGS + [(CLSPooling, ref_cls)],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_kit(layer_cls, reference, tmp_path):
    """The shared checks (tests/kit.py): reference, serialisation, .keras, mixed_float16."""
    x, mask = _random_batch()
    kit.run_layer_test(layer_cls(), (x, mask), reference(x, mask), tmp_path=tmp_path)


def test_kit_first_last_average(tmp_path):
    x, mask = _random_batch()
    last = x[::-1].copy()
    expected = (ref_mean(x, mask) + ref_mean(last, mask)) / 2
    kit.run_layer_test(FirstLastAveragePooling(), ([x, last], mask), expected, tmp_path=tmp_path)


def test_kit_l2_normalization(tmp_path):
    x = np.random.default_rng(0).normal(size=(4, 6)).astype("float32")
    kit.run_layer_test(L2Normalization(), (x,), ref_l2(x), tmp_path=tmp_path)
