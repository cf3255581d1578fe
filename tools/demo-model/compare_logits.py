#!/usr/bin/env python3
"""Compares wgrt's dumped logits (`wgrt run --dump-logits`) with check.py's transformers logits
of the same tokens; prints the largest absolute difference and its ratio to the largest |logit|.

  compare_logits.py CHECK_DIR/logits.f32 wgrt-logits.f32 N_VOCAB [BOUND]

Exits 1 when the ratio passes BOUND (default 1e-3) or the shapes differ."""
import array
import sys


def read(path):
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a


def main():
    ref, got, n_vocab = read(sys.argv[1]), read(sys.argv[2]), int(sys.argv[3])
    bound = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-3
    if len(ref) != len(got) or len(ref) % n_vocab:
        print(f"shapes differ: {len(ref) / n_vocab} reference rows, {len(got) / n_vocab} wgrt rows")
        return 1
    diff = max(abs(a - b) for a, b in zip(ref, got))
    peak = max(abs(a) for a in ref)
    ratio = diff / peak
    print(f"{len(ref) // n_vocab} rows x {n_vocab}: max |diff| {diff:.6g}, max |logit| {peak:.6g}, "
          f"ratio {ratio:.3g} (bound {bound:g}): {'ok' if ratio <= bound else 'FAIL'}")
    return 0 if ratio <= bound else 1


if __name__ == "__main__":
    sys.exit(main())
