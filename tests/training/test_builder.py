"""`keras_cosent.training.build` against a set-up written out independently in the test."""

import re
import types

import keras
import numpy as np
import pytest

import keras_cosent
from keras_cosent.data import DataFormatError
from keras_cosent.data import PairDataset
from keras_cosent.training import OBJECTIVES
from keras_cosent.training import build

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
         "a", "the", "cat", "dog", "sat", "ran", "on", "mat", "fast", "slow", "red"]
FIRST = ["a cat sat", "the dog ran", "a red mat", "the cat ran fast", "a dog sat on the mat",
         "the slow cat", "a fast dog", "red cat on a mat"]
SECOND = ["the cat sat", "a dog ran fast", "the mat", "a cat ran", "the dog on a mat",
          "a slow dog", "the fast cat", "a red dog sat"]
SCORES = np.array([4.5, 3.8, 1.0, 4.0, 3.0, 0.5, 2.0, 1.5], "float32")


def tiny_encoder(seed=0):
    import keras_hub

    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(VOCAB), num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16, dropout=0.0)
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    return keras_cosent.models.SentenceEncoder(backbone, tokenizer, max_length=16)


def pairs():
    return PairDataset([list(FIRST), list(SECOND)], SCORES.copy(), source="inline")


class LinearWarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """BERT's schedule as Hugging Face's get_linear_schedule_with_warmup defines it."""

    def __init__(self, peak, total, warmup):
        self.peak, self.total, self.warmup = peak, total, warmup

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        up = self.peak * step / max(1, self.warmup)
        down = self.peak * keras.ops.maximum(0.0, (self.total - step) / max(1, self.total - self.warmup))
        return keras.ops.where(step < self.warmup, up, down)


@pytest.mark.heavy
def test_build_trains_as_the_published_set_up_does():
    epochs, batch, lr = 2, 4, 1e-3
    setup = build(tiny_encoder(), pairs(), "cosent", batch_size=batch, epochs=epochs,
                  learning_rate=lr, warmup=0.25, weight_decay=0.01, shuffle=False, packing=False)
    ours = setup.model.fit(setup.batches, epochs=epochs, verbose=0).history["loss"]

    # Independently: the same encoder weights, a SiameseEncoder, the AdamW rule
    # (tests/optimizers/test_adamw.py checks it against torch.optim.AdamW) on the
    # schedule above with biases and LayerNorm excluded from weight decay.
    encoder = tiny_encoder()
    model = keras_cosent.models.SiameseEncoder(encoder)
    total = epochs * len(FIRST) // batch
    optimizer = keras_cosent.optimizers.AdamW(LinearWarmupDecay(lr, total, round(0.25 * total)),
                                              weight_decay=0.01)
    optimizer.exclude_from_weight_decay(var_names=["^bias$", "^gamma$", "^beta$"])
    model.compile(optimizer=optimizer, loss=keras_cosent.losses.CoSENTLoss(scale=20.0))
    batches = keras_cosent.data.PairBatches(pairs(), encoder.tokenize, batch_size=batch,
                                            pad_id=encoder.pad_id, shuffle=False)
    reference = model.fit(batches, epochs=epochs, verbose=0).history["loss"]

    np.testing.assert_allclose(ours, reference, rtol=1e-4)
    for ours_w, ref_w in zip(setup.encoder.get_weights(), encoder.get_weights()):
        np.testing.assert_allclose(ours_w, ref_w, atol=1e-5)
    assert float(setup.optimizer.learning_rate) == pytest.approx(0.0, abs=1e-9)  # decayed to 0


# Objectives whose batches or model differ from CoSENT's (group labels, unique
# texts, a classifier head) take a real fit step here; angle and cosine-mse share
# CoSENT's layout, and every objective trains through the CLI in the slow tests.
FIT = ("sbert-softmax", "infonce", "simcse")


