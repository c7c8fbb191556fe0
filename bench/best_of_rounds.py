#!/usr/bin/env python3
"""The speed benches' summary (bench/gpt_char.sh and bench/resnet20.sh, modes speed and ddp):
each runner's best rate over the rounds, loom's ratio to each peer and to the fastest, with the
CPU and the vector ISAs it has, then one JSON line.

  python3 bench/best_of_rounds.py BENCH MODE SETTING UNIT STEPS ROUNDS "loom=R" "PEER NAME=R" ...

SETTING says what ran ("1 thread", "2 workers x 1 thread").

Every NAME=RATE argument is one run; a name may repeat (one per round). "loom" must be among
them.
"""
import json
import sys


def cpu_and_isa():
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown CPU":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if f in flags]
    return model, isa


def main():
    if len(sys.argv) < 8:
        sys.exit(__doc__)
    bench, mode, setting, unit, steps, rounds = sys.argv[1:7]
    best = {}
    for a in sys.argv[7:]:
        name, rate = a.rsplit("=", 1)
        best[name] = max(best.get(name, 0.0), float(rate))
    if "loom" not in best or len(best) < 2:
        sys.exit("best_of_rounds.py: needs loom's rate and at least one peer's")
    loom = best.pop("loom")
    cpu, isa = cpu_and_isa()
    print(f"{cpu} ({' '.join(isa)}), {setting}, {steps} steps, best of {rounds}: "
          f"loom {loom:.1f} {unit}")
    for name, rate in best.items():
        print(f"  {name}: {rate:.1f} {unit}, loom / it {loom / rate:.2f}x")
    name, rate = max(best.items(), key=lambda p: p[1])
    print(f"loom / the fastest PyTorch ({name}): {loom / rate:.2f}x")
    print(json.dumps({"bench": bench, "mode": mode, "setting": setting, "cpu": cpu, "isa": isa, "loom": loom,
                      "torch": rate, "torch_version": name, "peers": best,
                      "ratio": loom / rate}))


if __name__ == "__main__":
    main()
