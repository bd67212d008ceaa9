"""`keras_cosent.optimizers`: AdamW and TorchFusedAdamW against torch.optim.AdamW and the rule in NumPy."""

import doctest
import json

import keras
import numpy as np
import pytest

import importlib

from keras_cosent.optimizers import NO_WEIGHT_DECAY
from keras_cosent.optimizers import AdamW
from keras_cosent.optimizers import TorchFusedAdamW
from keras_cosent.optimizers import WarmupLinearDecay
from keras_cosent.optimizers import adamw

ON_TORCH = keras.backend.backend() == "torch"
torch_only = pytest.mark.skipif(not ON_TORCH, reason="TorchFusedAdamW needs the torch backend")


def numpy_adamw(params, grads_per_step, lrs, weight_decay, decayed, beta_1=0.9, beta_2=0.999,
                epsilon=1e-8):
    """torch.optim.AdamW's documented algorithm: decoupled decay, then Adam with
    epsilon added to the bias-corrected sqrt(v)."""
    params = [p.astype(np.float64) for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t, (grads, lr) in enumerate(zip(grads_per_step, lrs), start=1):
        for i, g in enumerate(grads):
            if decayed[i]:
                params[i] = params[i] - params[i] * weight_decay * lr
            m[i] = beta_1 * m[i] + (1 - beta_1) * g
            v[i] = beta_2 * v[i] + (1 - beta_2) * g * g
            m_hat = m[i] / (1 - beta_1**t)
            v_hat = v[i] / (1 - beta_2**t)
            params[i] = params[i] - lr * m_hat / (np.sqrt(v_hat) + epsilon)
    return params, m, v


def torch_adamw(init, grads, lrs, weight_decay, decayed, epsilon=1e-8, amsgrad=False):
    """The same steps taken by torch.optim.AdamW itself (float64)."""
    import torch

    params = [torch.tensor(value, dtype=torch.float64, requires_grad=True)
              for value in init.values()]
    groups = [{"params": [p], "weight_decay": weight_decay if d else 0.0}
              for p, d in zip(params, decayed)]
    optimizer = torch.optim.AdamW(groups, lr=lrs[0], eps=epsilon, amsgrad=amsgrad)
    for step_grads, lr in zip(grads, lrs):
        for group in optimizer.param_groups:
            group["lr"] = lr
        for p, g in zip(params, step_grads):
            p.grad = torch.tensor(g, dtype=torch.float64)
        optimizer.step()
    return [p.detach().numpy() for p in params]


def make_problem(seed=0, steps=6):
    rng = np.random.default_rng(seed)
    shapes = {"kernel": (5, 3), "bias": (3,), "embeddings": (7, 4)}
    init = {name: rng.normal(size=shape).astype("float32") for name, shape in shapes.items()}
    grads = [
        [rng.normal(size=shape).astype("float32") for shape in shapes.values()]
        for _ in range(steps)
    ]
    return init, grads


def run(optimizer, init, grads):
    variables = [keras.Variable(value, name=name) for name, value in init.items()]
    for step_grads in grads:
        optimizer.apply([keras.ops.convert_to_tensor(g) for g in step_grads], variables)
    return variables


def test_adamw_matches_the_numpy_rule_and_keeps_keras_state():
    init, grads = make_problem()
    schedule = WarmupLinearDecay(0.05, total_steps=6, warmup_steps=2)
    optimizer = AdamW(learning_rate=schedule, weight_decay=0.3)
    optimizer.exclude_from_weight_decay(var_names=["^bias$"])
    got = run(optimizer, init, grads)

    lrs = [float(keras.ops.convert_to_numpy(schedule(s))) for s in range(len(grads))]
    want, want_m, want_v = numpy_adamw(
        list(init.values()), grads, lrs, 0.3, decayed=[True, False, True]
    )
    for variable, expected in zip(got, want):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(variable), expected,
                                   rtol=1e-5, atol=1e-6)
    # The state is Keras' AdamW's (moments not bias-corrected), so either resumes it.
    for variable, m, v in zip(got, want_m, want_v):
        index = optimizer._get_variable_index(variable)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(optimizer._momentums[index]), m,
                                   rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(optimizer._velocities[index]), v,
                                   rtol=1e-5, atol=1e-9)
    assert int(keras.ops.convert_to_numpy(optimizer.iterations)) == len(grads)


