#!/usr/bin/env python3
"""Markdown table of the Hopper kernel beside SDPA cuDNN and flash, from CSVs in xfa bench's schema.

    python3 bench/hopper_table.py xfa.csv peers.csv > table.md

Rows: dtype, D, causal, N; median TFLOP/s of each backend (4*B*H*N^2*D, halved for causal) and the
ratios of xfa_cuda_sm90 to sdpa_cudnn and sdpa_flash. Other xfa_* rows (ablation builds) get a column each.
"""
import csv
import sys


def main():
    rows = {}
    backends = []
    for path in [x for x in sys.argv[1:] if not x.startswith("--")]:
        with open(path) as f:
            for r in csv.DictReader(line for line in f if not line.startswith("#")):
                if not r.get("backend") or r["backend"] == "backend":
                    continue
                key = (r["dtype"], int(r["head_dim"]), int(r["causal"]), int(r["seqlen"]))
                rows.setdefault(key, {})[r["backend"]] = float(r["tflops"])
                if r["backend"] not in backends:
                    backends.append(r["backend"])
    main_b = "xfa_cuda_sm90"
    extra = [b for b in backends if b.startswith("xfa_") and b != main_b]
    only = [c for c in sys.argv[1:] if c.startswith("--cols=")]
    if only:
        extra = [b for b in extra if b in only[0][7:].split(",")]
    cols = [main_b] + extra + ["sdpa_cudnn", "sdpa_flash"]
    print("| dtype | D | causal | N | " + " | ".join(cols) + " | ÷cuDNN | ÷flash |")
    print("|" + "---|" * (4 + len(cols) + 2))
    for key in sorted(rows):
        r = rows[key]
        cells = [f"{r[c]:.0f}" if c in r else "-" for c in cols]
        ratio = lambda peer: f"{r[main_b] / r[peer]:.2f}" if main_b in r and r.get(peer) else "-"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | " + " | ".join(cells) +
              f" | {ratio('sdpa_cudnn')} | {ratio('sdpa_flash')} |")


if __name__ == "__main__":
    main()
