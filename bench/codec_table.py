#!/usr/bin/env python3
"""The accuracy cost of every lossy way to synchronise, on the three reference networks.

    bench/codec_table.py run   [--networks mlp,resnet20,gpt-char] [--configs fp16,int8,...]
                               [--seeds 0,1] [--data DIR] [--loom PATH] [--store FILE]
                               [--max-runs N] [--dry-run] [--keep DIR]
    bench/codec_table.py table [--store FILE] [--json]

Each network trains its recipe (docs/compress.md, "The three reference networks") with 2
workers once per (configuration, seed). A configuration is fp32 or one lossy way to
synchronise: the codecs fp16, bf16, int8, onebit, topk and powersgd through the allreduce,
block momentum (sync = "bmuf") and, where the recipe's optimizer is Adam, 1-bit Adam
(optim.name = "onebit_adam") in place of 1-bit. Runs of one seed share the initial weights and
the data order, so the difference of a configuration from fp32 is paired by seed.

`run` appends one JSON line per finished run to the store (bench/results/codec_table.jsonl by
default) and skips every (network, recipe, configuration, seed) the store already holds, so the
table can be filled over several sittings (creating the file STORE.stop ends a sitting after
the run in progress). A change to a recipe's config file or to its settings below starts that
network's runs afresh (the recipe's fingerprint is part of the key); a change to one of loom's
defaults does not, so the rows it affects are taken out of the store by hand.
`table` prints, per network and configuration: the seeds it has, the mean of its metric, its
difference from fp32 paired by seed (mean, standard error and each seed's), the bytes a worker
sent per step and the target (at most 0.3 points of test accuracy below fp32 on the MLP and
ResNet-20, at most 0.03 bits/byte of validation loss above fp32 on gpt-char; judged once every
seed is in), then one JSON object per row ({"bench":"codec_table",...}; --json: those alone).
Accuracy does not depend on the machine's load, so other work may run meanwhile; samples/s in
the store does.

Run times on a 2-core AMD EPYC Zen 3: MLP about 20 s a run (top-k and PowerSGD up to 80 s),
ResNet-20 about 10 min, gpt-char 6-7 min. gpt-char needs token shards: --data DIR from `scripts/fortunes-shards
DIR bytes` (made in a temporary folder when --data is absent).
"""
import argparse
import hashlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STORE = os.path.join(ROOT, "bench", "results", "codec_table.jsonl")
FORMAT_VERSION = 1


class Network:
    def __init__(self, name, config, sets, seeds, metric, optimizer, target, unit):
        self.name = name
        self.config = config          # the recipe's config file, relative to the repository
        self.sets = sets              # --set arguments every run of the recipe takes
        self.seeds = seeds
        self.metric = metric          # the summary.json key compared
        self.optimizer = optimizer
        self.target = target          # the largest cost allowed, in `unit`
        self.unit = unit

    def configs(self):
        lossy = ["fp16", "bf16", "int8", "onebit", "topk", "powersgd", "bmuf"]
        if self.optimizer == "adam":
            lossy[lossy.index("onebit")] = "onebit_adam"
        return ["fp32"] + lossy

    def diff(self, value, fp32):
        """value - fp32's, in points of test accuracy or in bits per byte."""
        return (value - fp32) * (100.0 if self.metric == "test_acc" else 1.0)

    def within(self, mean_diff):
        """Whether a mean difference meets the target: at most `target` worse than fp32."""
        worse = -mean_diff if self.metric == "test_acc" else mean_diff
        return worse <= self.target

    def fingerprint(self):
        with open(os.path.join(ROOT, self.config), "rb") as f:
            recipe = tomllib.load(f)
        recipe.pop("output", None)
        text = json.dumps({"config": recipe, "sets": self.sets}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


NETWORKS = {
    "mlp": Network("mlp", "configs/mlp.toml", ["transport=thread", "workers=2"],
                   [0, 1, 2, 3, 4], "test_acc", "sgd", 0.3, "points"),
    "resnet20": Network("resnet20", "configs/resnet20.toml", ["transport=thread", "workers=2"],
                        [0, 1, 2], "test_acc", "sgd", 0.3, "points"),
    "gpt-char": Network("gpt-char", "configs/gpt_char.toml", ["transport=thread"],
                        [0, 1, 2], "val_bits_per_byte", "adam", 0.03, "bits/byte"),
}


def config_sets(config):
    if config == "bmuf":
        return ["sync=bmuf"]
    if config == "onebit_adam":
        return ["optim.name=onebit_adam"]
    return [f"codec={config}"]


def cpu_name():
    isa = "avx512" if "avx512f" in open("/proc/cpuinfo").read() else "avx2"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return f"{line.split(':', 1)[1].strip()} ({isa})"
    return f"{platform.machine()} ({isa})"


def read_store(path):
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"codec_table.py: {path}:{n}: not a JSON line ({e})")
            if row.get("format_version") != FORMAT_VERSION:
                sys.exit(f"codec_table.py: {path}:{n}: format_version "
                         f"{row.get('format_version')!r}, this script reads {FORMAT_VERSION}")
            rows.append(row)
    return rows