@pytest.mark.parametrize("amsgrad", [False, True])
def test_gradients_as_small_as_epsilon_follow_pytorch(amsgrad):
    # Where sqrt(v) is comparable to epsilon the placements of epsilon differ most:
    # Keras' own AdamW (even at epsilon 1e-8) moves them about 9 times less in these steps.
    init = {"kernel": np.ones(4, dtype="float32")}
    grads = [[np.array([1e-8, -3e-9, 2e-8, 0.0], dtype="float32") * (1 + 0.5 * t)]
             for t in range(4)]
    got = run(AdamW(learning_rate=0.1, weight_decay=0.0, amsgrad=amsgrad), init, grads)[0]
    want, _, _ = numpy_adamw([init["kernel"]], grads, [0.1] * 4, 0.0, [False])
    if not amsgrad:  # growing gradients: AMSGrad's max(v) is v, except in float rounding
        np.testing.assert_allclose(keras.ops.convert_to_numpy(got), want[0], rtol=1e-5)
    keras_got = run(keras.optimizers.AdamW(learning_rate=0.1, weight_decay=0.0, epsilon=1e-8,
                                           amsgrad=amsgrad), init, grads)[0]
    moved = 1 - keras.ops.convert_to_numpy(got)[0]
    assert moved > 5 * (1 - keras.ops.convert_to_numpy(keras_got)[0])
    if ON_TORCH:
        (reference,) = torch_adamw(init, grads, [0.1] * 4, 0.0, [False], amsgrad=amsgrad)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(got), reference, rtol=1e-5)


@torch_only
def test_torch_fused_adamw_matches_torch_adamw_and_adamw():
    init, grads = make_problem()
    # Gradients of very different sizes, down to epsilon's.
    grads = [[g * scale for g, scale in zip(step, (1.0, 1e-8, 1e-4))] for step in grads]
    schedule = WarmupLinearDecay(0.05, total_steps=6, warmup_steps=2)
    lrs = [float(keras.ops.convert_to_numpy(schedule(s))) for s in range(len(grads))]
    fused = TorchFusedAdamW(learning_rate=schedule, weight_decay=0.3)
    fused.exclude_from_weight_decay(var_names=["^bias$"])
    plain = AdamW(learning_rate=schedule, weight_decay=0.3)
    plain.exclude_from_weight_decay(var_names=["^bias$"])
    got = run(fused, init, grads)
    plain_got = run(plain, init, grads)
    want = torch_adamw(init, grads, lrs, 0.3, decayed=[True, False, True])
    for variable, plain_variable, expected in zip(got, plain_got, want):
        value = keras.ops.convert_to_numpy(variable)
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(value, keras.ops.convert_to_numpy(plain_variable),
                                   rtol=1e-5, atol=1e-6)
    assert int(fused.iterations) == len(grads)


def test_an_embedding_row_looked_up_twice_follows_torch_adamw():
    # Row 1 is looked up at two positions, its gradient the sum of theirs. On
    # TensorFlow that gradient comes as two slices, whose squares were summed into
    # v where Adam squares their sum: the row moved 0.45 of a step, not a whole one.
    table = np.random.default_rng(4).normal(size=(4, 3)).astype("float32")
    coefficients = np.array([[[1.0, -2.0, 0.5], [-0.5, 1.0, 0.25], [0.3, 0.3, -1.0]]], "float32")
    ids = np.array([[1, 1, 2]], "int32")

    def linear(y_true, y_pred):
        return keras.ops.sum(y_pred * keras.ops.convert_to_tensor(coefficients), axis=(1, 2))

    model = keras.Sequential([keras.Input((3,), dtype="int32"),
                              keras.layers.Embedding(4, 3, embeddings_initializer="zeros")])
    model.layers[0].embeddings.assign(table)
    model.compile(optimizer=adamw(0.1, weight_decay=0.0), loss=linear)
    model.fit(ids, np.zeros((1,), "float32"), batch_size=1, epochs=3, shuffle=False, verbose=0)
    gradient = np.zeros_like(table)
    np.add.at(gradient, ids[0], coefficients[0])
    expected = torch_adamw({"table": table}, [[gradient]] * 3, [0.1] * 3, 0.0, [False])[0]
    got = keras.ops.convert_to_numpy(model.layers[0].embeddings)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@torch_only
