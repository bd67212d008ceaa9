"""Cached (GradCache) against uncached InfoNCE steps: peak memory and seconds per batch.

For each effective batch size B, one fresh process (so that its peak RSS is that
configuration's alone) loads the packaged all-MiniLM-L6-v2, builds the InfoNCE
training set-up with `keras_cosent.training.build` on STS-B train pairs (all
pairs as (anchor, positive) rows, file order, padded batches, max length 64)
and times `--steps` optimizer steps of B rows: cached with `mini_batch_size=m`
(`keras_cosent.models.CachedSiameseEncoder`) and, up to `--max-uncached` rows,
uncached (`SiameseEncoder`, the same padded batches). Both use the same AdamW
as `keras-cosent train`.

    python -m bench tool gradcache --backend torch --sizes 256,1024,4096 \\
        --mini-batch-size 32 --out bench/results/gradcache.jsonl

The runtime pieces are on, as `keras-cosent train` sets them; on PyTorch that
includes `glibc_mmap_threshold` for the cached step's passes. `--off
glibc_mmap_threshold` measures glibc's defaults instead.

Prints one JSON line per run (also appended to `--out`) and a Markdown table.
Columns: `rss_model_mib` (after loading and building, before any step),
`peak_rss_mib` (the process's peak at the end), `seconds` (the fastest of the
timed steps (two at B <= 256, one above); the first step is timed too, with no separate
warm-up, since PyTorch's eager steps do not compile).
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def worker(args):
    import numpy as np

    from bench.common import minilm_path
    from bench.common import peak_rss_mib
    from bench.common import read_sts_pairs
    import keras

    import keras_cosent
    from keras_cosent import runtime

    runtime.enable()
    if args.off:
        runtime.disable(args.off.split(","))
    keras.utils.set_random_seed(0)
    s1, s2, _ = read_sts_pairs("train")
    rows = args.rows * args.steps
    data = keras_cosent.data.PairDataset([list(s1[:rows]), list(s2[:rows])], None,
                                         source="sts-train")
    encoder = keras_cosent.models.SentenceEncoder.from_checkpoint(
        minilm_path(), pooling="mean", max_length=64)
    setup = keras_cosent.training.build(
        encoder, data, "infonce", batch_size=args.rows, epochs=1, shuffle=False,
        packing=False, mini_batch_size=args.mini_batch_size,
    )
    rss_model = peak_rss_mib()
    seconds = []
    for step in range(args.steps):
        x, y = setup.batches[step]
        start = time.perf_counter()
        logs = setup.model.train_on_batch(x, y, return_dict=True)
        float(logs["loss"])
        seconds.append(time.perf_counter() - start)
    record = {
        "backend": keras.backend.backend(), "rows": args.rows,
        "mini_batch_size": args.mini_batch_size, "columns": int(x["token_ids"].shape[1]),
        "seq": int(x["token_ids"].shape[2]), "steps": args.steps,
        "seconds": round(min(seconds), 2), "all_seconds": [round(s, 2) for s in seconds],
        "loss": float(logs["loss"]), "rss_model_mib": round(rss_model),
        "peak_rss_mib": round(peak_rss_mib()), "finite": bool(np.isfinite(logs["loss"])),
        "runtime": {name: piece["on"] for name, piece in runtime.active().items()},
    }
    print("RESULT " + json.dumps(record), flush=True)


def run(args):
    from bench import harness

    mini_batch_size = args.mini_batch_size or 32
    configs = []
    for rows in args.sizes:
        configs.append((rows, mini_batch_size))
        if rows <= args.max_uncached:
            configs.append((rows, None))
    records = []
    # Lines already in OUT stay: each invocation adds its own once it is done.
    earlier = harness.earlier_results(args.out)
    for rows, mini in configs:
        steps = args.steps if rows <= 256 else 1
        command = [sys.executable, "-m", "bench.gradcache", "--worker", "--rows", str(rows),
                   "--steps", str(steps)]
        if mini is not None:
            command += ["--mini-batch-size", str(mini)]
        if args.off:
            command += ["--off", args.off]
        env = dict(os.environ, KERAS_BACKEND=args.backend)
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        lines = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")]
        if done.returncode != 0 or not lines:
            record = {"backend": args.backend, "rows": rows, "mini_batch_size": mini,
                      "error": f"exit {done.returncode}: {done.stderr.strip()[-300:]}"}
        else:
            record = json.loads(lines[-1][len("RESULT "):])
        record.update(machine=harness.machine(), versions=harness.versions(),
                      git=harness.git_state())
        print(json.dumps(record), flush=True)
        records.append(record)
        if args.out:  # to OUT.partial until every size has run
            harness.write_results(args.out, earlier + harness.jsonl(records), complete=False)
    if args.out:
        harness.write_results(args.out, earlier + harness.jsonl(records), complete=True)
    print(table(records))
    failed = [r for r in records if "error" in r]
    if failed:
        # Kept as rows (a size that runs out of memory is a finding), but not a
        # success for a script that runs the benchmark.
        print(f"{len(failed)} of {len(records)} runs failed; their rows say how",
              file=sys.stderr)
        sys.exit(1)


def table(records):
    lines = ["| B | step | tokens/row x cols | s / batch | peak RSS MiB | RSS before step MiB |",
             "|---:|:---|---:|---:|---:|---:|"]
    for r in records:
        step = "uncached" if r["mini_batch_size"] is None else f"cached, m={r['mini_batch_size']}"
        if "error" in r:
            lines.append(f"| {r['rows']} | {step} | | failed: {r['error'][:80]} | | |")
            continue
        lines.append(f"| {r['rows']} | {step} | {r['seq']} x {r['columns']} | {r['seconds']} "
                     f"| {r['peak_rss_mib']} | {r['rss_model_mib']} |")
    return "\n".join(lines)


def main():
    from bench.common import positive_int, positive_int_list

    p = argparse.ArgumentParser(prog="python -m bench tool gradcache",
                                description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    p.add_argument("--backend", default="torch", choices=("torch", "jax", "tensorflow"))
    p.add_argument("--sizes", default="256,1024,4096",
                   type=positive_int_list)
    p.add_argument("--mini-batch-size", type=int, default=None, help="m (default 32)")
    p.add_argument("--max-uncached", type=int, default=1024,
                   help="largest B run uncached (24 GiB machine: 1024)")
    p.add_argument("--steps", type=positive_int, default=2, help="timed steps per run (B > 256: 1)")
    p.add_argument("--off", default="",
                   help="comma-separated `keras_cosent.runtime` pieces to leave off (e.g. "
                        "glibc_mmap_threshold); the rest are on, as `keras-cosent` sets them")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    # Checked before the first run (as --sizes and --steps are, by their types): a bad
    # value otherwise failed in every worker.
    mini_batch_size = 32 if args.mini_batch_size is None else args.mini_batch_size
    if mini_batch_size < 1 or mini_batch_size > min(args.sizes):
        p.error(f"--mini-batch-size {mini_batch_size}: expected 1 to the smallest of --sizes "
                f"({min(args.sizes)}); a larger one splits no batch")
    run(args)


if __name__ == "__main__":
    main()
