#!/usr/bin/env python3
"""Cleans the demo corpus sources into paragraphs, drops repeated paragraphs and splits off a
validation set (every 50th kept paragraph), deterministically.

  clean.py OUT_DIR bible:FILE devil:FILE jargon:FILE moby:DIR

Writes OUT_DIR/train.txt and OUT_DIR/valid.txt (paragraphs separated by one blank line) and
OUT_DIR/stats.json (paragraphs, characters per source and split)."""
import json
import os
import re
import sys

MIN_WORDS = 6  # drops headings, table-of-contents lines and list stubs
VALID_EVERY = 50


def normalise(text):
    text = text.replace("\u2550", " ")  # the Jargon File's box-drawing rules
    text = re.sub(r"_([^_]+)_", r"\1", text)  # _italics_
    text = re.sub(r"\{([^{}]*)\}", r"\1", text)  # {cross-references}
    return " ".join(text.split())


def blank_line_paragraphs(text):
    return re.split(r"\n\s*\n", text)


def bible(text):
    # `bible` prints "Book N" headings and verses "  N text" with wrapped continuation lines;
    # each verse becomes a paragraph, without its number.
    verses, cur = [], None
    for line in text.splitlines():
        m = re.match(r"^\s+\d+ (.*)$", line)
        if m:
            if cur is not None:
                verses.append(cur)
            cur = m.group(1)
        elif line.strip() and cur is not None and not re.match(r"^\S.* \d+$", line):
            cur += " " + line.strip()
        elif cur is not None:
            verses.append(cur)
            cur = None
    if cur is not None:
        verses.append(cur)
    return verses


def devil(text):
    # dictd's own header entries ("00-database-...") and the source URL are not Bierce's text.
    lines = [l for l in text.splitlines() if not l.startswith("00-database") and "wiretap.area.com" not in l]
    return blank_line_paragraphs("\n".join(lines))


def jargon(text):
    return blank_line_paragraphs(text)


def moby(directory):
    names = sorted((f for f in os.listdir(directory) if re.match(r"chapter_\d+\.txt$", f)),
                   key=lambda f: int(re.findall(r"\d+", f)[0]))
    out = []
    for name in names:
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            out += blank_line_paragraphs(f.read())
    return out


def main():
    out_dir, specs = sys.argv[1], sys.argv[2:]
    readers = {"bible": bible, "devil": devil, "jargon": jargon, "moby": moby}
    seen, kept = set(), []
    stats = {}
    for spec in specs:
        name, path = spec.split(":", 1)
        if name not in readers:
            sys.exit(f"clean.py: unknown source '{name}' (known: {', '.join(readers)})")
        if name == "moby":
            raw = readers[name](path)
        else:
            with open(path, encoding="utf-8", errors="replace") as f:
                raw = readers[name](f.read())
        s = stats.setdefault(name, {"raw": 0, "short": 0, "duplicate": 0, "kept": 0, "chars": 0})
        for p in raw:
            s["raw"] += 1
            p = normalise(p)
            if len(p.split()) < MIN_WORDS:
                s["short"] += 1
                continue
            if p in seen:
                s["duplicate"] += 1
                continue
            seen.add(p)
            s["kept"] += 1
            s["chars"] += len(p)
            kept.append(p)
    train = [p for i, p in enumerate(kept) if i % VALID_EVERY != VALID_EVERY - 1]
    valid = [p for i, p in enumerate(kept) if i % VALID_EVERY == VALID_EVERY - 1]
    os.makedirs(out_dir, exist_ok=True)
    for split, ps in (("train", train), ("valid", valid)):
        with open(os.path.join(out_dir, split + ".txt"), "w", encoding="utf-8") as f:
            f.write("\n\n".join(ps) + "\n")
        stats[split] = {"paragraphs": len(ps), "chars": sum(len(p) for p in ps)}
    with open(os.path.join(out_dir, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