def bytes_per_step(run_dir):
    sent = steps = 0
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            e = json.loads(line)
            if e.get("kind") == "epoch":
                sent += e["bytes_sent"]
                steps += e["steps"]
    return sent / max(1, steps)


def train(args, net, config, seed, run_dir, data):
    recipe = net.sets + config_sets(config) + [f"seed={seed}"]  # what the store's command names
    sets = recipe + ["progress=none", f"output.dir={run_dir}"]
    if net.name == "gpt-char":
        sets += [f"data.train_shards={data}/train.shard", f"data.validation={data}/valid.shard"]
    cmd = [args.loom, "train", os.path.join(ROOT, net.config), "--force"]
    for s in sets:
        cmd += ["--set", s]
    log = run_dir + ".log"
    start = time.time()
    with open(log, "w") as out:
        rc = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT)
    if rc != 0:
        tail = open(log).read().splitlines()[-5:]
        print(f"codec_table.py: {net.name} {config} seed {seed} failed (exit {rc}):",
              *tail, sep="\n  ", file=sys.stderr)
        return None
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    return {
        "format_version": FORMAT_VERSION, "network": net.name, "recipe": net.fingerprint(),
        "config": config, "seed": seed, "metric": net.metric, "value": summary[net.metric],
        "bytes_per_step": bytes_per_step(run_dir), "steps": summary["steps"],
        "samples_per_s": summary["samples_per_s"], "wall_s": round(time.time() - start, 1),
        "loom": summary["loom_version"], "cpu": cpu_name(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": " ".join(["train", net.config] + [f"--set {s}" for s in recipe]),
    }


def selected(value, known, what):
    if value is None:
        return list(known)
    picked = [v.strip() for v in value.split(",") if v.strip()]
    for v in picked:
        if v not in known:
            sys.exit(f"codec_table.py: unknown {what} '{v}' (known: {', '.join(map(str, known))})")
    return picked


def run(args):
    networks = [NETWORKS[n] for n in selected(args.networks, NETWORKS, "network")]
    if not os.path.isfile(args.loom) or not os.access(args.loom, os.X_OK):
        sys.exit(f"codec_table.py: no loom binary at {args.loom} (--loom PATH)")
    done = {(r["network"], r["recipe"], r["config"], r["seed"]) for r in read_store(args.store)}
    todo = {}
    for net in networks:
        configs = selected(args.configs, net.configs(), f"configuration for {net.name}")
        if "fp32" not in configs:
            configs = ["fp32"] + configs
        seeds = net.seeds if args.seeds is None else [int(s) for s in args.seeds.split(",")]
        key = net.fingerprint()
        todo[net.name] = [(net, c, seed) for seed in seeds for c in configs
                          if (net.name, key, c, seed) not in done]
    # Seed-major across the networks: each finished seed of a network is a complete paired set,
    # and a sitting cut short leaves every network with its first seeds rather than one network
    # with all of them.
    plan = sorted((job for jobs in todo.values() for job in jobs),
                  key=lambda j: (j[2], list(todo).index(j[0].name)))
    if args.max_runs is not None:
        plan = plan[:args.max_runs]
    print(f"{len(plan)} runs to do; store {args.store}", flush=True)
    if args.dry_run:
        for net, c, seed in plan:
            print(f"  {net.name} {c} seed {seed}")
        return 0
    work = args.keep or tempfile.mkdtemp(prefix="loom_codec_table.")
    os.makedirs(work, exist_ok=True)
    data = args.data
    if any(net.name == "gpt-char" for net, _, _ in plan) and data is None:
        data = os.path.join(work, "fortunes")
        subprocess.check_call([os.path.join(ROOT, "scripts", "fortunes-shards"), data, "bytes"],
                              env={**os.environ, "LOOM": args.loom}, stdout=subprocess.DEVNULL)
    failed = 0
    try:
        for net, config, seed in plan:
            if os.path.exists(args.store + ".stop"):
                print(f"{args.store}.stop exists: stopping before {net.name} {config} seed "
                      f"{seed}", flush=True)
                break
            run_dir = os.path.join(work, f"{net.name}-{config}-s{seed}")
            row = train(args, net, config, seed, run_dir, data)
            if row is None:
                failed += 1
                continue
            os.makedirs(os.path.dirname(args.store), exist_ok=True)
            with open(args.store, "a") as f:
                f.write(json.dumps(row, sort_keys=True) + "\n")
            print(f"{net.name:8s} {config:11s} seed {seed}: {net.metric} {row['value']:.4f}, "
                  f"{row['bytes_per_step']:,.0f} bytes a step, {row['wall_s']:.0f} s", flush=True)
            if not args.keep:
                shutil.rmtree(run_dir, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


def table_rows(rows):
    """Per network and configuration, the differences from fp32 of the same recipe and seed."""
    out = []
    for name, net in NETWORKS.items():
        mine = [r for r in rows if r["network"] == name]
        if not mine:
            continue
        newest = max(mine, key=lambda r: r["date"])["recipe"]  # older recipes stay unread
        runs = {(r["config"], r["seed"]): r for r in mine if r["recipe"] == newest}
        for config in net.configs():
            seeds = sorted(s for c, s in runs if c == config and ("fp32", s) in runs)
            diffs = [net.diff(runs[(config, s)]["value"], runs[("fp32", s)]["value"])
                     for s in seeds]
            n = len(diffs)
            mean = sum(diffs) / n if n else None
            se = (math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1) / n)
                  if n > 1 else None)
            if config == "fp32":
                verdict = ""
            elif n < len(net.seeds):
                verdict = f"{n} of {len(net.seeds)} seeds"
            else:
                verdict = "met" if net.within(mean) else "not met"
            out.append({
                "bench": "codec_table", "network": name, "recipe": newest, "config": config,
                "seeds": seeds, "metric": net.metric, "unit": net.unit,
                "value_mean": (sum(runs[(config, s)]["value"] for s in seeds) / n
                               if n else None),
                "diffs": diffs, "diff_mean": mean, "diff_se": se, "target": net.target,
                "verdict": verdict,
                "bytes_per_step": (sum(runs[(config, s)]["bytes_per_step"] for s in seeds) / n
                                   if n else None),
                "cpus": sorted({runs[(config, s)]["cpu"] for s in seeds}),
            })
    return out