def test_fit_trains_the_same_weights_as_adamw():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(32, 6)).astype("float32")
    y = rng.normal(size=(32, 2)).astype("float32")

    def trained(optimizer):
        keras.utils.set_random_seed(3)
        model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"),
                                  keras.layers.Dense(2)])
        model.compile(optimizer=optimizer, loss="mse")
        history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        return model.get_weights(), history.history["loss"]

    fused_weights, fused_loss = trained(adamw(0.01, 0.01, ["^bias$"]))
    plain_optimizer = AdamW(learning_rate=0.01, weight_decay=0.01)
    plain_optimizer.exclude_from_weight_decay(var_names=["^bias$"])
    plain_weights, plain_loss = trained(plain_optimizer)
    assert fused_loss[-1] < fused_loss[0]
    np.testing.assert_allclose(fused_loss, plain_loss, rtol=1e-5)
    for got, want in zip(fused_weights, plain_weights):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@torch_only
def test_a_torch_compiled_step_trains_as_the_eager_one(monkeypatch):
    # `compile(jit_compile=True)` runs the step under `torch.compile`, where the fused
    # kernel's in-place update stopped PyTorch's functionalization with an internal
    # assertion. aot_eager runs that same functionalization without generating code.
    import functools

    import torch

    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    rng = np.random.default_rng(2)
    x = rng.normal(size=(16, 4)).astype("float32")
    y = rng.normal(size=(16, 1)).astype("float32")

    def trained(jit_compile):
        keras.utils.set_random_seed(5)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3),
                                  keras.layers.Dense(1)])
        model.compile(optimizer=adamw(0.05, 0.1, ["^bias$"]), loss="mse",
                      jit_compile=jit_compile)
        initial = model.get_weights()
        losses = [model.train_on_batch(x, y) for _ in range(3)]
        return initial, model.get_weights(), losses

    initial, compiled, compiled_losses = trained(True)
    _, eager, eager_losses = trained(False)
    np.testing.assert_allclose(compiled_losses, eager_losses, rtol=1e-5)
    for got, want in zip(compiled, eager):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(compiled[0], initial[0], atol=1e-2)


@pytest.mark.parametrize("epsilon", [0.0, -1e-8, "1e-8", True, float("nan"), float("inf")])
def test_bad_epsilon_is_named(epsilon):
    with pytest.raises(ValueError, match="`epsilon`"):
        AdamW(learning_rate=0.1, epsilon=epsilon)


def test_fit_leaves_the_excluded_bias_undecayed():
    # Through `fit`, where TensorFlow hands the optimizer its tf.Variables (named
    # "sequential/dense/bias:0"), against the NumPy rule with the bias not decayed.
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(12, 3)), rng.normal(size=(12, 2))
    kernel, bias = rng.normal(size=(3, 2)), rng.normal(size=(2,))
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.set_weights([kernel.astype("float32"), bias.astype("float32")])
    model.compile(optimizer=adamw(0.05, weight_decay=0.5), loss="mse")
    model.fit(x.astype("float32"), y.astype("float32"), batch_size=4, epochs=1,
              shuffle=False, verbose=0)
    # torch.optim.AdamW's rule, step by step, each gradient at the current weights.
    params = [kernel, bias]
    m, v = [np.zeros_like(p) for p in params], [np.zeros_like(p) for p in params]
    for t, start in enumerate((0, 4, 8), start=1):
        xb, yb = x[start : start + 4], y[start : start + 4]
        # mse over the batch and both outputs: d/dout = 2 * (out - y) / (4 * 2).
        residual = 2 * (xb @ params[0] + params[1] - yb) / 8
        grads = [xb.T @ residual, residual.sum(axis=0)]
        params[0] = params[0] * (1 - 0.05 * 0.5)  # the kernel is decayed, the bias not
        for i, g in enumerate(grads):
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g * g
            params[i] = params[i] - 0.05 * (m[i] / (1 - 0.9**t)) / (
                np.sqrt(v[i] / (1 - 0.999**t)) + 1e-8)
    for got, expected in zip(model.get_weights(), params):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_which_variables_decay_is_settled_when_the_optimizer_is_built(monkeypatch):
    # The step only looks the answer up: matched inside a compiled step, the name
    # patterns stopped `torch.compile` on PyTorch 2.11 (a run on a GPU machine).
    from keras_cosent.optimizers import adam_w

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    kernel, bias = (keras.ops.convert_to_numpy(v) for v in model.trainable_variables)
    optimizer = adamw(0.05, weight_decay=0.5)
    optimizer.build(model.trainable_variables)
    monkeypatch.setattr(adam_w, "re", None)  # matching a name now raises
    # Zero gradients: Adam moves nothing, so only the decoupled decay shows.
    optimizer.apply([keras.ops.zeros((3, 2)), keras.ops.zeros((2,))],
                    model.trainable_variables)
    got_kernel, got_bias = (keras.ops.convert_to_numpy(v) for v in model.trainable_variables)
    np.testing.assert_allclose(got_kernel, kernel * (1 - 0.05 * 0.5), rtol=1e-6)
    np.testing.assert_array_equal(got_bias, bias)


