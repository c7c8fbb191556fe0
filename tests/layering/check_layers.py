#!/usr/bin/env python3
"""Checks every #include "loom/..." under src/loom against the layer table of
docs/architecture.md: a file of unit U may include headers of the units in the transitive
closure of U's "may use" column, and nothing else. Prints each forbidden edge as
file:line and exits 1 if there is one; exits 2 if the table itself is malformed.

It also checks that the configuration stops at the run plan: no file of a unit that `plan` may
use (other than `core`, which owns it) includes loom/core/config.h or loom/core/config_refusal.h.
Those units take their options as typed structs, which `plan` reads from the config; a file format
of their own in TOML (nn's graph files) is read with core's toml_values (core/config_value.h).
Above the plan, no file of `train` includes them (it runs a plan::RunPlan), and no header of any
unit but `core`, `plan` and `cli` does: `experiments` builds configs for its sweeps and reports
inside its own source files.

usage: check_layers.py [SOURCE_ROOT]   (the repository root; default: two folders up)
"""
import os
import re
import sys

ROW = re.compile(r"^\| `([a-z_]+)` \|([^|]*)\|([^|]*)\|")
# The headers that read a Config: core's, off limits below the run plan.
CONFIG_READERS = {"core/config.h", "core/config_refusal.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"(loom/[^"]+)"')


def read_table(doc):
    units, patterns, deps = [], {}, {}
    inside = False
    with open(doc, encoding="utf-8") as f:
        for line in f:
            if "<!-- layers:begin -->" in line:
                inside = True
            elif "<!-- layers:end -->" in line:
                inside = False
            elif inside:
                m = ROW.match(line)
                if m:
                    u = m.group(1)
                    units.append(u)
                    patterns[u] = re.findall(r"`([^`]+)`", m.group(2))
                    deps[u] = re.findall(r"`([a-z_]+)`", m.group(3))
    if not units:
        sys.exit(f"{doc}: no layer table between <!-- layers:begin --> and <!-- layers:end -->")
    for u in units:
        for d in deps[u]:
            if d not in patterns:
                print(f"{doc}: unit '{u}' may use '{d}', which is not in the table", file=sys.stderr)
                sys.exit(2)
    cycle = find_cycle(units, deps)
    if cycle:
        # The build links each unit to its "may use" list, so a cycle here is a link cycle.
        print(f"{doc}: the layer table has a cycle: {' -> '.join(cycle)}", file=sys.stderr)
        sys.exit(2)
    return units, patterns, deps


def find_cycle(units, deps):
    """A cycle of "may use" edges as a list of units (first repeated last), or None."""
    state = {}  # unit -> 1 on the current path, 2 done

    def visit(u, path):
        state[u] = 1
        for d in deps[u]:
            if state.get(d) == 1:
                return path[path.index(d):] + [d]
            if d not in state:
                found = visit(d, path + [d])
                if found:
                    return found
        state[u] = 2
        return None

    for u in units:
        if u not in state:
            found = visit(u, [u])
            if found:
                return found
    return None


def owner(rel, units, patterns):
    """The unit owning src/loom/<rel>: the most specific matching pattern (a file pattern beats
    any folder, a longer folder beats a shorter one)."""
    best, best_len = None, -1
    for u in units:
        for p in patterns[u]:
            if p.endswith("/"):
                if rel.startswith(p) and len(p) > best_len:
                    best, best_len = u, len(p)
            else:
                rx = "^" + re.escape(p).replace(r"\*", "[^/]*") + "$"
                if re.match(rx, rel) and 100000 > best_len:
                    best, best_len = u, 100000
    return best


def closure(u, deps):
    seen, todo = {u}, [u]
    while todo:
        for d in deps[todo.pop()]:
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    doc = os.path.join(root, "docs", "architecture.md")
    src = os.path.join(root, "src", "loom")
    units, patterns, deps = read_table(doc)
    allowed = {u: closure(u, deps) for u in units}
    # The units below the plan, which never see a Config.
    no_config = closure("plan", deps) - {"plan", "core"} if "plan" in units else set()
    if "train" in units:
        no_config.add("train")
    config_edges = {"core", "plan", "cli"}
    bad = 0
    files = 0
    for dirpath, _, names in os.walk(src):
        for name in sorted(names):
            if not re.search(r"\.(h|cc|cu|cuh)$", name):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, src).replace(os.sep, "/")
            u = owner(rel, units, patterns)
            shown = os.path.relpath(path, root)
            if u is None:
                print(f"{shown}: no unit of the layer table owns this file")
                bad += 1
                continue
            files += 1
            with open(path, encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = m.group(1)[len("loom/"):]
                    # Generated headers, core's: the build's options (src/loom/config.h.in)
                    # and its commit (cmake/git_rev.cmake).
                    if target in ("config.h", "git_rev.h"):
                        t = "core"
                    else:
                        t = owner(target, units, patterns)
                    if t is None:
                        print(f"{shown}:{n}: includes loom/{target}, which no unit owns")
                        bad += 1
                    elif t not in allowed[u]:
                        print(f"{shown}:{n}: unit '{u}' includes loom/{target} of unit '{t}', "
                              f"which '{u}' may not use (docs/architecture.md: '{u}' may use "
                              f"{', '.join(sorted(allowed[u] - {u})) or 'nothing'})")
                        bad += 1
                    elif target in CONFIG_READERS and u in no_config:
                        print(f"{shown}:{n}: unit '{u}' includes loom/{target}; the units "
                              f"below 'plan' and 'train' take typed options, which 'plan' "
                              f"reads from the config")
                        bad += 1
                    elif (target in CONFIG_READERS and u not in config_edges
                          and re.search(r"\.(h|cuh)$", name)):
                        print(f"{shown}:{n}: a header of unit '{u}' includes loom/{target}; "
                              f"only 'core', 'plan' and 'cli' declare functions of a Config")
                        bad += 1
    print(f"check_layers: {files} files, {len(units)} units, {bad} forbidden edge(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
