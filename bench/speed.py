"""Side-by-side speed benchmark: keras-cosent on each backend against sentence-transformers.

Runs each stack in its own process (Keras fixes its backend at import), alternating
the stacks round by round so that drifts in machine load hit all of them alike,
and prints medians and ratios to the peer, both the ratio of the medians and the
median of per-round ratios (encoding: the second pass over the test set; the
first, which includes per-shape compilation, in its own column). Usage:

    .venv/bin/python bench/speed.py --rounds 2 --pairs 512 --json bench/results/speed.json
    .venv/bin/python bench/speed.py --from-json bench/results/speed.json   # its summary again

A stack named `<backend>-padded` (e.g. `jax-padded`) is that keras backend
training on padded batches instead of packed ones (`speed_worker.py --no-packing`),
for a packed/padded comparison inside one run; `jax-unpooled` is JAX with glibc's
default allocator instead of the one `keras-cosent` sets (`speed_worker.py
--off glibc_pool`, `keras_cosent.runtime`).

See bench/speed_worker.py for exactly what is timed.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def summarize(runs, stacks):
    """Prints and returns the medians, the ratio of medians to the peer's, and the
    median of per-round ratios (each run against the peer's run of the same round,
    which the machine's drift between rounds affects far less)."""

    def med(stack, key):
        return statistics.median(r[key] for r in runs if r["stack"] == stack)

    def round_ratio(stack, key):
        base_by_round = {r["round"]: r[key] for r in runs if r["stack"] == base}
        return statistics.median(
            r[key] / base_by_round[r["round"]]
            for r in runs if r["stack"] == stack and r["round"] in base_by_round)

    base = "peer" if "peer" in stacks else stacks[0]
    summary = []
    print(f"\n{'stack':<12}{'train pairs/s':>14}{'ratio':>7}{'per-round':>10}"
          f"{'encode sent/s':>15}{'ratio':>7}{'per-round':>10}"
          f"{'1st pass':>10}{'warm-up s':>11}{'peak MiB':>10}")
    for stack in stacks:
        row = {
            "stack": stack,
            "train_pairs_per_s": med(stack, "train_pairs_per_s"),
            "train_ratio": med(stack, "train_pairs_per_s") / med(base, "train_pairs_per_s"),
            "train_ratio_per_round": round_ratio(stack, "train_pairs_per_s"),
            "encode_sentences_per_s": med(stack, "encode_sentences_per_s"),
            "encode_ratio": med(stack, "encode_sentences_per_s") / med(base, "encode_sentences_per_s"),
            "encode_ratio_per_round": round_ratio(stack, "encode_sentences_per_s"),
            "encode_first_sentences_per_s": med(stack, "encode_first_sentences_per_s"),
            "warmup_s": med(stack, "warmup_s"),
            "peak_rss_mib": med(stack, "peak_rss_mib"),
        }
        summary.append(row)
        print(f"{stack:<12}{row['train_pairs_per_s']:>14.2f}{row['train_ratio']:>7.2f}"
              f"{row['train_ratio_per_round']:>10.2f}"
              f"{row['encode_sentences_per_s']:>15.1f}{row['encode_ratio']:>7.2f}"
              f"{row['encode_ratio_per_round']:>10.2f}"
              f"{row['encode_first_sentences_per_s']:>10.1f}{row['warmup_s']:>11.1f}{row['peak_rss_mib']:>10.0f}")
    return summary


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stacks", default="peer,tensorflow,jax,torch")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--pairs", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--json", default=None, help="write all raw runs and the summary here")
    p.add_argument("--from-json", default=None,
                   help="print the summary of a saved run's JSON instead of running")
    args = p.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        summarize(saved["runs"], saved["args"]["stacks"].split(","))
        return
    stacks = args.stacks.split(",")
    runs = []
    for rnd in range(args.rounds):
        for stack in stacks:
            worker_stack, padded = stack.removesuffix("-padded"), stack.endswith("-padded")
            unpooled = worker_stack.endswith("-unpooled")
            worker_stack = worker_stack.removesuffix("-unpooled")
            cmd = [sys.executable, os.path.join(HERE, "speed_worker.py"), "--stack", worker_stack,
                   "--pairs", str(args.pairs), "--batch-size", str(args.batch_size),
                   "--max-length", str(args.max_length)]
            if padded:
                cmd.append("--no-packing")
            if unpooled:
                cmd += ["--off", "glibc_pool"]
            t0 = time.time()
            out = subprocess.run(cmd, capture_output=True, text=True)
            lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
            if out.returncode != 0 or not lines:
                sys.stderr.write(out.stderr[-3000:])
                raise SystemExit(f"round {rnd + 1}: stack {stack} failed (exit {out.returncode})")
            rec = json.loads(lines[-1])
            rec["stack"] = stack
            rec["round"] = rnd + 1
            rec["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
            runs.append(rec)
            print(f"round {rnd + 1} {stack:<10} train {rec['train_pairs_per_s']:7.2f} pairs/s  "
                  f"encode {rec['encode_sentences_per_s']:7.1f} sent/s "
                  f"(1st pass {rec['encode_first_sentences_per_s']:6.1f})  warm-up {rec['warmup_s']:6.1f}s  "
                  f"peak {rec['peak_rss_mib']:6.0f} MiB  ({time.time() - t0:.0f}s)", flush=True)

    summary = summarize(runs, stacks)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "runs": runs, "summary": summary}, f, indent=2)


if __name__ == "__main__":
    main()