def test_a_numpy_epsilon_is_taken():
    assert AdamW(learning_rate=0.1, epsilon=np.float32(1e-6)).epsilon == pytest.approx(1e-6)


def test_a_saved_model_brings_back_the_optimizer_state_and_exclusions(tmp_path):
    # Keras skips the whole optimizer state when the rebuilt optimizer has a
    # different number of variables: the schedule's multiplier must be tracked
    # from the config, and the no-decay patterns must be in it.
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 4)).astype("float32"), rng.normal(size=(16, 2)).astype("float32")

    def compiled():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        model.compile(optimizer=adamw(WarmupLinearDecay(0.05, 20, 4), weight_decay=0.5), loss="mse")
        return model

    model = compiled()
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert int(loaded.optimizer.iterations) == 4
    assert len(loaded.optimizer.variables) == len(model.optimizer.variables)
    for got, want in zip(loaded.optimizer.variables, model.optimizer.variables):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(got),
                                      keras.ops.convert_to_numpy(want))
    bias, kernel = loaded.layers[0].bias, loaded.layers[0].kernel
    assert not loaded.optimizer._use_weight_decay(bias)
    assert loaded.optimizer._use_weight_decay(kernel)
    # The next epoch trains both to the same weights.
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
    loaded.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
    for got, want in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@torch_only
def test_torch_fused_adamw_accumulates_gradients_as_adamw():
    init, grads = make_problem(steps=6)
    fused = TorchFusedAdamW(learning_rate=0.05, weight_decay=0.3, gradient_accumulation_steps=2)
    plain = AdamW(learning_rate=0.05, weight_decay=0.3, gradient_accumulation_steps=2)
    # Two accumulated gradients per step: torch.optim.AdamW on their mean.
    mean_grads = [[(a + b) / 2 for a, b in zip(grads[i], grads[i + 1])] for i in (0, 2, 4)]
    want = torch_adamw(init, mean_grads, [0.05] * 3, 0.3, decayed=[True, True, True])
    for got, plain_got, expected in zip(run(fused, init, grads), run(plain, init, grads), want):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(got), expected,
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(plain_got), expected,
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kwargs, argument", [
    ({"learning_rate": -1.0}, "learning_rate"), ({"learning_rate": 0.0}, "learning_rate"),
    ({"learning_rate": float("nan")}, "learning_rate"), ({"learning_rate": "2e-5"}, "learning_rate"),
    ({"learning_rate": 1e-3, "weight_decay": -1}, "weight_decay"),
    ({"learning_rate": 1e-3, "weight_decay": float("inf")}, "weight_decay"),
    ({"learning_rate": 1e-3, "weight_decay": None}, "weight_decay"),
    ({"learning_rate": 1e-3, "weight_decay": 1e39}, "weight_decay"),
])
def test_adamw_names_a_bad_rate_or_decay(kwargs, argument):
    with pytest.raises(ValueError, match=rf"`{argument}`.*Received: `{argument}`="):
        adamw(**kwargs)


