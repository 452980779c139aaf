#!/usr/bin/env python3
"""Turns benchmark CSVs (`xfa bench --csv`, bench/peers.py) into one PNG chart.

    python3 bench/plot.py out.png results/a.csv [results/b.csv ...]

One panel per (dtype, head dim, causal); in each, TFLOP/s against sequence length, one line per
backend (xfa's backends by backend/path, peers by name).
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, paths = sys.argv[1], sys.argv[2:]
    series = defaultdict(lambda: defaultdict(list))  # panel -> line -> [(seqlen, tflops)]
    device = ""
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(line for line in f if not line.startswith("#")):
                panel = (row["dtype"], int(row["head_dim"]), int(row["causal"]))
                name = row["backend"] if row["backend"].startswith("sdpa") else f"xfa {row['backend']} ({row['path']})"
                series[panel][name].append((int(row["seqlen"]), float(row["tflops"])))
                device = device or row["device"]
    panels = sorted(series)
    if not panels:
        sys.exit("plot: no rows")
    cols = min(len(panels), 2)
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 4.2 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        for name, points in sorted(series[panel].items()):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
        dtype, d, causal = panel
        ax.set_title(f"{dtype}, D={d}, {'causal' if causal else 'non-causal'}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length")
        ax.set_ylabel("TFLOP/s")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(f"attention forward on {device}")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
