"""Seconds of a MiniLM forward pass in float32 and in mixed_bfloat16, per backend.

What `--mixed-precision mixed_bfloat16` costs on the machine at hand, before a run
pays it for an epoch: for each backend and policy, one fresh process loads the
packaged all-MiniLM-L6-v2 backbone under that global policy, calls it once on
`--batch-size` x `--length` random token ids (warm-up; JAX and TensorFlow
compile nothing here, the call is eager), then times `--calls` more; the figure
is the fastest. On PyTorch it also times one (2048 x 384) @ (384 x 1536) matmul
in each dtype, the shape of the backbone's feed-forward input, which is where
a CPU without bfloat16 instructions falls back to a slow kernel; on the device
Keras computes on (a GPU when there is one).

    python -m bench tool precision-speed --out bench/results/precision-speed.jsonl

`--train` also times a whole training step of the library's own path: the
backbone in a `SiameseEncoder` (mean pooling), CoSENT on `--batch-size` random
pairs with random scores, the recipes' AdamW (`keras_cosent.optimizers.adamw`,
PyTorch's fused kernel on torch), compiled as `keras-cosent train` compiles it;
one warm-up step, then `--calls` timed ones. `--random-weights` builds MiniLM's
architecture with random weights instead of loading the checkpoint (the timings
are the same; for a machine that has no checkpoint package, such as a GPU
machine without the network). On a GPU, e.g.:

    python -m bench tool precision-speed --backends torch,jax --random-weights --train \
        --batch-size 128 --length 128 --calls 10

Prints one JSON line per (backend, policy) (also appended to `--out`) and a
Markdown table of float32 and bfloat16 seconds and their ratio.
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BACKENDS = ("torch", "jax", "tensorflow")
POLICIES = ("float32", "mixed_bfloat16")
# all-MiniLM-L6-v2's architecture (its config.json), for `--random-weights`.
MINILM_ARCHITECTURE = dict(vocabulary_size=30522, num_layers=6, num_heads=12, hidden_dim=384,
                           intermediate_dim=1536, max_sequence_length=512)


def _device(keras):
    """What Keras computes on: the GPU's name, else "cpu"."""
    backend = keras.backend.backend()
    if backend == "torch":
        import torch

        return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        return device.device_kind if device.platform == "gpu" else "cpu"
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    return tf.config.experimental.get_device_details(gpus[0]).get("device_name", "gpu") \
        if gpus else "cpu"


def _fastest(call, calls):
    call()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return round(min(times), 4)


def _train_step_seconds(keras, backbone, inputs, calls):
    import numpy as np

    from keras_cosent.losses import CoSENTLoss
    from keras_cosent.models import SentenceEncoder
    from keras_cosent.models import SiameseEncoder
    from keras_cosent.optimizers import adamw

    model = SiameseEncoder(SentenceEncoder(backbone, pooling="mean"))
    model.compile(optimizer=adamw(2e-5), loss=CoSENTLoss())
    half = inputs["token_ids"].shape[0] // 2
    pairs = {k: v[: 2 * half].reshape(half, 2, -1) for k, v in inputs.items()}
    scores = np.random.default_rng(1).uniform(0, 5, size=half).astype("float32")
    # train_on_batch returns the loss as a Python float: each call waits for the step.
    seconds = _fastest(lambda: model.train_on_batch(pairs, scores), calls)
    loss = model.train_on_batch(pairs, scores)
    if not np.isfinite(loss):
        raise SystemExit(f"training step loss is {loss} under {keras.mixed_precision.dtype_policy().name}")
    return seconds, half


