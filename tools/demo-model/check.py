#!/usr/bin/env python3
"""The external reference for wgrt's demo model: Hugging Face `transformers` (LlamaForCausalLM,
f32, eager attention, no TF32) on an exported HF directory.

  check.py --hf DIR --valid valid.txt [--valid-ids wgrt-valid-ids.json] --out OUT_DIR

Writes to OUT_DIR:
  logits-ids.json     the fixed token sequence whose logits are dumped (BOS first)
  logits.f32          its logits, f32 [n_tokens, n_vocab], row-major
  greedy.json         greedy continuations of PROMPT: with the f32 weights, and with the
                      weights rounded through GGUF Q8_0 and Q4_0 blocks the way
                      src/model/ggml_quantize.cpp rounds them (what the quantized files hold)
  perplexity.json     mean NLL / perplexity (f32, Q8_0- and Q4_0-rounded weights) over the
                      validation text in `wgrt perplexity`'s windows (consecutive, CTX tokens,
                      last position unscored), on wgrt's own token ids when --valid-ids is
                      given, else on HF's
  hf-valid-ids.json   HF tokenizers' ids of the validation text (BOS first)"""
import argparse
import copy
import json
import math
import os

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from transformers import LlamaForCausalLM

LOGITS_TEXT = ("In the beginning God created the heaven and the earth. And the earth was without form, and void; "
               "and darkness was upon the face of the deep.")
PROMPT = "In the beginning"
N_GREEDY = 32


def round_away(v):  # std::lround: halves away from zero
    return torch.sign(v) * torch.floor(v.abs() + 0.5)


def q8_0(w):
    x = w.reshape(-1, 32)
    d = (x.abs().amax(dim=1, keepdim=True) / 127).half().float()
    inv = torch.where(d != 0, 1 / d, torch.zeros_like(d))
    return (torch.clamp(round_away(x * inv), -128, 127) * d).reshape(w.shape)


def q4_0(w):
    x = w.reshape(-1, 32)
    idx = x.abs().argmax(dim=1, keepdim=True)  # first of the largest magnitudes
    d = (torch.gather(x, 1, idx) / -8).half().float()
    inv = torch.where(d != 0, 1 / d, torch.zeros_like(d))
    q = torch.clamp(round_away(x * inv) + 8, 0, 15)
    return ((q - 8) * d).reshape(w.shape)


def quantized(model, matrix_fn, embd_fn):
    m = copy.deepcopy(model)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() != 2:
                continue
            fn = embd_fn if "embed_tokens" in name else matrix_fn
            p.copy_(fn(p.float()))
    return m


@torch.no_grad()
def greedy(model, ids, n):
    ids = list(ids)
    out = []
    for _ in range(n):
        logits = model(torch.tensor([ids], device=model.device)).logits[0, -1]
        t = int(torch.argmax(logits))
        out.append(t)
        ids.append(t)
    return out


@torch.no_grad()
def perplexity(model, ids, ctx):
    nll, n = 0.0, 0
    for s in range(0, len(ids) - 1, ctx):
        w = torch.tensor([ids[s:s + ctx]], device=model.device)
        logits = model(w).logits[0].double()
        nll += F.cross_entropy(logits[:-1], w[0, 1:], reduction="sum").item()
        n += w.shape[1] - 1
    return nll, n


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hf", required=True)
    p.add_argument("--valid", required=True)
    p.add_argument("--valid-ids")
    p.add_argument("--ctx", type=int, default=256)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = LlamaForCausalLM.from_pretrained(a.hf, dtype=torch.float32, attn_implementation="eager").to(dev).eval()
    tok = Tokenizer.from_file(os.path.join(a.hf, "tokenizer.json"))

    ids = tok.encode(LOGITS_TEXT).ids
    with torch.no_grad():
        logits = model(torch.tensor([ids], device=dev)).logits[0].float().cpu()
    json.dump(ids, open(os.path.join(a.out, "logits-ids.json"), "w"))
    open(os.path.join(a.out, "logits.f32"), "wb").write(logits.numpy().tobytes())

    hf_ids = tok.encode(open(a.valid, encoding="utf-8").read()).ids
    json.dump(hf_ids, open(os.path.join(a.out, "hf-valid-ids.json"), "w"))
    val = json.load(open(a.valid_ids)) if a.valid_ids else hf_ids
    r = {"ids": "wgrt" if a.valid_ids else "hf", "ids_equal_hf": val == hf_ids, "ctx": a.ctx}

    prompt = tok.encode(PROMPT).ids
    g = {"prompt": PROMPT, "prompt_ids": prompt, "n": N_GREEDY}
    # The quantized variants: every matrix through the file's blocks; the Q4_0 file keeps
    # token_embd (also the output head) in Q8_0, as export.cpp writes it.
    for name, m in (("f32", model), ("q8_0", quantized(model, q8_0, q8_0)), ("q4_0", quantized(model, q4_0, q8_0))):
        g[name] = greedy(m, prompt, N_GREEDY)
        g[name + "_text"] = tok.decode(g[name])
        nll, n = perplexity(m, val, a.ctx)
        r[name] = {"scored": n, "mean_nll": nll / n, "perplexity": math.exp(nll / n)}
        if m is not model:
            del m
    json.dump(g, open(os.path.join(a.out, "greedy.json"), "w"), indent=1, ensure_ascii=False)
    json.dump(r, open(os.path.join(a.out, "perplexity.json"), "w"), indent=1)
    print(json.dumps(g, ensure_ascii=False))
    print(json.dumps(r))


if __name__ == "__main__":
    main()