@pytest.mark.parametrize("kwargs, argument", [
    ({"learning_rate": -1.0}, "learning_rate"), ({"learning_rate": float("nan")}, "learning_rate"),
    ({"weight_decay": -0.1}, "weight_decay"), ({"weight_decay": float("nan")}, "weight_decay"),
    ({"beta_1": 1.5}, "beta_1"), ({"beta_2": 1.0}, "beta_2"), ({"beta_1": -0.1}, "beta_1"),
    ({"global_clipnorm": -1.0}, "global_clipnorm"), ({"clipnorm": 0.0}, "clipnorm"),
])
def test_the_optimizer_classes_name_a_bad_argument_as_adamw_does(kwargs, argument):
    # Keras' AdamW takes each of these silently; the `adamw` factory refused only
    # some, and the classes only a bad epsilon.
    classes = [AdamW] + ([TorchFusedAdamW] if keras.backend.backend() == "torch" else [])
    for cls in classes:
        with pytest.raises(ValueError, match=rf"`{argument}`.*Received: `{argument}`="):
            cls(**{"learning_rate": 1e-3, "weight_decay": 0.01, **kwargs})


def test_betas_given_as_tensors_are_left_to_keras_as_before():
    # Keras takes "a float value or a constant float tensor"; the number check
    # refused them (probe).
    for beta in (keras.ops.convert_to_tensor(0.999), np.array(0.999)):
        optimizer = AdamW(learning_rate=1e-3, weight_decay=0.01, beta_2=beta)
        variable = keras.Variable([1.0])
        optimizer.apply([keras.ops.convert_to_tensor([0.5])], [variable])
        assert float(keras.ops.convert_to_numpy(variable)[0]) < 1.0


def test_adamw_serialization_round_trip():
    optimizer = AdamW(learning_rate=WarmupLinearDecay(2e-5, 40, 4), weight_decay=0.01)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert type(restored) is AdamW
    assert restored.get_config() == optimizer.get_config()
    assert restored.epsilon == 1e-8


@torch_only
def test_serialization_round_trip():
    optimizer = TorchFusedAdamW(learning_rate=WarmupLinearDecay(2e-5, 40, 4), weight_decay=0.01)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert type(restored) is TorchFusedAdamW
    assert restored.get_config() == optimizer.get_config()


@torch_only
def test_amsgrad_is_refused():
    with pytest.raises(ValueError, match="amsgrad"):
        TorchFusedAdamW(learning_rate=0.1, amsgrad=True)


@pytest.mark.parametrize("module, registered", [
    ("keras_cosent.optimizers.torch_fused_adamw", "keras_cosent>TorchFusedAdamW"),
    # As runs saved before the optimizer moved into the library name it.
    ("recipes.optimizers", "keras_cosent_recipes>TorchFusedAdamW"),
])
def test_a_saved_torch_optimizer_loads_as_adamw_elsewhere(module, registered):
    original = AdamW(learning_rate=WarmupLinearDecay(2e-5, 40, 4), weight_decay=0.01)
    config = keras.optimizers.serialize(original)["config"]
    # What keras.optimizers.serialize writes for a TorchFusedAdamW on torch.
    serialized = {"module": module, "class_name": "TorchFusedAdamW",
                  "config": config, "registered_name": registered}
    # As from a saved file: deserialize replaces nested configs with objects in place.
    restored = keras.optimizers.deserialize(json.loads(json.dumps(serialized)))
    assert type(restored) is (TorchFusedAdamW if ON_TORCH else AdamW)
    assert keras.optimizers.serialize(restored)["config"] == config


@pytest.mark.skipif(ON_TORCH, reason="the torch backend is the one TorchFusedAdamW runs on")
def test_refused_outside_torch():
    with pytest.raises(ValueError, match=f"backend='{keras.backend.backend()}'"):
        TorchFusedAdamW(learning_rate=0.1)


