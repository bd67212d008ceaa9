"""Seconds of a MiniLM forward pass in float32 and in mixed_bfloat16, per backend.

What `--mixed-precision mixed_bfloat16` costs on the machine at hand, before a run
pays it for an epoch: for each backend and policy, one fresh process loads the
packaged all-MiniLM-L6-v2 backbone under that global policy, calls it once on
`--batch-size` x `--length` random token ids (warm-up; JAX and TensorFlow
compile nothing here, the call is eager), then times `--calls` more; the figure
is the fastest. On PyTorch it also times one (2048 x 384) @ (384 x 1536) matmul
in each dtype, the shape of the backbone's feed-forward input, which is where
a CPU without bfloat16 instructions falls back to a slow kernel.

    python -m bench tool precision-speed --out bench/results/precision-speed.jsonl

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


def worker(args):
    import keras
    import keras_hub
    import numpy as np

    from bench.common import minilm_path
    from recipes.training import BFLOAT16_CPU_FLAGS
    from recipes.training import cpu_flags

    keras.mixed_precision.set_global_policy(args.policy)
    backbone = keras_hub.models.BertBackbone.from_preset(minilm_path())
    rng = np.random.default_rng(0)
    shape = (args.batch_size, args.length)
    inputs = {"token_ids": rng.integers(1000, 20000, size=shape).astype("int32"),
              "segment_ids": np.zeros(shape, "int32"),
              "padding_mask": np.ones(shape, bool)}

    def call():
        out = backbone(inputs, training=False)["sequence_output"]
        return float(keras.ops.convert_to_numpy(keras.ops.sum(keras.ops.cast(out, "float32"))))

    call()
    times = []
    for _ in range(args.calls):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    line = {"backend": keras.backend.backend(), "policy": args.policy,
            "batch_size": args.batch_size, "length": args.length,
            "forward_seconds": round(min(times), 4),
            "cpu_bfloat16_flags": sorted((cpu_flags() or set()) & set(BFLOAT16_CPU_FLAGS))}
    if keras.backend.backend() == "torch":
        import torch

        a = torch.randn(2048, 384)
        b = torch.randn(384, 1536)
        dtype = torch.bfloat16 if "bfloat16" in args.policy else torch.float32
        a, b = a.to(dtype), b.to(dtype)
        a @ b
        start = time.perf_counter()
        a @ b
        line["matmul_seconds"] = round(time.perf_counter() - start, 4)
        line["torch_threads"] = torch.get_num_threads()
    print(json.dumps(line), flush=True)


def table(lines):
    out = ["| backend | float32 s | mixed_bfloat16 s | bfloat16 / float32 |",
           "|---|---:|---:|---:|"]
    by = {(g["backend"], g["policy"]): g for g in lines}
    for backend in dict.fromkeys(g["backend"] for g in lines):
        f32, bf16 = by.get((backend, "float32")), by.get((backend, "mixed_bfloat16"))
        cells = [f"{g['forward_seconds']:.3f}" if g else "-" for g in (f32, bf16)]
        ratio = (f"{bf16['forward_seconds'] / f32['forward_seconds']:.1f}x"
                 if f32 and bf16 else "-")
        out.append(f"| {backend} | {cells[0]} | {cells[1]} | {ratio} |")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(prog="python -m bench tool precision-speed",
                                description=__doc__.splitlines()[0])
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--calls", type=int, default=3)
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
                   "--calls", str(args.calls)]
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