@pytest.mark.parametrize("name", [
    "cosent", "angle", "cosine-mse", "sbert-softmax",
    # These two fit an epoch of InfoNCE, which test_infonce_loss covers on every backend.
    pytest.param("infonce", marks=pytest.mark.heavy),
    pytest.param("simcse", marks=pytest.mark.heavy),
])
def test_every_objective_builds(name):
    setup = build(tiny_encoder(), pairs(), name, batch_size=4, epochs=1, learning_rate=1e-3)
    if name in FIT:
        history = setup.model.fit(setup.batches, epochs=1, verbose=0)
        assert np.isfinite(history.history["loss"]).all()
    x, y = setup.batches[0]
    assert np.isfinite(keras.ops.convert_to_numpy(setup.loss(y, setup.model(x))))
    assert isinstance(setup.loss, OBJECTIVES[name].loss)
    if name == "infonce":  # the pairs scored above 2.5 are its positives
        assert len(setup.dataset) == int(np.sum(SCORES > 2.5))
    if name == "simcse":
        assert len(setup.dataset) == len(set(FIRST) | set(SECOND))
    if name == "sbert-softmax":
        assert isinstance(setup.model, keras_cosent.models.SoftmaxClassifierModel)
        np.testing.assert_array_equal(setup.dataset.labels, (SCORES > 2.5).astype("int32"))


@pytest.mark.parametrize("objective", ["infonce", "cosent", "angle"])
def test_objectives_that_compare_rows_refuse_a_batch_of_one(objective):
    # CoSENT and AnglE rank pairs against each other: one pair has no couple to rank.
    with pytest.raises(ValueError, match=rf"`batch_size`=1 is too small for objective "
                                         rf"'{objective}'"):
        build(tiny_encoder(), pairs(), objective, batch_size=1)


def test_a_mini_batch_larger_than_the_batch_is_refused():
    # Most likely the two sizes swapped: GradCache would split nothing and pay its
    # second forward pass on every step.
    with pytest.raises(ValueError, match=r"`mini_batch_size`=8 is larger than the 4 rows of a "
                                         r"batch \(`batch_size`=4\)"):
        build(tiny_encoder(), pairs(), "cosent", batch_size=4, mini_batch_size=8)
    setup = build(tiny_encoder(), pairs(), "cosent", batch_size=4, mini_batch_size=4)
    assert isinstance(setup.model, keras_cosent.models.CachedSiameseEncoder)


def test_a_dataset_that_cannot_fill_a_batch_to_learn_from_is_refused():
    one = PairDataset([["a cat sat"], ["a dog"]], np.array([4.0], "float32"), source="one.tsv")
    # A DataFormatError naming the file: the CLI says it in one line.
    with pytest.raises(DataFormatError, match=r"one.tsv: 1 row\(s\) for objective 'cosent', which "
                                         r"needs at least 2 rows"):
        build(tiny_encoder(), one, "cosent", batch_size=16)


@pytest.mark.parametrize("kwargs, match", [
    # An unknown spelling would read NLI class ids as scores without a word.
    ({"data_format": "nli_jsonl"}, r"`data_format` should be None or one of .*'nli-jsonl'"),
    ({"data_format": 42}, r"`data_format`=42"),
    ({"packing": "no"}, r"`packing` should be a bool .* Received: `packing`='no'"),
    # Not a count of devices: taken as 1 (1.0, True), or answered with advice to
    # call data_parallel(0), which refuses it.
    ({"devices": 1.0}, r"`devices` should be a positive int. Received: `devices`=1.0"),
    ({"devices": True}, r"`devices`=True"),
    ({"devices": 0}, r"`devices` should be a positive int. Received: `devices`=0"),
])
def test_unknown_formats_and_non_bool_switches_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        build(tiny_encoder(), pairs(), "cosent", batch_size=4, **kwargs)


def test_data_parallel_takes_numpy_ints_as_build_does_and_names_a_bad_count():
    from keras_cosent import distributed

    with distributed.data_parallel(np.int64(1)):
        assert distributed.num_replicas() == 1
    for bad in (0, "1", 1.0, True):
        with pytest.raises(ValueError, match=r"`devices` should be a positive int"):
            with distributed.data_parallel(bad):
                pass


@pytest.mark.skipif(keras.backend.backend() == "torch",
                    reason="PyTorch counts torchrun's processes (tests/recipes/test_train.py)")
def test_data_parallel_beyond_the_visible_devices_counts_them():
    from keras_cosent import distributed

    if keras.backend.backend() == "jax":
        visible, name = len(keras.distribution.list_devices()), "JAX"
    else:
        import tensorflow as tf

        visible = len(tf.config.list_logical_devices("GPU")
                      or tf.config.list_logical_devices("CPU"))
        name = "TensorFlow"
    devices = "device is" if visible == 1 else "devices are"
    with pytest.raises(ValueError, match=re.escape(
            f"`devices`={visible + 1} but only {visible} {name} {devices} visible (on CPU, ")):
        distributed.data_parallel(visible + 1)