def test_adamw_picks_the_backend_implementation_and_excludes_by_name():
    optimizer = adamw(2e-5, weight_decay=0.01, exclude_from_weight_decay=["^bias$"])
    assert type(optimizer) is (TorchFusedAdamW if ON_TORCH else AdamW)
    assert float(optimizer.weight_decay) == pytest.approx(0.01)
    assert optimizer.epsilon == 1e-8
    bias = keras.Variable(np.zeros(2, dtype="float32"), name="bias")
    kernel = keras.Variable(np.zeros(2, dtype="float32"), name="kernel")
    optimizer.build([bias, kernel])
    assert not optimizer._use_weight_decay(bias)
    assert optimizer._use_weight_decay(kernel)


@pytest.mark.parametrize("make, argument", [
    (lambda value: adamw(2e-5, exclude_from_weight_decay=value), "exclude_from_weight_decay"),
    (lambda value: AdamW(2e-5, weight_decay_exclusions=value), "weight_decay_exclusions"),
    (lambda value: AdamW(2e-5).exclude_from_weight_decay(var_names=value), "var_names"),
])
def test_one_string_of_exclusions_is_refused_not_read_letter_by_letter(make, argument):
    # "bias" was taken as "b", "i", "a", "s": embeddings and gamma were spared decay too.
    with pytest.raises(ValueError, match=rf"`{argument}` should be a list of regular expressions "
                                         rf"\(e.g. \[\"bias\"\]\), not one str. Received: "
                                         rf"`{argument}`='bias'"):
        make("bias")
    with pytest.raises(ValueError, match=rf"`{argument}` should hold regular expressions \(str\). "
                                         r"Received: 3"):
        make(["bias", 3])
    optimizer = adamw(2e-5, exclude_from_weight_decay=("bias",))  # any sequence of str
    embeddings = keras.Variable(np.zeros(2, "float32"), name="embeddings")
    bias = keras.Variable(np.zeros(2, "float32"), name="bias")
    optimizer.build([embeddings, bias])
    assert optimizer._use_weight_decay(embeddings) and not optimizer._use_weight_decay(bias)


@pytest.mark.parametrize("module", ["adam_w", "adamw", "torch_fused_adamw", "warmup_linear_decay"])
def test_docstring_examples_run(module):
    module = importlib.import_module(f"keras_cosent.optimizers.{module}")
    result = doctest.testmod(module, verbose=False)
    assert result.attempted > 0
    assert result.failed == 0


def test_the_default_no_decay_list_spares_biases_and_layer_norm():
    optimizer = adamw(2e-5)
    names = {"bias": False, "gamma": False, "beta": False, "kernel": True, "embeddings": True}
    variables = [keras.Variable(np.zeros(2, "float32"), name=n) for n in names]
    optimizer.build(variables)
    assert [optimizer._use_weight_decay(v) for v in variables] == list(names.values())
    assert NO_WEIGHT_DECAY == ("^bias$", "^gamma$", "^beta$")


@torch_only
def test_variables_of_different_dtypes_are_updated_in_separate_kernel_calls():
    rng = np.random.default_rng(2)
    values = {"kernel": rng.normal(size=(4, 3)), "half_kernel": rng.normal(size=(3,))}
    grads = [[rng.normal(size=(4, 3)), rng.normal(size=(3,))] for _ in range(3)]

    def run_mixed(optimizer):
        variables = [keras.Variable(values["kernel"], dtype="float32", name="kernel"),
                     keras.Variable(values["half_kernel"], dtype="float16", name="half_kernel")]
        for step_grads in grads:
            optimizer.apply([keras.ops.convert_to_tensor(g, dtype=v.dtype)
                             for g, v in zip(step_grads, variables)], variables)
        return [keras.ops.convert_to_numpy(v).astype("float64") for v in variables]

    got = run_mixed(TorchFusedAdamW(learning_rate=0.01, weight_decay=0.1))
    want, _, _ = numpy_adamw([values["kernel"], values["half_kernel"]], grads, [0.01] * 3, 0.1,
                             [True, True])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    # float16 keeps about three decimal digits.
    np.testing.assert_allclose(got[1], want[1], rtol=2e-3, atol=2e-3)


def clipped(grads_per_step, max_norm):
    """torch.nn.utils.clip_grad_norm_'s rule: every gradient of a step scaled by
    max_norm / (global L2 norm + 1e-6) when that is below 1."""
    out = []
    for grads in grads_per_step:
        norm = np.sqrt(sum(np.sum(np.square(g.astype(np.float64))) for g in grads))
        factor = min(1.0, max_norm / (norm + 1e-6))
        out.append([g.astype(np.float64) * factor for g in grads])
    return out


