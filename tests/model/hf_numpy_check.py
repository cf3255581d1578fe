#!/usr/bin/env python3
"""A Hugging Face checkpoint directory run by wgrt against a numpy forward pass written from the
architecture's published definition (transformers' Llama and Qwen2 modeling: RMSNorm, rotate-half
RoPE, grouped-query causal attention, SwiGLU; Qwen2 adds q/k/v biases; Mixtral and Qwen3-MoE a
router's softmax, the top 2 of 4 experts, their weights renormalized, each expert a SwiGLU;
Qwen3-MoE an RMSNorm over each head of q and k before RoPE; Qwen2-MoE Qwen2's attention, the
chosen experts' softmax weights as they are, and a shared expert scaled by the sigmoid of its
gate), independent of wgrt's own CPU
reference. Each case writes a tiny f32 model (safetensors written here, seeded), has wgrt dump
the logits of every prompt position (`--quantize none`: the weights as stored, but the experts',
which wgrt reads quantized to q8: those cases take a bound of 3e-2), and bounds the largest
difference by a fraction of the row's largest |logit|. ctest runs it (tests/CMakeLists.txt).

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
E, K, EFF = 4, 2, 128  # experts, chosen per token, each expert's width
SFF = 192  # Qwen2-MoE's shared expert's width
MOE = ("mixtral", "qwen3moe", "qwen2moe")
MOE_BOUND = 3e-2


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


def expert_names(arch, layer, e):
    """(gate, up, down) of expert e in layer `layer`: Mixtral's w1, w3, w2, else Qwen's."""
    if arch == "mixtral":
        p = f"model.layers.{layer}.block_sparse_moe.experts.{e}."
        return p + "w1.weight", p + "w3.weight", p + "w2.weight"
    p = f"model.layers.{layer}.mlp.experts.{e}."
    return p + "gate_proj.weight", p + "up_proj.weight", p + "down_proj.weight"


def router_name(arch, layer):
    return f"model.layers.{layer}." + ("block_sparse_moe.gate.weight" if arch == "mixtral" else "mlp.gate.weight")


def make_weights(rng, vocab, arch):
    bias = arch in ("qwen2", "qwen2moe")

    def lin(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def norm(n=H):
        return (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)

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
        if arch == "qwen3moe":
            w[p + "self_attn.q_norm.weight"] = norm(HD)
            w[p + "self_attn.k_norm.weight"] = norm(HD)
        if arch == "qwen2moe":
            sp = p + "mlp.shared_expert."
            w[sp + "gate_proj.weight"], w[sp + "up_proj.weight"] = 2 * lin(SFF, H), 2 * lin(SFF, H)
            w[sp + "down_proj.weight"] = 2 * lin(H, SFF)
            w[p + "mlp.shared_expert_gate.weight"] = 10 * lin(1, H)
        if arch in MOE:
            # A router 10x the others' scale: its choices stay clear of ties that the experts'
            # q8 rounding could flip. Qwen2-MoE's 3x: the chosen experts' weights then fall
            # short of summing to 1, so a renormalization it does not do would show.
            w[router_name(arch, layer)] = (3 if arch == "qwen2moe" else 10) * lin(E, H)
            for e in range(E):
                gate, up, down = expert_names(arch, layer, e)
                # 2x the scale: the experts' sum weighs in the logits enough that a wrong choice
                # or weight shows past the bound.
                w[gate], w[up], w[down] = 2 * lin(EFF, H), 2 * lin(EFF, H), 2 * lin(H, EFF)
            continue
        w[p + "mlp.gate_proj.weight"] = lin(FF, H)
        w[p + "mlp.up_proj.weight"] = lin(FF, H)
        w[p + "mlp.down_proj.weight"] = lin(H, FF)
    w["model.norm.weight"] = norm()
    w["lm_head.weight"] = lin(vocab, H)
    return w


def swiglu(x, gate, up, down):
    g, u = x @ gate.T, x @ up.T
    return (g / (1 + np.exp(-g)) * u) @ down.T


def moe(w, arch, layer, x):
    """Each row's top K of E experts by the router's softmax, their weights renormalized (not
    Qwen2-MoE's), plus Qwen2-MoE's shared expert times the sigmoid of its gate."""
    logits = x @ w[router_name(arch, layer)].T
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = np.zeros_like(x)
    for r in range(x.shape[0]):
        top = np.argsort(-p[r], kind="stable")[:K]
        total = 1.0 if arch == "qwen2moe" else p[r, top].sum()
        for e in top:
            gate, up, down = expert_names(arch, layer, e)
            out[r] += p[r, e] / total * swiglu(x[r:r + 1], w[gate], w[up], w[down])[0]
    if arch == "qwen2moe":
        sp = f"model.layers.{layer}.mlp.shared_expert"
        g = 1 / (1 + np.exp(-(x @ w[sp + "_gate.weight"].T)))
        out += g * swiglu(x, w[sp + ".gate_proj.weight"], w[sp + ".up_proj.weight"], w[sp + ".down_proj.weight"])
    return out


def forward(w, ids, eps, theta, arch):
    t = len(ids)
    bias = arch in ("qwen2", "qwen2moe")

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
        q = proj(x, p, "q").reshape(t, NH, HD)
        k = proj(x, p, "k").reshape(t, NKV, HD)
        if arch == "qwen3moe":  # each head's RMSNorm before RoPE
            q, k = rms(q, w[p + "self_attn.q_norm.weight"]), rms(k, w[p + "self_attn.k_norm.weight"])
        q, k = rope(q), rope(k)
        v = proj(x, p, "v").reshape(t, NKV, HD)
        o = np.zeros((t, NH, HD))
        for head in range(NH):
            kv = head // (NH // NKV)
            s = q[:, head] @ k[:, kv].T / np.sqrt(HD) + mask
            e = np.exp(s - s.max(-1, keepdims=True))
            o[:, head] = (e / e.sum(-1, keepdims=True)) @ v[:, kv]
        h = h + o.reshape(t, H) @ w[p + "self_attn.o_proj.weight"].T
        x = rms(h, w[p + "post_attention_layernorm.weight"])
        if arch in MOE:
            h = h + moe(w, arch, layer, x)
        else:
            h = h + swiglu(x, w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"],
                           w[p + "mlp.down_proj.weight"])
    return rms(h, w["model.norm.weight"]) @ w["lm_head.weight"].T


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return r.stdout


ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "mixtral": "MixtralForCausalLM",
                 "qwen3moe": "Qwen3MoeForCausalLM", "qwen2moe": "Qwen2MoeForCausalLM"}


def check(args, arch, seed):
    vocab = len(json.load(open(args.tokenizer))["model"]["vocab"])
    eps, theta = (1e-6, 1e6) if arch in ("qwen2", "qwen3moe", "qwen2moe") else (1e-5, 1e4)
    rng = np.random.default_rng(seed)
    d = os.path.join(args.out, arch)
    os.makedirs(d, exist_ok=True)
    w = make_weights(rng, vocab, arch)
    write_safetensors(os.path.join(d, "model.safetensors"), w)
    cfg = dict(architectures=[ARCHITECTURES[arch]], model_type=arch,
               vocab_size=vocab, hidden_size=H, num_hidden_layers=L, num_attention_heads=NH,
               num_key_value_heads=NKV, intermediate_size=FF, rms_norm_eps=eps, rope_theta=theta,
               max_position_embeddings=4096, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
               hidden_act="silu", torch_dtype="float32")
    if arch == "mixtral":  # each expert intermediate_size wide
        cfg.update(num_local_experts=E, num_experts_per_tok=K, intermediate_size=EFF, sliding_window=None)
    if arch == "qwen3moe":
        cfg.update(num_experts=E, num_experts_per_tok=K, moe_intermediate_size=EFF, norm_topk_prob=True,
                   head_dim=HD, decoder_sparse_step=1, mlp_only_layers=[], use_sliding_window=False)
    if arch == "qwen2moe":
        cfg.update(num_experts=E, num_experts_per_tok=K, moe_intermediate_size=EFF, norm_topk_prob=False,
                   shared_expert_intermediate_size=SFF, decoder_sparse_step=1, mlp_only_layers=[],
                   use_sliding_window=False, qkv_bias=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    shutil.copy(args.tokenizer, os.path.join(d, "tokenizer.json"))
    ids = json.loads(run([args.wgrt, "tokenize", "-m", d, "--json", TEXT]))
    dump = os.path.join(d, "logits.f32")
    run([args.wgrt, "run", "-m", d, "-c", "64", "-n", "0", "--quantize", "none", "--dump-logits", dump, "-p", TEXT])
    want = forward(w, ids, eps, theta, arch)
    got = np.fromfile(dump, dtype=np.float32).reshape(want.shape)
    rows = np.abs(got - want).max(1) / np.abs(want).max(1)
    bound = max(args.bound, MOE_BOUND) if arch in MOE else args.bound
    ok = bool(rows.max() <= bound)
    print(f"{arch} ({len(ids)} tokens): max |wgrt - numpy| / max |logit| = {rows.max():.3g} over positions "
          f"(first {rows[0]:.3g}, last {rows[-1]:.3g}; bound {bound:g}): {'ok' if ok else 'FAIL'}")
    return ok


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--wgrt", required=True)
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--bound", type=float, default=2e-3)
    args = p.parse_args()
    ok = True
    for seed, arch in enumerate(("llama", "qwen2") + MOE):
        ok &= check(args, arch, seed + 7)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