def test_word_repetition_needs_a_positives_column():
    texts = PairDataset([list(FIRST)], np.array([0, 0, 1, 1, 2, 2, 3, 3], "int32"),
                        source="inline", classes=["w", "x", "y", "z"])
    with pytest.raises(DataFormatError, match=r"inline: .*objective 'supcon' trains on 1 text "
                                              r"column"):
        build(tiny_encoder(), texts, "supcon", batch_size=4, word_repetition=0.3)


@pytest.mark.parametrize("objective", ["cosent", "cosine-mse", "sbert-softmax",
                                       "infonce:1.0,cosent:0.5"])
def test_word_repetition_is_refused_for_scored_pairs(objective):
    # Their second sentence is no positive view: repeated words change what the score grades.
    pairs = PairDataset([list(FIRST), list(SECOND)], np.array([0, 1, 2, 3, 4, 5, 1, 0], "float32"),
                        source="inline")
    graded = "cosent" if objective.startswith("infonce") else objective
    with pytest.raises(ValueError, match=re.escape(
            f"`word_repetition`=0.3 repeats words of the positives (column 1), and objective "
            f"{graded!r} trains on scored pairs")):
        build(tiny_encoder(), pairs, objective, batch_size=4, word_repetition=0.3)
    # An (anchor, positive) objective takes it.
    setup = build(tiny_encoder(), pairs, "infonce", batch_size=2, word_repetition=0.3)
    assert setup.batches.word_repetition == 0.3


@pytest.mark.parametrize("labels, data_format", [
    ([0, 1, 2, 3, 0, 1, 2, 0], "nli-jsonl"),  # 3 NLI classes: id 3 has no output
    ([0, 1, 1.7, 0, 0, 1, 2, 0], "nli-jsonl"),  # not a whole class id
])
def test_the_softmax_classifier_refuses_labels_that_are_not_its_class_ids(labels, data_format):
    data = PairDataset([list(FIRST), list(SECOND)], np.array(labels, "float32"), source="nli")
    with pytest.raises(ValueError, match=r"nli: 1 label\(s\) are not class ids 0-2"):
        build(tiny_encoder(), data, "sbert-softmax", batch_size=4, data_format=data_format)


def test_warmup_always_leaves_a_step_at_a_rate_above_zero():
    from keras_cosent.training.builder import warmup_steps

    assert warmup_steps(0.1, 1000) == 100  # round(0.1 x 1000), as before
    assert warmup_steps(0.6, 1) == 0  # round(0.6) = 1 would leave the only step at rate 0
    assert warmup_steps(0.9, 4) == 3 and warmup_steps(0.0, 1) == 0


def test_an_unknown_objective_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"Unknown objective 'cosnet'.*'cosent'"):
        build(tiny_encoder(), pairs(), "cosnet")


def test_an_objective_is_named_in_any_case_as_losses_get_reads_it():
    # build refused "CoSENT" (the paper's spelling), which keras_cosent.losses.get took.
    assert build(tiny_encoder(), pairs(), "CoSENT", batch_size=4).objective.name == "cosent"
    joint = build(tiny_encoder(), pairs(), "InfoNCE:1,CoSENT:0.5", batch_size=4).objective
    assert [term.name for term in joint.terms] == ["infonce", "cosent"]
    assert keras_cosent.losses.get("CoSENT") is keras_cosent.losses.CoSENTLoss



@pytest.mark.parametrize("keyword, fragment", [
    ("lr", "learning_rate"),      # build's own argument, misspelt
    ("epoch", "epochs"),
    ("scal", "['scale']"),        # a loss option, misspelt
    ("temperature", "['scale']"),  # InfoNCE's, not CoSENT's
])
def test_a_keyword_the_objective_does_not_take_is_refused(keyword, fragment):
    # It used to be dropped without a word: `lr=1e-3` trained at 2e-5.
    with pytest.raises(TypeError, match=rf"build\(\) got `{keyword}`, which objective "
                                        "'cosent' does not take") as info:
        build(tiny_encoder(), pairs(), "cosent", batch_size=4, **{keyword: 0.5})
    assert fragment in str(info.value)
    # A joint objective takes every option one of its terms takes; None means "the default".
    setup = build(tiny_encoder(), pairs(), "infonce:1.0,cosent:0.5", batch_size=4,
                  scale=30.0, temperature=0.1, margin=None)
    scales = {type(term).__name__: term.get_config() for term in setup.loss.losses}
    assert scales["CoSENTLoss"]["scale"] == 30.0 and scales["InfoNCELoss"]["temperature"] == 0.1


