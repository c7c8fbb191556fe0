#!/usr/bin/env python3
"""Ask loom's performance model from Python (docs/python.md, "Performance model"): how a model
scales from 1 GPU to a cluster with two codecs, and which machines a budget buys.

    .venv/bin/pip install .          # once (docs/python.md)
    .venv/bin/python examples/advise.py [WORKLOAD_OR_CONFIG] [--budget USD]
"""

import argparse

import loom


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload", nargs="?", default="resnet50",
                    help="reference workload (resnet50, bert-large, ...) or a loom config .toml")
    ap.add_argument("--budget", type=float, default=100_000)
    args = ap.parse_args()

    points = loom.scale(args.workload, gpu="a100-80gb-sxm4", nodes=4, gpus_per_node=8,
                        inter="100gbe", codecs=["fp32", "int8"])
    print(f"{args.workload} on up to 4 x 8 A100 (100 GbE between machines):")
    print(f"  {'series':<10} {'gpus':>5} {'step':>9} {'samples/s':>11} {'speedup':>8}")
    for p in points:
        print(f"  {p['series']:<10} {p['gpus']:>5} {1e3 * p['step_s']:>7.1f}ms "
              f"{p['samples_per_s']:>11.0f} {p['speedup']:>8.2f}")

    for rank_by in ("time", "total"):
        advice = loom.advise(args.workload, budget=args.budget, rank_by=rank_by, top=3)
        print(f"\n${args.budget:,.0f}, ranked by {rank_by}:")
        for o in advice["ranked"]:
            print(f"  {o['label']:<55} {o['samples_per_s']:>9.0f} samples/s "
                  f"(+-{100 * advice['band']:.0f}%)  capital ${o['capital_usd']:,.0f}  "
                  f"energy ${o['energy_usd']:,.0f}  {o['sync']} {o['codec']}")
        if not advice["ranked"]:
            print("  nothing within the budget:", "; ".join(advice["notes"]) or "-")


if __name__ == "__main__":
    main()
