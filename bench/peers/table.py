#!/usr/bin/env python3
"""One markdown table from a run-h200.sh output folder: per model file and test, wgrt's tok/s
next to llama.cpp Vulkan's best setting (matrix cores on or off, whichever is faster) and its
setting without matrix cores, with the ratios; wgrt's batched rows (`--parallel`: N sequences
decoding together on one graph, aggregate tok/s) in a table of their own with xN / x1; then each
file's size, its tensors' size, and what wgrt keeps on the GPU.

  python3 bench/peers/table.py OUT_DIR > OUT_DIR/table.md

Reads OUT_DIR/<file>.wgrt.jsonl, <file>.peer.jsonl, <file>.peer-nocm.jsonl, <file>.peer-cuda.jsonl
(llama.cpp's CUDA backend, when run: two more columns) (rows of
`wgrt bench -o jsonl` and peer_bench), OUT_DIR/files.tsv (file, bytes) and machine.txt.
Standard library only (the GPU machine has no package registry)."""
import json
import os
import sys


def rows(path):
    """{test name: row} of a jsonl file; {} when the run did not happen or failed early."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            out[test_name(r)] = r
    return out


def test_name(r):
    name = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
    if r.get("batched"):
        name += f" x{r['n_parallel']}"
    return name + (f" @ d{r['n_depth']}" if r["n_depth"] else "")


def ts(r):
    return f"{r['avg_ts']:,.1f} ± {r['stddev_ts']:,.1f}" if r else "—"


def ratio(a, b):
    return f"{a['avg_ts'] / b['avg_ts']:.2f}×" if a and b and b["avg_ts"] > 0 else "—"


def mib(n):
    return f"{n / 1048576:,.0f} MiB" if n is not None else "—"


def batched_table(out_dir, files):
    """wgrt's rows of N sequences decoding together, each next to x1 at its depth."""
    lines = []
    for name in files:
        w = [r for r in rows(os.path.join(out_dir, f"{name}.wgrt.jsonl")).values() if r.get("batched")]
        one = {r["n_depth"]: r for r in w if r["n_parallel"] == 1}
        for r in w:
            base = one.get(r["n_depth"])
            label = name if not lines or lines[-1][0] != name else ""
            lines.append((name, f"| {label} | {test_name(r)} | {ts(r)} | {ratio(r, base)} |"))
    if not lines:
        return
    print()
    print("| model file | batched test (wgrt) | aggregate tok/s | xN / x1 |")
    print("|---|---|---:|---:|")
    for _, line in lines:
        print(line)


def main(out_dir):
    files = []
    sizes = {}
    tsv = os.path.join(out_dir, "files.tsv")
    if os.path.exists(tsv):
        with open(tsv) as f:
            for line in f:
                name, size = line.split("\t")
                files.append(name)
                sizes[name] = int(size)
    cuda_any = any(rows(os.path.join(out_dir, f"{n}.peer-cuda.jsonl")) for n in files)
    cuda_head = (" llama.cpp CUDA | wgrt / CUDA |", "---:|---:|") if cuda_any else ("", "")
    print("| model file | test | wgrt | llama.cpp best | llama.cpp no coopmat | wgrt / best | wgrt / no coopmat |"
          + cuda_head[0])
    print("|---|---|---:|---:|---:|---:|---:|" + cuda_head[1])
    facts = []
    for name in files:
        w = rows(os.path.join(out_dir, f"{name}.wgrt.jsonl"))
        cm = rows(os.path.join(out_dir, f"{name}.peer.jsonl"))
        nocm = rows(os.path.join(out_dir, f"{name}.peer-nocm.jsonl"))
        cu = rows(os.path.join(out_dir, f"{name}.peer-cuda.jsonl"))
        tests = [t for t in dict.fromkeys([*w, *cm, *nocm]) if not w.get(t, {}).get("batched")]
        for i, t in enumerate(tests):
            a, b, c = w.get(t), cm.get(t), nocm.get(t)
            best = max([x for x in (b, c) if x], key=lambda x: x["avg_ts"], default=None)
            which = "" if not best else (" (coopmat)" if best is b else " (no coopmat)")
            label = name if i == 0 else ""
            cuda_cols = f" {ts(cu.get(t))} | {ratio(a, cu.get(t))} |" if cuda_any else ""
            print(f"| {label} | {t} | {ts(a)} | {ts(best)}{which} | {ts(c)} | {ratio(a, best)} | {ratio(a, c)} |"
                  + cuda_cols)
        any_w = next(iter(w.values()), None)
        any_p = next(iter(cm.values()), None) or next(iter(nocm.values()), None)
        facts.append((name, sizes.get(name), any_p["model_size"] if any_p else None,
                      any_w["model_gpu_size"] if any_w else None,
                      any_w["model_type"] if any_w else "—", any_p["model_type"] if any_p else "—"))
    batched_table(out_dir, files)
    print()
    print("| model file | file size | tensors (llama.cpp) | wgrt weights on the GPU | wgrt names it | llama.cpp names it |")
    print("|---|---:|---:|---:|---|---|")
    for name, size, tensors, gpu, wtype, ptype in facts:
        print(f"| {name} | {mib(size)} | {mib(tensors)} | {mib(gpu)} | {wtype} | {ptype} |")
    machine = os.path.join(out_dir, "machine.txt")
    if os.path.exists(machine):
        print()
        print("Machine:")
        print()
        print("```")
        with open(machine) as f:
            print(f.read().rstrip())
        print("```")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: table.py OUT_DIR")
    main(sys.argv[1])