def test_a_misspelt_task_option_is_refused_by_build_multi():
    from keras_cosent.training import Task
    from keras_cosent.training import build_multi

    with pytest.raises(TypeError, match=r"task 0's loss_options got `temprature`.*'infonce'.*"
                                        r"\['symmetric', 'temperature'\]"):
        build_multi(tiny_encoder(), [Task(pairs(), "infonce", {"temprature": 0.5})],
                    batch_size=4)


@pytest.mark.parametrize("argument, value", [
    ("epochs", 0), ("epochs", 2.7), ("epochs", "3"), ("epochs", True),
    ("batch_size", 2.5), ("batch_size", "4"), ("batch_size", 0),
    ("learning_rate", 0.0), ("learning_rate", -1e-5), ("learning_rate", float("inf")),
    ("learning_rate", float("nan")), ("learning_rate", "2e-5"),
    ("warmup", "0.1"), ("warmup", 1.0), ("warmup", float("nan")),
    ("weight_decay", -0.1), ("weight_decay", float("nan")),
    # Beyond float32's range: 0 or inf where they are computed.
    ("learning_rate", 1e-40), ("learning_rate", 1e39), ("weight_decay", 1e39),
])
def test_training_arguments_out_of_range_name_themselves(argument, value):
    for builder in ("build", "build_multi"):
        with pytest.raises(ValueError, match=rf"`{argument}`.*Received: `{argument}`="):
            if builder == "build":
                build(tiny_encoder(), pairs(), "cosent", **{"batch_size": 4, argument: value})
            else:
                keras_cosent.training.build_multi(
                    tiny_encoder(), [(pairs(), "cosent")], **{"batch_size": 4, argument: value})


def test_an_encoder_that_is_not_one_is_named():
    with pytest.raises(TypeError, match=r"`encoder` should be a keras_cosent.models."
                                        r"SentenceEncoder. Received: `encoder` of type NoneType"):
        build(None, pairs(), "cosent")

