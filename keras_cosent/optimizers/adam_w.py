"""`AdamW`: Keras' AdamW with epsilon where PyTorch and Hugging Face put it."""

import re

import keras
from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.utils.arguments import check_non_negative_float
from keras_cosent.utils.arguments import check_positive_float
from keras_cosent.utils.arguments import is_number


def _dense(gradient):
    """`gradient` as a dense tensor.

    TensorFlow gives an embedding table's gradient as `tf.IndexedSlices`, one
    slice per looked-up token, repeats included: `ops.square` would square each
    slice before the slices are summed into `v`, `sum(g_i^2)` where Adam takes
    `(sum g_i)^2`, so that a token seen twice in a batch moved less than on the
    other backends. (The first moment is dense already: subtracting `m` densifies.)
    """
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        if isinstance(gradient, tf.IndexedSlices):
            return tf.convert_to_tensor(gradient)
    return gradient


def check_adam_arguments(learning_rate, weight_decay, beta_1, beta_2, clips):
    """Refuses, naming the argument, what Keras' AdamW takes silently: a negative or
    nan learning rate or weight decay, a `beta` outside [0, 1), a clipping bound
    that is not a positive float (`clips`: `{name: value}`, None for off). Only
    numbers are checked: a schedule or a callable learning rate, or a beta given
    as a tensor or a variable (Keras takes "a constant float tensor"), is left
    to Keras."""
    if is_number(learning_rate):
        check_positive_float("learning_rate", learning_rate)
    if is_number(weight_decay):
        check_non_negative_float("weight_decay", weight_decay)
    for name, beta in (("beta_1", beta_1), ("beta_2", beta_2)):
        if is_number(beta) and not 0 <= beta < 1:
            raise ValueError(f"`{name}` should be a float in [0, 1). Received: `{name}`={beta!r}")
    for name, clip in clips.items():
        if is_number(clip):
            check_positive_float(name, clip)


def check_name_patterns(name, patterns):
    """`patterns` as a list of regular expressions (str), or raises naming `name`.

    One string would be taken letter by letter ("bias" as "b", "i", "a", "s"),
    which excludes every variable whose name holds one of them.
    """
    if isinstance(patterns, (str, bytes)) or not hasattr(patterns, "__iter__"):
        raise ValueError(
            f"`{name}` should be a list of regular expressions (e.g. [\"bias\"]), not one "
            f"{type(patterns).__name__}. Received: `{name}`={patterns!r}"
        )
    patterns = list(patterns)
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise ValueError(
                f"`{name}` should hold regular expressions (str). Received: {pattern!r} "
                f"in `{name}`={patterns!r}"
            )
    return patterns