def worker(args):
    import keras
    import keras_hub
    import numpy as np

    from recipes.training import BFLOAT16_CPU_FLAGS
    from recipes.training import cpu_flags

    keras.mixed_precision.set_global_policy(args.policy)
    if args.random_weights:
        backbone = keras_hub.models.BertBackbone(**MINILM_ARCHITECTURE)
    else:
        from bench.common import minilm_path

        backbone = keras_hub.models.BertBackbone.from_preset(minilm_path())
    rng = np.random.default_rng(0)
    shape = (args.batch_size, args.length)
    inputs = {"token_ids": rng.integers(1000, 20000, size=shape).astype("int32"),
              "segment_ids": np.zeros(shape, "int32"),
              "padding_mask": np.ones(shape, bool)}

    def call():
        out = backbone(inputs, training=False)["sequence_output"]
        return float(keras.ops.convert_to_numpy(keras.ops.sum(keras.ops.cast(out, "float32"))))

    line = {"backend": keras.backend.backend(), "policy": args.policy, "device": _device(keras),
            "weights": "random" if args.random_weights else "checkpoint",
            "batch_size": args.batch_size, "length": args.length,
            "forward_seconds": _fastest(call, args.calls),
            "cpu_bfloat16_flags": sorted((cpu_flags() or set()) & set(BFLOAT16_CPU_FLAGS))}
    if args.train:
        line["train_step_seconds"], line["train_pairs"] = _train_step_seconds(
            keras, backbone, inputs, args.calls)
    if keras.backend.backend() == "torch":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = torch.bfloat16 if "bfloat16" in args.policy else torch.float32
        a = torch.randn(2048, 384, device=device, dtype=dtype)
        b = torch.randn(384, 1536, device=device, dtype=dtype)
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        a @ b
        sync()
        start = time.perf_counter()
        a @ b
        sync()
        line["matmul_seconds"] = round(time.perf_counter() - start, 4)
        line["torch_threads"] = torch.get_num_threads()
    print(json.dumps(line), flush=True)


def table(lines):
    """Markdown: forward seconds per policy and their ratio; training-step seconds when timed."""
    by = {(g["backend"], g["policy"]): g for g in lines}
    backends = list(dict.fromkeys(g["backend"] for g in lines))
    out = []
    for key, title in (("forward_seconds", "forward"), ("train_step_seconds", "training step")):
        if not any(key in g for g in lines):
            continue
        if out:
            out.append("")
        out += [f"| backend, {title} | float32 s | mixed_bfloat16 s | bfloat16 / float32 |",
                "|---|---:|---:|---:|"]
        for backend in backends:
            f32, bf16 = (by.get((backend, policy)) for policy in POLICIES)
            f32, bf16 = (g if g and key in g else None for g in (f32, bf16))
            cells = [f"{g[key]:.3f}" if g else "-" for g in (f32, bf16)]
            ratio = f"{bf16[key] / f32[key]:.2f}x" if f32 and bf16 else "-"
            out.append(f"| {backend} | {cells[0]} | {cells[1]} | {ratio} |")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(prog="python -m bench tool precision-speed",
                                description=__doc__.splitlines()[0])
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--calls", type=int, default=3)
    p.add_argument("--train", action="store_true",
                   help="also time a training step (SiameseEncoder, CoSENT, AdamW)")
    p.add_argument("--random-weights", action="store_true",
                   help="MiniLM's architecture with random weights instead of the checkpoint")
    p.add_argument("--out")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--policy", default="float32", choices=POLICIES, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    from bench import harness

    backends = [b.strip() for b in args.backends.split(",")]
    unknown = set(backends) - set(BACKENDS)
    if unknown:
        p.error(f"--backends: unknown {sorted(unknown)}; choose from {list(BACKENDS)}")
    lines = []
    for backend in backends:
        for policy in POLICIES:
            env = dict(os.environ, KERAS_BACKEND=backend)
            cmd = [sys.executable, "-m", "bench.precision_speed", "--worker", "--policy", policy,
                   "--batch-size", str(args.batch_size), "--length", str(args.length),
                   "--calls", str(args.calls),
                   *(["--train"] if args.train else []),
                   *(["--random-weights"] if args.random_weights else [])]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"{backend} {policy} failed:\n{done.stderr[-3000:]}")
            line = json.loads(done.stdout.strip().splitlines()[-1])
            line.update(machine=harness.machine(),
                        load_average_after=[round(x, 2) for x in os.getloadavg()])
            lines.append(line)
            print(json.dumps(line), file=sys.stderr, flush=True)
            if args.out:
                with open(args.out, "a", encoding="utf-8") as f:
                    f.write(json.dumps(line) + "\n")
    print(table(lines))


if __name__ == "__main__":
    main()
