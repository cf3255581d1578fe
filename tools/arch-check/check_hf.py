#!/usr/bin/env python3
"""Each architecture wgrt runs from Hugging Face checkpoints, against `transformers` itself: a tiny
model of random weights per architecture (transformers' own init, seeded, f32, eager attention),
saved with save_pretrained beside wgrt's demo tokenizer.json; wgrt reads the directory, tokenizes
a text and dumps the logits of every prompt position (`wgrt run --dump-logits`); transformers
computes the logits of the same ids; the largest difference over a row's largest |logit| must stay
under the bound. Runs on the GPU machine (it has torch and transformers), one device call:

  check_hf.py --wgrt PATH/wgrt --tokenizer models/wgrt-demo-tokenizer.json --out DIR [--bound 2e-3]

phi3 runs twice: a prompt within original_max_position_embeddings (64) with `-c 64` (LongRoPE's
short factors on both sides: transformers picks by the sequence's length, wgrt by its context) and
a longer one with `-c 256` (the long factors). gemma2 and gemma3 attend through a sliding window of
8 keys on layer 0 (the prompt is longer); gemma3 turns its local layer at 10000 and its global one at
1e6 with linear scaling 8. mixtral, qwen3moe and qwen2moe are mixtures of 4 experts, 2 a token
(qwen2moe with its shared expert); their routers are drawn 10 times wider than transformers' init
so each token's chosen experts lead the others by more than rounding, and their bound is
MOE_BOUND: --quantize none keeps every weight as it is but the experts', which wgrt quantizes to
q8 at load (its experts' kernels read quantized rows). Prints one line per case; exits 1 if any
fails."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import torch
import transformers

MOE = ("mixtral", "qwen3moe", "qwen2moe")
MOE_BOUND = 3e-2
ROUTER = re.compile(r"\.(mlp|block_sparse_moe)\.gate\.weight$")

TEXT = ("In the beginning God created the heaven and the earth. And the earth was without form, and void; "
        "and darkness was upon the face of the deep.")


def base(vocab):
    return dict(vocab_size=vocab, hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=512, rms_norm_eps=1e-5, max_position_embeddings=4096,
                tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)


def configs(vocab):
    hd = 256 // 4
    short = [1.0 + 0.25 * (i % 3) for i in range(hd // 2)]
    long = [1.0 + 3.0 * i / (hd // 2 - 1) for i in range(hd // 2)]
    yield "llama", transformers.LlamaConfig(**base(vocab), rope_theta=10000.0)
    yield "qwen2", transformers.Qwen2Config(**base(vocab), rope_theta=10000.0, use_sliding_window=False)
    yield "qwen3", transformers.Qwen3Config(**base(vocab), head_dim=hd, rope_theta=10000.0,
                                            use_sliding_window=False)
    phi = base(vocab)
    phi.update(num_key_value_heads=4, original_max_position_embeddings=64, sliding_window=None, pad_token_id=0,
               rope_scaling={"type": "longrope", "short_factor": short, "long_factor": long})
    yield "phi3", transformers.Phi3Config(**phi, rope_theta=10000.0)
    # Gemma: a sliding window of 8 keys (shorter than the prompt) on layer 0, global layer 1.
    gem = base(vocab)
    gem.update(head_dim=hd, query_pre_attn_scalar=hd, sliding_window=8, hidden_activation="gelu_pytorch_tanh")
    yield "gemma2", transformers.Gemma2Config(**gem, rope_theta=10000.0, attn_logit_softcapping=50.0,
                                              final_logit_softcapping=30.0)
    yield "gemma3", transformers.Gemma3TextConfig(**gem, rope_theta=1000000.0, rope_local_base_freq=10000.0,
                                                  sliding_window_pattern=2,
                                                  layer_types=["sliding_attention", "full_attention"],
                                                  rope_scaling={"rope_type": "linear", "factor": 8.0})
    # Mixtures of experts: every layer's FFN 4 experts, 2 a token.
    moe = dict(num_experts_per_tok=2, rope_theta=10000.0)
    yield "mixtral", transformers.MixtralConfig(**base(vocab), **moe, num_local_experts=4, sliding_window=None)
    sparse = dict(moe, num_experts=4, moe_intermediate_size=128, decoder_sparse_step=1, mlp_only_layers=[],
                  use_sliding_window=False)
    yield "qwen3moe", transformers.Qwen3MoeConfig(**base(vocab), **sparse, head_dim=hd, norm_topk_prob=True)
    yield "qwen2moe", transformers.Qwen2MoeConfig(**base(vocab), **sparse, norm_topk_prob=False,
                                                  shared_expert_intermediate_size=384)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return r.stdout


def check(args, name, cfg, text, ctx):
    d = os.path.join(args.out, name)
    if not os.path.isdir(d):
        torch.manual_seed(7)
        model = transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32,
                                                             attn_implementation="eager")
        if name in MOE:  # wider routers: no near ties for the experts' q8 rounding to tip
            with torch.no_grad():
                for pname, param in model.named_parameters():
                    if ROUTER.search(pname):
                        param.mul_(10)
        model.save_pretrained(d, safe_serialization=True)
        shutil.copy(args.tokenizer, os.path.join(d, "tokenizer.json"))
    model = transformers.AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32,
                                                              attn_implementation="eager").eval()
    ids = json.loads(run([args.wgrt, "tokenize", "-m", d, "--json", text]))
    dump = os.path.join(args.out, f"{name}-{ctx}.f32")
    # --quantize none: a checkpoint directory is quantized to q4gsw at load by default.
    run([args.wgrt, "run", "-m", d, "-c", str(ctx), "-n", "0", "--quantize", "none", "--dump-logits", dump, "-p", text])
    with torch.no_grad():
        want = model(torch.tensor([ids])).logits[0].float()
    got = torch.frombuffer(bytearray(open(dump, "rb").read()), dtype=torch.float32).reshape(want.shape)
    ratio = ((got - want).abs().max() / want.abs().max()).item()
    bound = max(args.bound, MOE_BOUND) if name in MOE else args.bound
    ok = ratio <= bound
    print(f"{name} ({len(ids)} tokens, -c {ctx}): max |wgrt - transformers| / max |logit| = {ratio:.3g} "
          f"(bound {bound:g}): {'ok' if ok else 'FAIL'}")
    if not ok:  # where it goes wrong: the first position has no attention to other tokens, nor rope
        rows = ((got - want).abs().max(dim=1).values / want.abs().max(dim=1).values).tolist()
        print(f"  per position: {' '.join(f'{r:.2g}' for r in rows[:8])} ... {rows[-1]:.2g}; "
              f"max |logit| {want.abs().max().item():.3g}, wgrt's {got.abs().max().item():.3g}")
    return ok


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--wgrt", required=True)
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--bound", type=float, default=2e-3)
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    os.makedirs(args.out, exist_ok=True)
    vocab = len(json.load(open(args.tokenizer))["model"]["vocab"])
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, vocabulary {vocab}")
    ok = True
    for name, cfg in configs(vocab):
        try:
            ok &= check(args, name, cfg, TEXT, 64)
            if name == "phi3":
                ok &= check(args, name, cfg, " ".join([TEXT] * 3), 256)
        except Exception as e:  # report every architecture, then fail
            print(f"{name}: {e}")
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