@keras_cosent_export
class AdamW(keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` with the update rule of `torch.optim.AdamW`.

    The two differ in one place: where epsilon enters. Keras divides the
    bias-corrected first moment by `sqrt(v) + epsilon`, with `v` not bias
    corrected, and defaults to `epsilon=1e-7`; PyTorch (and so
    sentence-transformers and the Hugging Face `Trainer`) divides by
    `sqrt(v / (1 - beta_2^t)) + epsilon`, with `epsilon=1e-8`. Written in
    PyTorch's terms, Keras' epsilon is `1e-7 / sqrt(1 - beta_2^t)`: 316 times
    PyTorch's at the first step, 13 times after 1,000 steps. That only matters
    where gradients are as small as epsilon, but fine-tuning a pretrained
    sentence encoder is such a case: all-MiniLM-L6-v2 on its own kind of pairs
    (InfoNCE loss about 1e-3, no dropout) moves 2.5 times less in its first
    steps under Keras' rule than under PyTorch's. With this rule keras-cosent
    follows sentence-transformers' training step for step (tested on the
    packaged checkpoint; its trainer also clips the gradients at a norm of 1.0
    by default, which `global_clipnorm=1.0` does here).

    One more fix: on TensorFlow, Keras checks `exclude_from_weight_decay`
    patterns against the name of the `tf.Variable` under each Keras variable
    (`"sequential/dense/bias:0"` inside `fit`), so an anchored pattern such as
    `"^bias$"` never matches there and biases are decayed after all; this
    class matches the Keras variable's name (`"bias"`) on every backend.

    The update, for step `t` and learning rate `lr`: decayed variables are
    first multiplied by `1 - lr * weight_decay` (decoupled weight decay, as in
    Keras and PyTorch), then
    `variable -= lr / (1 - beta_1^t) * m / (sqrt(v / (1 - beta_2^t)) + epsilon)`.
    The optimizer state (`m`, `v`, the step counter) is Keras' own. Other
    arguments are those of `keras.optimizers.AdamW`.

    Two things Keras' AdamW leaves out of a saved model come back with this
    one (`get_config`): the name patterns given to `exclude_from_weight_decay`
    (`var_names`), and a learning-rate schedule's `multiplier` variable
    (`WarmupLinearDecay`), which the optimizer tracks as one of its own
    variables, right after the iteration counter: JAX's compiled step reads
    only the variables it is passed, and a saved optimizer's state
    (`model.save`, `ResumableTraining`) then holds it.

    Args:
        epsilon: float > 0, added to the bias-corrected `sqrt(v)`. Defaults to
            `1e-8`, PyTorch's and Hugging Face's default.
        weight_decay_exclusions: regular expressions, as `var_names` of
            `exclude_from_weight_decay`; variables whose name matches one
            are not decayed.

    Example (a gradient as small as epsilon: PyTorch's rule takes half a step
    of the learning rate, Keras' rule about a thirtieth of one):

    >>> import keras
    >>> from keras_cosent.optimizers import AdamW
    >>> def first_step(optimizer):
    ...     variable = keras.Variable([1.0])
    ...     optimizer.apply([keras.ops.convert_to_tensor([1e-8])], [variable])
    ...     return round(float(keras.ops.convert_to_numpy(variable)[0]), 5)
    >>> first_step(AdamW(learning_rate=0.1, weight_decay=0.0))
    0.95
    >>> first_step(keras.optimizers.AdamW(learning_rate=0.1, weight_decay=0.0, epsilon=1e-8))
    0.99693

    Reference:
        Loshchilov and Hutter, Decoupled Weight Decay Regularization (2019),
        https://arxiv.org/abs/1711.05101; `torch.optim.AdamW`,
        https://pytorch.org/docs/stable/generated/torch.optim.AdamW.html
    """

    def __init__(self, *args, epsilon=1e-8, weight_decay_exclusions=None, **kwargs):
        epsilon = check_positive_float("epsilon", epsilon)
        learning_rate = kwargs.get("learning_rate", args[0] if args else None)
        super().__init__(*args, epsilon=epsilon, **kwargs)
        check_adam_arguments(learning_rate, self.weight_decay, self.beta_1, self.beta_2,
                             {"clipnorm": self.clipnorm, "clipvalue": self.clipvalue,
                              "global_clipnorm": self.global_clipnorm})
        multiplier = getattr(self._learning_rate, "multiplier", None)
        if isinstance(multiplier, keras.Variable):
            # Public attribute assignment goes through the optimizer's tracker.
            self.learning_rate_multiplier = multiplier
        self._weight_decay_exclusions = ()
        if weight_decay_exclusions:
            self.exclude_from_weight_decay(
                var_names=check_name_patterns("weight_decay_exclusions", weight_decay_exclusions))

    def exclude_from_weight_decay(self, var_list=None, var_names=None):
        if var_names is not None:
            var_names = check_name_patterns("var_names", var_names)
        super().exclude_from_weight_decay(var_list=var_list, var_names=var_names)
        # Names are saved with the config; variables (`var_list`) cannot be.
        self._weight_decay_exclusions = tuple(var_names or ())

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        # Which variables decay is settled here, eagerly: the step only looks it
        # up. Traced inside the step, the name matching stopped `torch.compile`
        # (PyTorch 2.11: a KeyError on the compiled pattern in its dynamo).
        for variable in var_list:
            self._use_weight_decay(variable)

    def get_config(self):
        config = super().get_config()
        if self._weight_decay_exclusions:
            config["weight_decay_exclusions"] = list(self._weight_decay_exclusions)
        return config

    def _clip_gradients(self, grads):
        if self.global_clipnorm:
            # Keras' global norm squares an IndexedSlices gradient's slices one by
            # one, so a token looked up twice counted 2 * g^2 where its row holds
            # (2g)^2 (probe: the norm of a MiniLM CoSENT step read 29% too large):
            # the norm of the dense gradient, as torch's clip_grad_norm_ takes it.
            grads = [None if g is None else _dense(g) for g in grads]
        return super()._clip_gradients(grads)

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(_dense(gradient), variable.dtype)
        step = ops.cast(self.iterations + 1, variable.dtype)
        beta_1_power = ops.power(ops.cast(self.beta_1, variable.dtype), step)
        beta_2_power = ops.power(ops.cast(self.beta_2, variable.dtype), step)
        index = self._get_variable_index(variable)
        m = self._momentums[index]
        v = self._velocities[index]
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(
            v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2)
        )
        if self.amsgrad:
            v_hat = self._velocity_hats[index]
            self.assign(v_hat, ops.maximum(v_hat, v))
            v = v_hat
        denominator = ops.add(
            ops.divide(ops.sqrt(v), ops.sqrt(1 - beta_2_power)),
            ops.cast(self.epsilon, variable.dtype),
        )
        step_size = ops.divide(lr, 1 - beta_1_power)
        self.assign_sub(variable, ops.divide(ops.multiply(m, step_size), denominator))

    def _use_weight_decay(self, variable):
        # Keras' own check, on the name without TensorFlow's ":0" suffix.
        key = self._var_key(variable)
        if not hasattr(self, "_exclude_from_weight_decay_cache"):
            self._exclude_from_weight_decay_cache = {}
        cache = self._exclude_from_weight_decay_cache
        if key not in cache:
            pattern = getattr(self, "_exclude_from_weight_decay_pattern", None)
            # Inside TensorFlow's `fit`, `variable` is the tf.Variable, named by
            # path ("sequential/dense/bias:0"): its last part is Keras' name.
            name = re.sub(r":\d+$", "", variable.name).rsplit("/", 1)[-1]
            cache[key] = not (
                key in getattr(self, "_exclude_from_weight_decay", set())
                or (pattern is not None and re.search(pattern, name) is not None)
            )
        return cache[key]
