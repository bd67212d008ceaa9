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

`peer` among `--backends` times sentence-transformers on the same architecture,
sizes and random token ids, as bench/stacks.py trains it: its forward pass
(`SentenceTransformer` in eval mode, under `torch.no_grad`) and its training step
(`CoSENTLoss` over mean pooling, PyTorch's fused AdamW), on the GPU when there is
one; `mixed_bfloat16` is `torch.autocast` to bfloat16, what its trainer's `bf16=True`
runs. With `--random-weights` it builds a random `transformers` `BertModel` of
MiniLM's configuration (on a machine with neither network nor checkpoint). The
table then gives each stack's seconds over the peer's under the same policy:

    python -m bench tool precision-speed --backends peer,torch,jax --random-weights \
        --train --batch-size 128 --length 128 --calls 10

Prints one JSON line per (backend, policy) (also appended to `--out`) and a
Markdown table of float32 and bfloat16 seconds and their ratio.
"""

import argparse
import contextlib
import functools
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BACKENDS = ("torch", "jax", "tensorflow")
PEER = "peer"  # sentence-transformers, run by `peer_worker` on PyTorch
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


def _train_step_seconds(keras, backbone, inputs, calls, jit_compile="auto"):
    import numpy as np

    from keras_cosent.losses import CoSENTLoss
    from keras_cosent.models import SentenceEncoder
    from keras_cosent.models import SiameseEncoder
    from keras_cosent.optimizers import adamw

    model = SiameseEncoder(SentenceEncoder(backbone, pooling="mean"))
    model.compile(optimizer=adamw(2e-5), loss=CoSENTLoss(), jit_compile=jit_compile)
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
            keras, backbone, inputs, args.calls, True if args.jit_compile else "auto")
        line["jit_compile"] = bool(args.jit_compile)
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


def _peer_model(random_weights, device):
    """sentence-transformers' Transformer + mean Pooling on MiniLM (random weights if asked)."""
    import tempfile

    from sentence_transformers import SentenceTransformer
    from sentence_transformers import models

    if not random_weights:
        from bench.common import minilm_path

        return SentenceTransformer(minilm_path(), device=device)
    from transformers import BertConfig
    from transformers import BertModel

    a = MINILM_ARCHITECTURE
    # Transformer reads a folder into memory; the folder (90 MB) goes once it has.
    with tempfile.TemporaryDirectory(prefix="peer-minilm-") as folder:
        BertModel(BertConfig(
            vocab_size=a["vocabulary_size"], hidden_size=a["hidden_dim"],
            num_hidden_layers=a["num_layers"], num_attention_heads=a["num_heads"],
            intermediate_size=a["intermediate_dim"],
            max_position_embeddings=a["max_sequence_length"])).save_pretrained(folder)
        # The tokenizer is never called (the steps take token ids); Transformer loads one.
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(specials + [f"w{i}" for i in range(a["vocabulary_size"] - 5)])
                    + "\n")
        transformer = models.Transformer(folder)
    pooling = models.Pooling(a["hidden_dim"], "mean")
    return SentenceTransformer(modules=[transformer, pooling], device=device)


def peer_worker(args):
    """The peer's forward pass and training step, timed as `worker` times keras-cosent's."""
    import numpy as np
    import torch

    try:  # sentence-transformers 6.1 and later
        from sentence_transformers.sentence_transformer.losses import CoSENTLoss
    except ImportError:
        from sentence_transformers.losses import CoSENTLoss

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = _peer_model(args.random_weights, device)
    autocast = functools.partial(torch.autocast, device, dtype=torch.bfloat16) \
        if args.policy == "mixed_bfloat16" else contextlib.nullcontext
    rng = np.random.default_rng(0)
    shape = (args.batch_size, args.length)
    ids = torch.from_numpy(rng.integers(1000, 20000, size=shape).astype("int64")).to(device)
    features = {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                "token_type_ids": torch.zeros_like(ids)}

    def call():
        model.eval()
        with torch.no_grad(), autocast():
            out = model(dict(features))["token_embeddings"]
        return float(out.float().sum())  # waits for the GPU, as `worker`'s call does

    line = {"backend": PEER, "policy": args.policy,
            "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
            "weights": "random" if args.random_weights else "checkpoint",
            "batch_size": args.batch_size, "length": args.length,
            "forward_seconds": _fastest(call, args.calls)}
    if args.train:
        half = args.batch_size // 2
        pair = [{k: v[:half] for k, v in features.items()},
                {k: v[half:2 * half] for k, v in features.items()}]
        scores = torch.from_numpy(
            np.random.default_rng(1).uniform(0, 5, size=half).astype("float32")).to(device)
        loss_fn = CoSENTLoss(model, scale=20.0)
        opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01, fused=True)

        def step():
            model.train()
            with autocast():
                loss = loss_fn([dict(f) for f in pair], scores)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return float(loss.detach())  # waits for the step

        line["train_step_seconds"] = _fastest(step, args.calls)
        line["train_pairs"] = half
        if not np.isfinite(step()):
            raise SystemExit(f"peer training step loss is not finite under {args.policy}")
    import sentence_transformers

    line["versions"] = {"sentence-transformers": sentence_transformers.__version__,
                        "torch": torch.__version__}
    print(json.dumps(line), flush=True)