def _build_under(policy):
    """What `keras-cosent train --mixed-precision POLICY` does: build under the policy."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(policy)
    try:
        return build(tiny_encoder(), pairs(), "cosent", batch_size=4, epochs=1,
                     learning_rate=1e-3, shuffle=False, packing=False)
    finally:
        keras.mixed_precision.set_global_policy(previous)


def _jax_on_cpu():
    if keras.backend.backend() != "jax":
        return False
    import jax

    return jax.default_backend() == "cpu"


@pytest.mark.parametrize("policy,scaled", [
    # float16 trains on GPUs (XLA compiles no float16 product on CPU: the step below);
    # its eager forward pass and both policies here run everywhere.
    pytest.param("mixed_float16", True, marks=pytest.mark.heavy),
    ("mixed_bfloat16", False),
])
def test_mixed_precision_scales_float16_losses_only_and_keeps_the_loss_float32(policy, scaled):
    setup = _build_under(policy)
    # float16's 5 exponent bits flush small gradients to 0: Keras' compile
    # wraps the optimizer in a LossScaleOptimizer; bfloat16 has float32's range.
    is_scaled = isinstance(setup.model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert is_scaled is scaled, type(setup.model.optimizer)
    assert setup.encoder.backbone.dtype_policy.name == policy
    x, y = next(iter(setup.batches))
    y_pred = setup.model(x)
    half = "float16" if policy == "mixed_float16" else "bfloat16"
    assert keras.backend.standardize_dtype(y_pred.dtype) == "float32"  # pooled in float32
    assert keras.backend.standardize_dtype(setup.loss(y, y_pred).dtype) == "float32"
    hidden = setup.encoder.backbone(
        {k: v[:, 0] for k, v in x.items()} if isinstance(x, dict) else x[0])
    assert keras.backend.standardize_dtype(hidden["sequence_output"].dtype) == half


# Compiling a half-precision training step takes XLA 30-60 s on 2 CPU cores; the
# dtypes above are checked on every backend by default.
@pytest.mark.heavy
@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_trains_to_finite_losses(policy):
    if policy == "mixed_float16" and _jax_on_cpu():
        pytest.skip("XLA on CPU has no float16 dot_general (F16_F16_F32): GPUs only")
    setup = _build_under(policy)
    history = setup.model.fit(setup.batches, epochs=1, verbose=0).history["loss"]
    assert len(history) == 1 and np.all(np.isfinite(history)), history


class _ServedEpochs(keras.callbacks.Callback):
    """Records the epoch whose plan the batches serve at every step."""

    def __init__(self, batches):
        super().__init__()
        self.batches, self.served = batches, []

    def on_train_batch_begin(self, batch, logs=None):
        self.served.append(self.batches.epoch)


def _fit_two_epochs(objective, backup_dir=None, positional=False):
    """The epochs served at each step, and the trained weights."""
    dataset = pairs()
    if objective == "sbert-softmax":
        dataset.labels = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    setup = build(tiny_encoder(), dataset, objective, batch_size=2, epochs=2,
                  learning_rate=1e-2, warmup=0.0)
    # Without XLA: TensorFlow compiled each of these tiny models for seconds.
    setup.model.compile(optimizer=setup.optimizer, loss=setup.loss, jit_compile=False)
    served = _ServedEpochs(setup.batches)
    callbacks = [served] + ([keras_cosent.callbacks.ResumableTraining(
        backup_dir, setup.batches)] if backup_dir else [])
    if positional:  # fit(x, y, batch_size, epochs, verbose, callbacks)
        setup.model.fit(setup.batches, None, None, 2, 0, callbacks, shuffle=False)
    else:
        setup.model.fit(setup.batches, epochs=2, verbose=0, callbacks=callbacks, shuffle=False)
    return served.served, [keras.ops.convert_to_numpy(w) for w in setup.model.trainable_weights]


def test_a_plain_fit_trains_epoch_k_on_plan_k_as_the_command_does(tmp_path):
    # Keras' fit ends an epoch of the data once before training (it reads a batch
    # to build the step): a plain fit trained epoch k on plan k + 1, and ended
    # elsewhere than the same run under ResumableTraining (keras-cosent train).
    plain, plain_weights = _fit_two_epochs("cosent")
    assert plain == [0] * 4 + [1] * 4
    resumed, resumed_weights = _fit_two_epochs("cosent", backup_dir=tmp_path / "backup")
    assert resumed == plain
    # Equal on a CPU; on a GPU, reductions in no fixed order parted two identical
    # JAX runs by up to 1.5e-6 (an H200, before tests/conftest.py asked XLA for
    # deterministic ones), where a plan apart moves the weights by up to 7e-2.
    for got, want in zip(plain_weights, resumed_weights):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("objective, positional", [("cosent", True), ("sbert-softmax", False)])
def test_fit_serves_each_epochs_plan_to_every_training_model(objective, positional):
    # SoftmaxClassifierModel is no SiameseEncoder; callbacks may come positionally.
    assert _fit_two_epochs(objective, positional=positional)[0] == [0] * 4 + [1] * 4


@pytest.mark.heavy
@pytest.mark.parametrize("objective", ["cosent", "sbert-softmax"])
def test_fit_past_the_planned_epochs_warns_that_the_rate_is_zero_there(objective):
    # build plans the rate over its epochs' steps, to 0 at the last: fit(epochs=3)
    # after build(epochs=1) trained two more epochs at rate 0 without a word.
    setup = build(tiny_encoder(), pairs(), objective, batch_size=4, epochs=1, shuffle=False)
    with pytest.warns(UserWarning, match=re.escape(
            "fit(epochs=3) takes 6 steps of 2 batches from step 0, past the 2 steps over "
            "which the learning-rate schedule decays to 0")):
        setup.model.fit(setup.batches, epochs=3, verbose=0, shuffle=False)
    rates = []
    setup = build(tiny_encoder(), pairs(), objective, batch_size=4, epochs=2, shuffle=False)
    import warnings

    with warnings.catch_warnings():
        # The planned epochs, in one fit or two, say nothing.
        warnings.filterwarnings("error", message=r"fit\(epochs=")
        setup.model.fit(setup.batches, epochs=1, verbose=0, shuffle=False)
        rates.append(float(keras.ops.convert_to_numpy(setup.optimizer.learning_rate)))
        setup.model.fit(setup.batches, epochs=2, initial_epoch=1, verbose=0, shuffle=False)
        rates.append(float(keras.ops.convert_to_numpy(setup.optimizer.learning_rate)))
    assert rates[0] > 0 and rates[1] == 0  # the schedule's end, reached as planned
    with pytest.warns(UserWarning, match="from step 4, past the 4 steps"):
        setup.model.fit(setup.batches, epochs=1, verbose=0, shuffle=False)  # a third


@pytest.mark.parametrize("accumulation", [None, 2])
def test_the_schedule_check_reads_the_step_of_a_distributed_optimizer(accumulation):
    # fit's check that it stays inside the planned schedule read the step count
    # with int(), which TensorFlow's MirroredVariable (several devices) refuses:
    # every `train --devices 2` on TensorFlow stopped before its first step. One
    # device under MirroredStrategy holds the same kind of variable.
    import contextlib
    import warnings

    from keras_cosent.models.epoch_batches import warn_past_schedule
    from keras_cosent.optimizers import WarmupLinearDecay

    scope = contextlib.nullcontext()
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        scope = tf.distribute.MirroredStrategy(["/cpu:0"]).scope()
    with scope:
        optimizer = keras_cosent.optimizers.AdamW(
            learning_rate=WarmupLinearDecay(1e-3, total_steps=4), weight_decay=0.0,
            gradient_accumulation_steps=accumulation)
        optimizer.build([keras.Variable(np.zeros(2, "float32"))])
    # With gradient accumulation the step is computed: 6 batches make 3 steps.
    optimizer._iterations.assign(3 * (accumulation or 1))
    model = types.SimpleNamespace(optimizer=optimizer)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nor a NumPy warning about reading the variable
        warn_past_schedule(model, [0], epochs=1)  # step 3 + 1 = the planned 4
    with pytest.warns(UserWarning, match="takes 2 steps of 2 batches from step 3, past the 4"):
        warn_past_schedule(model, [0, 1], epochs=1)


@pytest.mark.heavy  # the clipping itself is tests/optimizers' on every backend
def test_max_grad_norm_clips_every_training_model_and_is_saved_with_it(tmp_path):
    # A norm far below these gradients' (CoSENT at scale 20 on random weights): every
    # step is clipped, which moves AdamW's weights differently from the second step on.
    runs = {}
    for clip in (None, 1e-4):
        setup = build(tiny_encoder(), pairs(), "cosent", batch_size=4, epochs=1,
                      learning_rate=1e-2, shuffle=False, max_grad_norm=clip)
        assert setup.optimizer.global_clipnorm == clip
        setup.model.fit(setup.batches, epochs=1, verbose=0)
        runs[clip] = setup
    moved = [np.abs(a - b).max() for a, b in zip(runs[None].encoder.get_weights(),
                                                 runs[1e-4].encoder.get_weights())]
    assert max(moved) > 1e-4
    path = str(tmp_path / "clipped.keras")
    runs[1e-4].model.save(path)
    assert keras.saving.load_model(path).optimizer.global_clipnorm == pytest.approx(1e-4)
    multi = keras_cosent.training.build_multi(
        tiny_encoder(), [(pairs(), "cosent"), (pairs(), "angle")], batch_size=4, epochs=1,
        max_grad_norm=0.5)
    assert multi.optimizer.global_clipnorm == 0.5


def test_max_grad_norm_is_refused_where_tensorflow_would_clip_each_device_alone():
    from keras_cosent.training.builder import check_max_grad_norm

    assert check_max_grad_norm(None, 2) is None
    assert check_max_grad_norm(1, 1) == 1.0
    if keras.backend.backend() == "tensorflow":
        with pytest.raises(ValueError, match=r"`max_grad_norm`=1\.0 cannot clip on 2 "
                                             "TensorFlow devices"):
            check_max_grad_norm(1.0, 2)
    else:  # JAX clips the global arrays; PyTorch's ranks have averaged theirs
        assert check_max_grad_norm(1.0, 2) == 1.0
    with pytest.raises(ValueError, match="`max_grad_norm`"):
        build(tiny_encoder(), pairs(), "cosent", batch_size=4, max_grad_norm=-1.0)


def test_fit_reads_the_step_count_without_numpy_deprecation_warnings():
    # NumPy 2 warned on every JAX fit (and each PyTorch step) where the optimizer's
    # step count went through np.array, whose `__array__` there takes no `copy`.
    import warnings

    setup = build(tiny_encoder(), pairs(), "cosent", batch_size=4, epochs=1)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*__array__ implementation",
                                category=DeprecationWarning)
        setup.model.fit(setup.batches, epochs=1, verbose=0)
