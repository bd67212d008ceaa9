"""`TorchFusedAdamW`: keras-cosent's `AdamW` with its update run by PyTorch's fused kernel.

On JAX and TensorFlow, the `AdamW` update is compiled into the training step
with the rest of it. On PyTorch, Keras runs it as about ten `torch._foreach_*`
passes over every parameter, with temporaries; for all-MiniLM-L6-v2 (22.6M
parameters, half of them the word embeddings, whose gradient is dense) that
is 0.23-0.30 s per step on 2 CPU cores, a third of a training step, where torch's
fused AdamW kernel, which sentence-transformers' trainer uses by default, takes
0.014-0.017 s (measured with `bench/optimizer_step.py`, a probe kept in git
history at commit fdca9ec).

This is the one optimizer in the library that is backend-specific by nature:
it calls PyTorch (imported inside its update, on the torch backend only) where
the rest of the library uses `keras.ops`. `keras_cosent.optimizers.adamw`
picks it on PyTorch and `keras_cosent.optimizers.AdamW` elsewhere.
"""

import keras

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.optimizers.adam_w import AdamW


@keras_cosent_export
class TorchFusedAdamW(AdamW):
    """`keras_cosent.optimizers.AdamW` whose update runs in `torch._fused_adamw_` (torch only).

    Args and defaults are those of `keras_cosent.optimizers.AdamW` (PyTorch's
    update rule, `epsilon=1e-8`), except that `amsgrad=True` is not supported.
    The weight decay moves into the same kernel (Keras applies it in a pass of
    its own): each decayed variable is first multiplied by
    `1 - learning_rate * weight_decay`, then gets the Adam step
    `learning_rate / (1 - beta_1^t) * m / (sqrt(v / (1 - beta_2^t)) + epsilon)`.
    The optimizer state is Keras' own, so a saved model compiled with it loads
    on JAX or TensorFlow with `keras_cosent.optimizers.AdamW` in its place
    (`from_config`). In a step that `torch.compile` traces
    (`model.compile(..., jit_compile=True)` on PyTorch) the kernel cannot run,
    and the update is `keras_cosent.optimizers.AdamW`'s, which the compiler
    fuses: the same rule.

    Example (the first Adam step moves each weight by the learning rate against
    its gradient's sign, here on whichever backend runs it):

    >>> import keras
    >>> from keras_cosent.optimizers import adamw
    >>> optimizer = adamw(0.1, weight_decay=0.0)
    >>> type(optimizer).__name__ == (
    ...     "TorchFusedAdamW" if keras.backend.backend() == "torch" else "AdamW")
    True
    >>> variable = keras.Variable([1.0, -1.0])
    >>> optimizer.apply([keras.ops.convert_to_tensor([1.0, -1.0])], [variable])
    >>> [round(float(x), 4) for x in keras.ops.convert_to_numpy(variable)]
    [0.9, -0.9]

    Reference:
        Loshchilov and Hutter, Decoupled Weight Decay Regularization (2019),
        https://arxiv.org/abs/1711.05101; PyTorch's `torch.optim.AdamW(fused=True)`,
        https://pytorch.org/docs/stable/generated/torch.optim.AdamW.html
    """

    def __init__(self, *args, **kwargs):
        if keras.backend.backend() != "torch":
            raise ValueError(
                "TorchFusedAdamW runs PyTorch's fused AdamW kernel and needs the torch "
                f"backend. Received: backend={keras.backend.backend()!r}; use "
                "keras_cosent.optimizers.AdamW (or keras_cosent.optimizers.adamw) instead."
            )
        super().__init__(*args, **kwargs)
        if self.amsgrad:
            raise ValueError(
                "TorchFusedAdamW does not support `amsgrad`. Received: `amsgrad`=True; "
                "use keras_cosent.optimizers.AdamW for AMSGrad."
            )

    @classmethod
    def from_config(cls, config, custom_objects=None):
        # The state is AdamW's, so elsewhere AdamW takes over.
        if keras.backend.backend() != "torch":
            return AdamW.from_config(config, custom_objects=custom_objects)
        return super().from_config(config, custom_objects=custom_objects)

    def _apply_weight_decay(self, variables):
        # Done inside the fused kernel, in `_backend_update_step`.
        if _compiling():
            super()._apply_weight_decay(variables)

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        import torch

        if _compiling():
            # Inside `torch.compile` (`compile(jit_compile=True)` on PyTorch), the fused
            # kernel's in-place update of the parameters cannot be traced (PyTorch stops
            # with an internal assertion); the compiler fuses AdamW's own update instead.
            return super()._backend_update_step(grads, trainable_variables, learning_rate)
        # With gradient accumulation, `iterations` is computed, not a variable.
        step = int(self.iterations) + 1
        lr = float(learning_rate)
        weight_decay = float(self.weight_decay or 0.0)
        # One kernel call per (decay, device, dtype): the kernel takes one weight
        # decay and needs its tensors on one device with one dtype.
        groups = {}
        for grad, variable in zip(grads, trainable_variables):
            param = variable.value
            decay = weight_decay if weight_decay and self._use_weight_decay(variable) else 0.0
            group = groups.setdefault((decay, param.device, param.dtype), ([], [], [], []))
            index = self._get_variable_index(variable)
            group[0].append(param)
            group[1].append(grad.to(param.dtype))
            group[2].append(self._momentums[index].value)
            group[3].append(self._velocities[index].value)
        with torch.no_grad():
            for (decay, device, _), (params, group_grads, ms, vs) in groups.items():
                steps = torch.full((), step, dtype=torch.float32, device=device)
                torch._fused_adamw_(
                    params,
                    group_grads,
                    ms,
                    vs,
                    [],
                    [steps] * len(params),
                    lr=lr,
                    beta1=float(self.beta_1),
                    beta2=float(self.beta_2),
                    weight_decay=decay,
                    eps=float(self.epsilon),
                    amsgrad=False,
                    maximize=False,
                )


def _compiling():
    """Whether PyTorch is tracing the call for `torch.compile`."""
    import torch

    return torch.compiler.is_compiling()


# Runs saved before the optimizer moved into the library name it `keras_cosent_recipes>`.
keras.saving.get_custom_objects()["keras_cosent_recipes>TorchFusedAdamW"] = TorchFusedAdamW
