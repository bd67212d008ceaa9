"""Summarises a py-spy raw profile: the share of samples per function, inclusive.

Profiles in BENCHMARKS.md were taken with, for example:

    .venv/bin/py-spy record -r 50 -f raw -o /tmp/peer.raw -- \\
        .venv/bin/python bench/speed_worker.py --stack peer --pairs 96
    .venv/bin/python bench/pyspy_summary.py /tmp/peer.raw --within "epoch (bench/speed_worker"

    KERAS_BACKEND=torch .venv/bin/py-spy record -r 50 -f raw -o /tmp/torch.raw -- \\
        .venv/bin/python bench/speed_worker.py --stack torch --pairs 96
    .venv/bin/python bench/pyspy_summary.py /tmp/torch.raw --within "train_step ("

Only samples whose stack contains `--within` count (e.g. the training loop, not
start-up or encoding); each function is counted once per sample however deep.
"""

import argparse
import collections


def summarise(path, within, top):
    inclusive = collections.Counter()
    own = collections.Counter()
    total = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            if within and not any(within in frame for frame in frames):
                continue
            n = int(count)
            total += n
            own[frames[-1]] += n
            # "function (file:line)" -> "function (file)": one entry per function.
            names = {frame.split(":")[0] + ")" if " (" in frame else frame for frame in frames}
            for name in names:
                inclusive[name] += n
    lines = [f"{total} samples within {within!r}", "", "inclusive:"]
    lines += [f"{100 * n / total:5.1f}%  {name}" for name, n in inclusive.most_common(top)]
    lines += ["", "self (innermost frame):"]
    lines += [f"{100 * n / total:5.1f}%  {name}" for name, n in own.most_common(top // 3)]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("raw", help="py-spy record -f raw output")
    p.add_argument("--within", default="", help="count only stacks with a frame containing this")
    p.add_argument("--top", type=int, default=45)
    args = p.parse_args()
    print(summarise(args.raw, args.within, args.top))


if __name__ == "__main__":
    main()