def table(lines):
    """Markdown: seconds per policy and their ratio, for the forward pass and the
    training step when timed; with a peer line, each stack's seconds over the peer's."""
    by = {(g["backend"], g["policy"]): g for g in lines}
    backends = list(dict.fromkeys(g["backend"] for g in lines))
    has_peer = PEER in backends
    out = []
    for key, title in (("forward_seconds", "forward"), ("train_step_seconds", "training step")):
        if not any(key in g for g in lines):
            continue
        if out:
            out.append("")
        header = f"| backend, {title} | float32 s | mixed_bfloat16 s | bfloat16 / float32 |"
        rule = "|---|---:|---:|---:|"
        if has_peer:
            header += " float32 / peer | bfloat16 / peer |"
            rule += "---:|---:|"
        out += [header, rule]
        peer = [by.get((PEER, policy)) for policy in POLICIES]
        for backend in backends:
            f32, bf16 = (by.get((backend, policy)) for policy in POLICIES)
            f32, bf16 = (g if g and key in g else None for g in (f32, bf16))
            cells = [f"{g[key]:.3f}" if g else "-" for g in (f32, bf16)]
            ratio = f"{bf16[key] / f32[key]:.2f}x" if f32 and bf16 else "-"
            row = f"| {backend} | {cells[0]} | {cells[1]} | {ratio} |"
            if has_peer:
                row += "".join(
                    f" {g[key] / ref[key]:.2f}x |" if g and ref and key in ref else " - |"
                    for g, ref in zip((f32, bf16), peer))
            out.append(row)
    return "\n".join(out)


def main():
    from bench.common import positive_int

    p = argparse.ArgumentParser(prog="python -m bench tool precision-speed",
                                description=__doc__.splitlines()[0])
    p.add_argument("--backends", default=",".join(BACKENDS),
                   help=f"comma-separated, from {', '.join(BACKENDS + (PEER,))} "
                        "(peer: sentence-transformers on PyTorch)")
    p.add_argument("--batch-size", type=positive_int, default=16)
    p.add_argument("--length", type=positive_int, default=64)
    p.add_argument("--calls", type=positive_int, default=3)
    p.add_argument("--train", action="store_true",
                   help="also time a training step (SiameseEncoder, CoSENT, AdamW)")
    p.add_argument("--jit-compile", action="store_true",
                   help="compile the keras training step with jit_compile=True "
                        "(torch.compile on PyTorch; XLA on JAX and TensorFlow, as by default)")
    p.add_argument("--random-weights", action="store_true",
                   help="MiniLM's architecture with random weights instead of the checkpoint")
    p.add_argument("--out")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--policy", default="float32", choices=POLICIES, help=argparse.SUPPRESS)
    p.add_argument("--stack", default="keras", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        (peer_worker if args.stack == PEER else worker)(args)
        return
    from bench import harness

    backends = [b.strip() for b in args.backends.split(",")]
    unknown = set(backends) - set(BACKENDS) - {PEER}
    if unknown:
        p.error(f"--backends: unknown {sorted(unknown)}; choose from {list(BACKENDS) + [PEER]}")
    lines = []
    # Lines already in OUT stay: each invocation adds its own once it is done.
    earlier = harness.earlier_results(args.out)
    for backend in backends:
        for policy in POLICIES:
            env = dict(os.environ, KERAS_BACKEND="torch" if backend == PEER else backend)
            cmd = [sys.executable, "-m", "bench.precision_speed", "--worker", "--policy", policy,
                   "--stack", PEER if backend == PEER else "keras",
                   "--batch-size", str(args.batch_size), "--length", str(args.length),
                   "--calls", str(args.calls),
                   *(["--train"] if args.train else []),
                   *(["--jit-compile"] if args.jit_compile else []),
                   *(["--random-weights"] if args.random_weights else [])]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"{backend} {policy} failed:\n{done.stderr[-3000:]}")
            line = json.loads(done.stdout.strip().splitlines()[-1])
            line.update(machine=harness.machine(), versions=harness.versions(),
                        git=harness.git_state(),
                        load_average_after=[round(x, 2) for x in os.getloadavg()])
            lines.append(line)
            print(json.dumps(line), file=sys.stderr, flush=True)
            if args.out:  # to OUT.partial until every cell has run
                harness.write_results(args.out, earlier + harness.jsonl(lines), complete=False)
    if args.out:
        harness.write_results(args.out, earlier + harness.jsonl(lines), complete=True)
    print(table(lines))


if __name__ == "__main__":
    main()
