"""Time one AdamW step over all-MiniLM-L6-v2's parameter shapes, per implementation.

On PyTorch the optimizer update is not compiled into the training step, so its
implementation shows in the step time. Compared, on the same 22.6M random
parameters and gradients, 2 threads: Keras' `AdamW` on the torch backend (its
`torch._foreach_*` passes), `keras_cosent.optimizers.TorchFusedAdamW` (what
`keras-cosent train` uses on torch), and `torch.optim.AdamW` single-tensor (its
CPU default) and fused (what sentence-transformers' trainer uses). Each runs in
its own process, 3 warm-up steps then `--steps` timed.

    .venv/bin/python bench/optimizer_step.py
"""

import argparse
import os
import subprocess
import sys
import time

IMPLEMENTATIONS = ("keras-adamw", "keras-cosent-fused", "torch-single-tensor", "torch-fused")


def minilm_shapes():
    """all-MiniLM-L6-v2's trained parameter shapes: embeddings and 6 layers (its pooler
    gets no gradient from sentence pooling, so no update)."""
    shapes = [(30522, 384), (512, 384), (2, 384), (384,), (384,)]
    for _ in range(6):
        shapes += [(384, 384), (384,)] * 4  # query, key, value, attention output
        shapes += [(384,), (384,), (384, 1536), (1536,), (1536, 384), (384,), (384,), (384,)]
    return shapes


def time_one(name, steps):
    os.environ["KERAS_BACKEND"] = "torch"
    import numpy as np
    import torch

    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    shapes = minilm_shapes()
    init = [rng.normal(size=s).astype("float32") for s in shapes]
    grads = [rng.normal(size=s).astype("float32") * 1e-2 for s in shapes]
    if name.startswith("torch"):
        params = [torch.nn.Parameter(torch.tensor(x)) for x in init]
        for p, g in zip(params, grads):
            p.grad = torch.tensor(g)
        opt = torch.optim.AdamW(params, lr=2e-5, weight_decay=0.01, fused=name == "torch-fused")
        step = opt.step
    else:
        import keras

        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from keras_cosent.optimizers import TorchFusedAdamW

        cls = TorchFusedAdamW if name == "keras-cosent-fused" else keras.optimizers.AdamW
        variables = [keras.Variable(x) for x in init]
        opt = cls(learning_rate=2e-5, weight_decay=0.01)
        torch_grads = [torch.tensor(g) for g in grads]

        def step():
            opt.apply(torch_grads, variables)

    for _ in range(3):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps, sum(int(np.prod(s)) for s in shapes)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--only", choices=IMPLEMENTATIONS, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.only:
        seconds, n = time_one(args.only, args.steps)
        print(f"{args.only} {seconds * 1000:.1f} {n}")
        return
    print(f"{'implementation':22} {'ms/step':>8}")
    for name in IMPLEMENTATIONS:
        out = subprocess.run([sys.executable, __file__, "--only", name, "--steps", str(args.steps)],
                             capture_output=True, text=True, check=True)
        _, ms, n = out.stdout.split()[-3:]
        print(f"{name:22} {float(ms):8.1f}")
    print(f"({int(n) / 1e6:.1f}M parameters, 2 threads, mean of {args.steps} steps after 3 warm-up)")


if __name__ == "__main__":
    main()
