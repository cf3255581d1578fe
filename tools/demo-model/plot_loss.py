#!/usr/bin/env python3
"""Draws train.py's loss.csv as an SVG line chart (train and validation loss against steps),
with no plotting library.   plot_loss.py loss.csv out.svg [title]"""
import csv
import sys


def main():
    src, out = sys.argv[1], sys.argv[2]
    title = sys.argv[3] if len(sys.argv) > 3 else "wgrt demo model: loss (nats/token)"
    rows = list(csv.DictReader(open(src)))
    series = {
        "train": [(int(r["step"]), float(r["train_loss"])) for r in rows if r["train_loss"] != "nan"],
        "validation": [(int(r["step"]), float(r["valid_loss"])) for r in rows],
    }
    colours = {"train": "#1f77b4", "validation": "#d62728"}
    W, H, L, R, T, B = 640, 400, 60, 20, 40, 50
    x_max = max(s for v in series.values() for s, _ in v)
    y_lo, y_hi = 2.5, 9.5
    def px(s):
        return L + (W - L - R) * s / x_max
    def py(y):
        return T + (H - T - B) * (y_hi - min(max(y, y_lo), y_hi)) / (y_hi - y_lo)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
             f'<rect width="{W}" height="{H}" fill="white"/>',
             f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>']
    for y in range(3, 10):
        parts.append(f'<line x1="{L}" y1="{py(y):.1f}" x2="{W - R}" y2="{py(y):.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{L - 8}" y="{py(y) + 4:.1f}" text-anchor="end">{y}</text>')
    step = 200
    for s in range(0, x_max + 1, step):
        parts.append(f'<text x="{px(s):.1f}" y="{H - B + 18}" text-anchor="middle">{s}</text>')
    parts.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">step (64 sequences of 256 tokens)</text>')
    parts.append(f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>')
    parts.append(f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>')
    for i, (name, pts) in enumerate(series.items()):
        d = " ".join(f"{px(s):.1f},{py(y):.1f}" for s, y in pts)
        parts.append(f'<polyline points="{d}" fill="none" stroke="{colours[name]}" stroke-width="2"/>')
        last = pts[-1]
        parts.append(f'<text x="{W - R - 150}" y="{T + 20 + 18 * i}" fill="{colours[name]}">{name}: {last[1]:.3f} at step {last[0]}</text>')
    parts.append("</svg>")
    open(out, "w").write("\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
