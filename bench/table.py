#!/usr/bin/env python3
"""Merges benchmark CSVs (`xfa bench --csv`, `bench/peers.py`) into one markdown table.

    python3 bench/table.py [--metric tflops|gbps] run.csv [more.csv ...] > table.md

One row per (dtype, D, causal, B, N); one TFLOP/s (or GB/s) column per backend (xfa's backends and each peer), then,
for each xfa backend, its ratio to each SDPA peer measured in the same files (x/flash, x/cudnn, ...).
Only quote ratios from CSVs taken in one run on one machine: the table does not check that for you.
"""
import csv
import sys

PEER_PREFIX = "sdpa_"


def read_rows(paths):
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(line for line in f if not line.startswith("#")):
                if row.get("backend") and row.get("tflops"):
                    rows.append(row)
    return rows


def main(args):
    metric = "tflops"
    if args[:1] == ["--metric"]:
        metric, args = args[1], args[2:]
    paths = args
    rows = read_rows(paths)
    if not rows:
        print("table.py: no benchmark rows", file=sys.stderr)
        return 1
    tflops, backends, paths_of = {}, [], {}
    for r in rows:
        if r["backend"] == "copy":  # the copy-bandwidth ceiling row of peers.py --decode
            print(f"Device-to-device copy in the same run: {float(r['gbps']):.0f} GB/s (read + write).\n")
            continue
        key = (r["dtype"], int(r["head_dim"]), int(r["causal"]), int(r["batch"]), int(r["seqlen"]))
        # a variant of a backend (xfa bench --heads-kv / --window: ".../gqa16:2/window4096:0") is its own column
        variant = r["path"].split("/")[1:] if not r["path"].startswith("decode/") else []
        name = "/".join([r["backend"]] + variant)
        if name not in backends:
            backends.append(name)
        paths_of.setdefault(name, set()).add(r["path"])
        tflops[key, name] = max(float(r[metric]), tflops.get((key, name), 0.0))
    ours = [b for b in backends if not b.startswith(PEER_PREFIX)]
    peers = [b for b in backends if b.startswith(PEER_PREFIX)]
    ratio_cols = [(o, p) for o in ours for p in peers if p != PEER_PREFIX + "math"] + \
                 [(o, p) for o in ours for p in peers if p == PEER_PREFIX + "math"]

    device = rows[0]["device"]
    if metric == "tflops":
        print(f"Device: {device}. TFLOP/s = 4·B·H·N²·D / median time, halved for causal (see the CSV for H).\n")
    else:
        print(f"Device: {device}. GB/s = bytes of K and V read / median time; N = KV-cache length.\n")
    print("Paths: " + "; ".join(f"{b}: {', '.join(sorted(paths_of[b]))}" for b in backends) + "\n")
    head = ["dtype", "D", "causal", "B", "N"] + backends + [f"{o}/{p[len(PEER_PREFIX):]}" for o, p in ratio_cols]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key in sorted({k for k, _ in tflops}):
        cells = [key[0]] + [str(x) for x in key[1:]]
        cells += [f"{tflops[key, b]:.1f}" if (key, b) in tflops else "–" for b in backends]
        for o, p in ratio_cols:
            a, b = tflops.get((key, o)), tflops.get((key, p))
            cells.append(f"{a / b:.2f}" if a and b else "–")
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
