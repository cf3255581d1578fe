#!/usr/bin/env python3
"""A Hugging Face checkpoint directory run by wgrt against a numpy forward pass written from the
architecture's published definition (transformers' Llama and Qwen2 modeling: RMSNorm, rotate-half
RoPE, grouped-query causal attention, SwiGLU; Qwen2 adds q/k/v biases), independent of wgrt's own
CPU reference. Each case writes a tiny f32 model (safetensors written here, seeded), has wgrt dump
the logits of every prompt position (`--quantize none`: the weights as stored), and bounds the
largest difference by a fraction of the row's largest |logit|. ctest runs it (tests/CMakeLists.txt).

  hf_numpy_check.py --wgrt PATH --tokenizer models/wgrt-demo-tokenizer.json --out DIR [--bound 2e-3]"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

TEXT = "In the beginning God created the heaven and the earth. And the earth was without form"
H, L, NH, NKV, FF = 256, 2, 4, 2, 512
HD = H // NH


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, v in tensors.items():
        b = v.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    hj = json.dumps(header).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def make_weights(rng, vocab, bias):
    def lin(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def norm():
        return (1 + 0.1 * rng.standard_normal(H)).astype(np.float32)

    w = {"model.embed_tokens.weight": lin(vocab, H)}
    for layer in range(L):
        p = f"model.layers.{layer}."
        w[p + "input_layernorm.weight"] = norm()
        w[p + "post_attention_layernorm.weight"] = norm()
        for name, rows in (("q", NH * HD), ("k", NKV * HD), ("v", NKV * HD)):
            w[p + f"self_attn.{name}_proj.weight"] = lin(rows, H)
            if bias:
                w[p + f"self_attn.{name}_proj.bias"] = (0.5 * rng.standard_normal(rows)).astype(np.float32)
        w[p + "self_attn.o_proj.weight"] = lin(H, NH * HD)
        w[p + "mlp.gate_proj.weight"] = lin(FF, H)
        w[p + "mlp.up_proj.weight"] = lin(FF, H)
        w[p + "mlp.down_proj.weight"] = lin(H, FF)
    w["model.norm.weight"] = norm()
    w["lm_head.weight"] = lin(vocab, H)
    return w


def forward(w, ids, eps, theta, bias):
    t = len(ids)

    def rms(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g

    ang = np.arange(t)[:, None] * (1.0 / theta ** (np.arange(0, HD, 2) / HD))[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))

    def rope(x):  # [t, heads, HD]: the two halves of each head turn together
        half = np.concatenate([-x[..., HD // 2:], x[..., :HD // 2]], -1)
        return x * cos[:, None, :] + half * sin[:, None, :]

    def proj(x, p, name):
        y = x @ w[p + f"self_attn.{name}_proj.weight"].T
        return y + w[p + f"self_attn.{name}_proj.bias"] if bias else y

    h = w["model.embed_tokens.weight"][ids].astype(np.float64)
    mask = np.triu(np.full((t, t), -np.inf), 1)
    for layer in range(L):
        p = f"model.layers.{layer}."
        x = rms(h, w[p + "input_layernorm.weight"])
        q = rope(proj(x, p, "q").reshape(t, NH, HD))
        k = rope(proj(x, p, "k").reshape(t, NKV, HD))
        v = proj(x, p, "v").reshape(t, NKV, HD)
        o = np.zeros((t, NH, HD))
        for head in range(NH):
            kv = head // (NH // NKV)
            s = q[:, head] @ k[:, kv].T / np.sqrt(HD) + mask
            e = np.exp(s - s.max(-1, keepdims=True))
            o[:, head] = (e / e.sum(-1, keepdims=True)) @ v[:, kv]
        h = h + o.reshape(t, H) @ w[p + "self_attn.o_proj.weight"].T
        x = rms(h, w[p + "post_attention_layernorm.weight"])
        g, u = x @ w[p + "mlp.gate_proj.weight"].T, x @ w[p + "mlp.up_proj.weight"].T
        h = h + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    return rms(h, w["model.norm.weight"]) @ w["lm_head.weight"].T


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return r.stdout


def check(args, arch, seed):
    vocab = len(json.load(open(args.tokenizer))["model"]["vocab"])
    bias = arch == "qwen2"
    eps, theta = (1e-6, 1e6) if bias else (1e-5, 1e4)
    rng = np.random.default_rng(seed)
    d = os.path.join(args.out, arch)
    os.makedirs(d, exist_ok=True)
    w = make_weights(rng, vocab, bias)
    write_safetensors(os.path.join(d, "model.safetensors"), w)
    cfg = dict(architectures=["Qwen2ForCausalLM" if bias else "LlamaForCausalLM"], model_type=arch,
               vocab_size=vocab, hidden_size=H, num_hidden_layers=L, num_attention_heads=NH,
               num_key_value_heads=NKV, intermediate_size=FF, rms_norm_eps=eps, rope_theta=theta,
               max_position_embeddings=4096, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
               hidden_act="silu", torch_dtype="float32")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    shutil.copy(args.tokenizer, os.path.join(d, "tokenizer.json"))
    ids = json.loads(run([args.wgrt, "tokenize", "-m", d, "--json", TEXT]))
    dump = os.path.join(d, "logits.f32")
    run([args.wgrt, "run", "-m", d, "-c", "64", "-n", "0", "--quantize", "none", "--dump-logits", dump, "-p", TEXT])
    want = forward(w, ids, eps, theta, bias)
    got = np.fromfile(dump, dtype=np.float32).reshape(want.shape)
    rows = np.abs(got - want).max(1) / np.abs(want).max(1)
    ok = bool(rows.max() <= args.bound)
    print(f"{arch} ({len(ids)} tokens): max |wgrt - numpy| / max |logit| = {rows.max():.3g} over positions "
          f"(first {rows[0]:.3g}, last {rows[-1]:.3g}; bound {args.bound:g}): {'ok' if ok else 'FAIL'}")
    return ok


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--wgrt", required=True)
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--bound", type=float, default=2e-3)
    args = p.parse_args()
    ok = True
    for seed, arch in enumerate(("llama", "qwen2")):
        ok &= check(args, arch, seed + 7)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