def test_max_grad_norm_clips_as_torch_clip_grad_norm_before_adamw():
    init, grads = make_problem()
    # Global norms of these steps are about 6; the third step stays under the limit.
    grads[2] = [g * 0.1 for g in grads[2]]
    schedule = WarmupLinearDecay(0.05, total_steps=6, warmup_steps=2)
    lrs = [float(keras.ops.convert_to_numpy(schedule(s))) for s in range(len(grads))]
    optimizer = adamw(schedule, weight_decay=0.3, exclude_from_weight_decay=["^bias$"],
                      max_grad_norm=1.5)
    got = run(optimizer, init, grads)
    want, _, _ = numpy_adamw(list(init.values()), clipped(grads, 1.5), lrs, 0.3,
                             decayed=[True, False, True])
    unclipped, _, _ = numpy_adamw(list(init.values()), grads, lrs, 0.3,
                                  decayed=[True, False, True])
    for variable, expected, other in zip(got, want, unclipped):
        value = keras.ops.convert_to_numpy(variable)
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6)
        assert np.abs(value - other).max() > 1e-3  # the clipping changed the steps
    # torch itself: clip_grad_norm_ then AdamW.
    import torch

    params = [torch.tensor(value, dtype=torch.float64, requires_grad=True)
              for value in init.values()]
    reference = torch.optim.AdamW(
        [{"params": [p], "weight_decay": 0.3 if d else 0.0}
         for p, d in zip(params, [True, False, True])], lr=lrs[0], eps=1e-8)
    for step_grads, lr in zip(grads, lrs):
        for group in reference.param_groups:
            group["lr"] = lr
        for p, g in zip(params, step_grads):
            p.grad = torch.tensor(g, dtype=torch.float64)
        torch.nn.utils.clip_grad_norm_(params, 1.5)
        reference.step()
    for variable, p in zip(got, params):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(variable), p.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
    assert adamw(1e-3).global_clipnorm is None


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "1"])
def test_bad_max_grad_norm_is_named(bad):
    with pytest.raises(ValueError, match="`max_grad_norm`"):
        adamw(1e-3, max_grad_norm=bad)


def test_max_grad_norm_takes_the_norm_of_an_embedding_rows_summed_gradient():
    # A row looked up twice gets gradient 2g. TensorFlow hands it over as two
    # IndexedSlices of g; Keras' global norm squared them one by one (2 g^2, not 4 g^2).
    # Adam is blind to one scale on every step: the first step repeats a row, the
    # second does not, so a wrong norm on the first changes the second's update.
    import torch

    ids = np.array([[0, 0, 2], [0, 1, 2]])
    initial = np.array([[0.5, -1.0], [0.3, 0.2], [-0.4, 0.9]], "float32")
    inputs = keras.Input((3,), dtype="int32")
    table = keras.layers.Embedding(3, 2, embeddings_initializer=keras.initializers.Constant(initial))
    model = keras.Model(inputs, keras.ops.sum(table(inputs) * np.array([1.0, 3.0]), axis=(1, 2)))
    model.compile(optimizer=adamw(0.1, weight_decay=0.0, max_grad_norm=1.0),
                  loss=lambda y, p: keras.ops.sum(p))
    model.fit(ids, np.zeros((2,)), epochs=1, batch_size=1, verbose=0, shuffle=False)

    weights = torch.tensor(initial, dtype=torch.float64, requires_grad=True)
    reference = torch.optim.AdamW([weights], lr=0.1, weight_decay=0.0, eps=1e-8)
    for row in ids:
        reference.zero_grad()
        (weights[torch.tensor(row)] * torch.tensor([1.0, 3.0], dtype=torch.float64)).sum().backward()
        torch.nn.utils.clip_grad_norm_([weights], 1.0)
        reference.step()
    np.testing.assert_allclose(keras.ops.convert_to_numpy(table.embeddings),
                               weights.detach().numpy(), rtol=1e-5, atol=1e-6)