def table(args):
    rows = table_rows(read_store(args.store))
    if not args.json:
        current = None
        for r in rows:
            net = NETWORKS[r["network"]]
            if r["network"] != current:
                current = r["network"]
                sign = "-" if net.metric == "test_acc" else "+"
                print(f"\n{current} ({net.config}, {net.metric}; target: config - fp32 "
                      f"{'>=' if sign == '-' else '<='} {sign}{net.target} {net.unit})")
                print(f"| config | seeds | {net.metric} (mean) | config - fp32 ({net.unit}): "
                      "mean +- se | per seed | bytes a worker sent per step | target |")
                print("| --- | --- | ---: | ---: | --- | ---: | --- |")
            if not r["seeds"]:
                print(f"| {r['config']} | none | | | | | not run |")
                continue
            f = ".2f" if net.metric == "test_acc" else ".4f"
            diff = per_seed = ""
            if r["config"] != "fp32":
                diff = f"{r['diff_mean']:+{f}}"
                if r["diff_se"] is not None:
                    diff += f" +- {r['diff_se']:{f}}"
                per_seed = " ".join(f"{d:+{f}}" for d in r["diffs"])
            print(f"| {r['config']} | {','.join(map(str, r['seeds']))} | {r['value_mean']:.4f} | "
                  f"{diff} | {per_seed} | {r['bytes_per_step']:,.0f} | {r['verdict']} |")
    for r in rows:
        print(json.dumps(r))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("run")
    r.add_argument("--networks")
    r.add_argument("--configs")
    r.add_argument("--seeds")
    r.add_argument("--data")
    r.add_argument("--loom", default=os.environ.get("LOOM", os.path.join(ROOT, "build", "loom")))
    r.add_argument("--store", default=STORE)
    r.add_argument("--max-runs", type=int)
    r.add_argument("--dry-run", action="store_true")
    r.add_argument("--keep")
    t = sub.add_parser("table")
    t.add_argument("--store", default=STORE)
    t.add_argument("--json", action="store_true")
    args = p.parse_args()
    return run(args) if args.mode == "run" else table(args)


if __name__ == "__main__":
    sys.exit(main())
