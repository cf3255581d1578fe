#!/usr/bin/env python3
"""Writes tests/gpu/dawn_api.json: the part of a Dawn build's API description (dawn.json) that
wgrt's own ABI declarations (src/gpu/dawn_abi.h) use, for tests/gpu/abi_test.cpp.

    tools/dawn-api-subset.py DAWN_JSON COMMIT > tests/gpu/dawn_api.json

DAWN_JSON is src/dawn/dawn.json of the Dawn commit the pinned package was built from (npm
webgpu@0.4.0: c5d549e250). Kept: every entry abi_test.cpp names (its EV/ET/ROW/CB/FP rows) and
every type their members and arguments name, transitively; objects without their methods.
Run it again whenever tools/setup.sh pins another Dawn, then fix dawn_abi.h until the test
passes.
"""
import json
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
api = json.load(open(sys.argv[1]))
commit = sys.argv[2]

test = (root / "tests/gpu/abi_test.cpp").read_text()
wanted = set(re.findall(r'\b(?:EV|ET|ROW|CB|FP)\("([^"]+)"', test))

kept = {}
todo = sorted(wanted)
while todo:
    name = todo.pop()
    if name in kept or name not in api:
        continue
    entry = dict(api[name])
    if entry.get("category") == "object":
        entry.pop("methods", None)
    kept[name] = entry
    for m in entry.get("members", []) + entry.get("args", []):
        todo.append(m["type"])
    if "type" in entry and isinstance(entry["type"], str):
        todo.append(entry["type"])

missing = sorted(w for w in wanted if w not in api)
if missing:
    sys.exit(f"dawn-api-subset: {sys.argv[1]} has no entries {missing}")
out = {"_source": f"Dawn {commit}, src/dawn/dawn.json: the entries wgrt's dawn_abi.h uses"}
out.update(sorted(kept.items()))
json.dump(out, sys.stdout, indent=1)
sys.stdout.write("\n")
