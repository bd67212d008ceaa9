"""SoftmaxClassifierHead: logits of concat(u, v, |u - v|), config and saving."""

import json
import re

import keras
import numpy as np
import pytest

import keras_cosent
from keras_cosent.layers import SoftmaxClassifierHead
from tests import kit


def test_logits_match_numpy():
    pairs = np.random.default_rng(0).normal(size=(5, 2, 4)).astype("float32")
    head = SoftmaxClassifierHead(num_labels=3, bias_initializer="random_normal")
    logits = keras.ops.convert_to_numpy(head(pairs))
    kernel = keras.ops.convert_to_numpy(head.dense.kernel).astype("float64")
    bias = keras.ops.convert_to_numpy(head.dense.bias).astype("float64")
    assert kernel.shape == (12, 3)
    u, v = pairs[:, 0].astype("float64"), pairs[:, 1].astype("float64")
    expected = np.concatenate([u, v, np.abs(u - v)], axis=1) @ kernel + bias
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-6)


def test_identical_embeddings_get_the_subgradient_zero_of_abs_on_every_backend():
    # A pair of identical sentences: |u - v| at 0, where JAX's abs took the
    # derivative 1 and torch.abs (the peer's head, the reference) takes 0.
    import torch

    from tests.losses import helpers

    pairs = np.random.default_rng(1).normal(size=(3, 2, 4)).astype("float32")
    pairs[1, 1] = pairs[1, 0]
    pairs[2, 1, :2] = pairs[2, 0, :2]
    head = SoftmaxClassifierHead(num_labels=3, bias_initializer="random_normal")
    head.build(pairs.shape)
    kernel = keras.ops.convert_to_numpy(head.dense.kernel).astype("float64")
    bias = keras.ops.convert_to_numpy(head.dense.bias).astype("float64")
    weights = np.random.default_rng(2).normal(size=(3, 3))
    _, grad = helpers.value_and_grad(
        lambda p: keras.ops.sum(head(p) * keras.ops.convert_to_tensor(weights, "float32")),
        pairs)
    t = torch.tensor(pairs, dtype=torch.float64, requires_grad=True)
    u, v = t[:, 0], t[:, 1]
    logits = torch.cat([u, v, torch.abs(u - v)], dim=1) @ torch.tensor(kernel) + torch.tensor(bias)
    (logits * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(grad, t.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_output_shape_and_bad_input_shape():
    head = SoftmaxClassifierHead(num_labels=3)
    assert head.compute_output_shape((None, 2, 8)) == (None, 3)
    with pytest.raises(ValueError, match=re.escape("(batch, 2, dim)")):
        head(np.zeros((4, 3, 8), "float32"))


@pytest.mark.parametrize("num_labels", [1, 0, 3.0, None])
def test_bad_num_labels_is_rejected_with_its_value(num_labels):
    with pytest.raises(ValueError, match=re.escape(f"`num_labels`={num_labels!r}")):
        SoftmaxClassifierHead(num_labels=num_labels)


def test_a_numpy_integer_num_labels_is_taken_as_an_int():
    head = SoftmaxClassifierHead(num_labels=np.int64(3))
    assert type(head.num_labels) is int
    assert head(np.zeros((2, 2, 8), "float32")).shape == (2, 3)
    json.dumps(head.get_config())  # a NumPy integer in the config would not serialize


def test_config_round_trip():
    head = SoftmaxClassifierHead(num_labels=4, kernel_initializer="zeros", name="nli_head")
    config = keras.saving.serialize_keras_object(head)
    assert config["registered_name"] == "keras_cosent>SoftmaxClassifierHead"
    restored = keras.saving.deserialize_keras_object(config)
    assert isinstance(restored, SoftmaxClassifierHead)
    assert restored.get_config() == head.get_config()
    assert restored.num_labels == 4


def test_saved_model_keeps_weights(tmp_path):
    pairs = keras.Input((2, 6))
    model = keras.Model(pairs, keras_cosent.layers.SoftmaxClassifierHead(3)(pairs))
    path = str(tmp_path / "head.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    x = np.random.default_rng(1).normal(size=(4, 2, 6)).astype("float32")
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(reloaded(x)), keras.ops.convert_to_numpy(model(x)), rtol=1e-6
    )


def test_kit(tmp_path):
    """The shared checks (tests/kit.py); under mixed_float16 the logits are float16."""
    pairs = np.random.default_rng(0).normal(size=(5, 2, 4)).astype("float32")
    head = SoftmaxClassifierHead(num_labels=3, bias_initializer="random_normal")
    head.build(pairs.shape)
    kernel = keras.ops.convert_to_numpy(head.dense.kernel).astype("float64")
    bias = keras.ops.convert_to_numpy(head.dense.bias).astype("float64")
    u, v = pairs[:, 0].astype("float64"), pairs[:, 1].astype("float64")
    expected = np.concatenate([u, v, np.abs(u - v)], axis=1) @ kernel + bias
    kit.run_layer_test(head, (pairs,), expected, output_dtype=None, tmp_path=tmp_path)
