#!/usr/bin/env python3
"""Trains wgrt's demo model: a byte-level BPE tokenizer (Hugging Face `tokenizers`) and a small
llama-architecture model (RMSNorm, RoPE, SwiGLU, GQA, tied embeddings) on the corpus of
tools/demo-model/corpus.sh, with PyTorch on one GPU, from a fixed seed.

  train.py --corpus DIR_WITH_train.txt_valid.txt --out OUT_DIR

Writes to OUT_DIR:
  tokenizer.json       the tokenizer (BOS = EOS = <|endoftext|>, id 0, prepended by its template)
  config.json          the model's shape, as Hugging Face's LlamaConfig names it
  model.safetensors    the f32 weights (HF names; lm_head is tied to embed_tokens), written by
                       the few lines of write_safetensors below
  loss.csv             step, tokens seen, learning rate, train loss, validation loss, seconds
  tokenizer-ids.json   HF's ids for sample texts, for wgrt's tokenizer tests
  summary.json         the recipe, parameter count, final losses and timings

Validation loss is measured the way `wgrt perplexity` scores a file: the validation text is
tokenized whole (with BOS first), cut into consecutive windows of the training context, and every
position but the last of each window predicts the next token."""
import argparse
import csv
import json
import math
import os
import struct
import time

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

SAMPLE_TEXTS = [
    "In the beginning God created the heaven and the earth.",
    "Call me Ishmael. Some years ago—never mind how long precisely—having little money,",
    "HACKER, n. A person who enjoys exploring the details of programmable systems.",
    "  Leading spaces,\ttabs\nand new\n\nlines;   runs of    spaces.  ",
    "Numbers 1, 22, 333, 4444 and 3.14159; dates 2026-12-01; prices $12.50!",
    "Unicode: café, naïve, Æsir, Straße, 東京, emoji 🙂, dashes – — and “quotes”.",
    "don't can't I'm you're he'll we've they'd IT'S",
    "<|endoftext|> is the special token, written out as text here.",
    "",
    "a",
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--kv-heads", type=int, default=3)  # wgrt takes GQA ratios 1, 2, 4, 8
    p.add_argument("--ff", type=int, default=1024)
    p.add_argument("--ctx", type=int, default=256)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=1200)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--time-limit", type=float, default=225, help="stop training after this many seconds")
    p.add_argument("--device", default="cuda")
    return p.parse_args()


# ---- tokenizer ----------------------------------------------------------------------------

def train_tokenizer(train_path, vocab_size):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([train_path], trainer)
    tok.post_processor = processors.TemplateProcessing(single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", 0)])
    assert tok.token_to_id("<|endoftext|>") == 0
    return tok


def encode_text(tok, text):
    # Whole-text ids without BOS, encoded in parallel: the text is cut before each blank line, a
    # place where the GPT-2 pre-tokenizer splits anyway, so the pieces' ids concatenate to the
    # ids of the whole (checked on a prefix below).
    parts = text.split("\n\n")
    chunks = [parts[0]] + ["\n\n" + p for p in parts[1:]]
    ids = []
    for e in tok.encode_batch(chunks, add_special_tokens=False):
        ids += e.ids
    return ids


# ---- model (Hugging Face's LlamaForCausalLM computation, written out) ----------------------

def rms_norm(x, w, eps):
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rope_tables(ctx, head_dim, theta, device):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim))
    f = torch.outer(torch.arange(ctx, dtype=torch.float32, device=device), inv)
    emb = torch.cat([f, f], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class Model(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d, hd = cfg["hidden_size"], cfg["head_dim"]
        nh, nkv, ff, L = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"], cfg["num_hidden_layers"]
        P = torch.nn.Parameter
        self.embed = P(torch.empty(cfg["vocab_size"], d))
        self.layers = torch.nn.ModuleList()
        for _ in range(L):
            m = torch.nn.Module()
            m.ln1, m.ln2 = P(torch.ones(d)), P(torch.ones(d))
            m.q, m.k, m.v = P(torch.empty(nh * hd, d)), P(torch.empty(nkv * hd, d)), P(torch.empty(nkv * hd, d))
            m.o = P(torch.empty(d, nh * hd))
            m.gate, m.up, m.down = P(torch.empty(ff, d)), P(torch.empty(ff, d)), P(torch.empty(d, ff))
            self.layers.append(m)
        self.norm = P(torch.ones(d))

    def init_weights(self, gen):
        std, res_std = 0.02, 0.02 / math.sqrt(2 * self.cfg["num_hidden_layers"])
        with torch.no_grad():
            self.embed.normal_(0, std, generator=gen)
            for m in self.layers:
                for w in (m.q, m.k, m.v, m.gate, m.up):
                    w.normal_(0, std, generator=gen)
                for w in (m.o, m.down):
                    w.normal_(0, res_std, generator=gen)

    def forward(self, ids, dropout=0.0):
        c = self.cfg
        B, T = ids.shape
        hd, nh, nkv, eps = c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"], c["rms_norm_eps"]
        cos, sin = rope_tables(T, hd, c["rope_theta"], ids.device)
        x = F.embedding(ids, self.embed)
        for m in self.layers:
            h = rms_norm(x, m.ln1, eps)
            q = F.linear(h, m.q).view(B, T, nh, hd).transpose(1, 2)
            k = F.linear(h, m.k).view(B, T, nkv, hd).transpose(1, 2)
            v = F.linear(h, m.v).view(B, T, nkv, hd).transpose(1, 2)
            q = q * cos.to(q.dtype) + rotate_half(q) * sin.to(q.dtype)
            k = k * cos.to(k.dtype) + rotate_half(k) * sin.to(k.dtype)
            k = k.repeat_interleave(nh // nkv, dim=1)
            v = v.repeat_interleave(nh // nkv, dim=1)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            a = F.linear(a.transpose(1, 2).reshape(B, T, nh * hd), m.o)
            x = x + F.dropout(a, dropout, self.training)
            h = rms_norm(x, m.ln2, eps)
            f = F.linear(F.silu(F.linear(h, m.gate)) * F.linear(h, m.up), m.down)
            x = x + F.dropout(f, dropout, self.training)
        return F.linear(rms_norm(x, self.norm, eps), self.embed)

    def hf_tensors(self):
        t = {"model.embed_tokens.weight": self.embed, "model.norm.weight": self.norm}
        for i, m in enumerate(self.layers):
            p = f"model.layers.{i}."
            t[p + "input_layernorm.weight"] = m.ln1
            t[p + "post_attention_layernorm.weight"] = m.ln2
            for n, w in (("q", m.q), ("k", m.k), ("v", m.v), ("o", m.o)):
                t[p + f"self_attn.{n}_proj.weight"] = w
            for n, w in (("gate", m.gate), ("up", m.up), ("down", m.down)):
                t[p + f"mlp.{n}_proj.weight"] = w
        return t


def write_safetensors(path, tensors):
    # safetensors: u64 little-endian header size, the JSON header, then the raw bytes.
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        b = t.detach().float().contiguous().cpu().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


# ---- training -----------------------------------------------------------------------------

@torch.no_grad()
def eval_loss(model, val_ids, ctx, device):
    # wgrt perplexity's windows: consecutive, ctx tokens each, the last position unscored.
    model.eval()
    total, n = 0.0, 0
    windows = [val_ids[s:s + ctx] for s in range(0, len(val_ids) - 1, ctx)]
    full = [w for w in windows if len(w) == ctx]
    for i in range(0, len(full), 64):
        x = torch.tensor(full[i:i + 64], device=device)
        logits = model(x).float()
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum")
        total += loss.item()
        n += x.shape[0] * (ctx - 1)
    for w in windows[len(full):]:  # the short tail window
        x = torch.tensor([w], device=device)
        logits = model(x).float()
        total += F.cross_entropy(logits[0, :-1], x[0, 1:], reduction="sum").item()
        n += len(w) - 1
    model.train()
    return total / n, n


def main():
    a = parse_args()
    os.makedirs(a.out, exist_ok=True)
    t_start = time.time()
    torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    train_path, valid_path = os.path.join(a.corpus, "train.txt"), os.path.join(a.corpus, "valid.txt")
    tok = train_tokenizer(train_path, a.vocab)
    tok.save(os.path.join(a.out, "tokenizer.json"))
    t_tok = time.time() - t_start
    with open(os.path.join(a.out, "tokenizer-ids.json"), "w", encoding="utf-8") as f:
        json.dump([{"text": s, "ids": tok.encode(s).ids} for s in SAMPLE_TEXTS], f, ensure_ascii=False, indent=0)

    train_text = open(train_path, encoding="utf-8").read()
    valid_text = open(valid_path, encoding="utf-8").read()
    prefix = train_text[:200000]
    if encode_text(tok, prefix) == tok.encode(prefix, add_special_tokens=False).ids:
        train_ids = encode_text(tok, train_text)
    else:  # not expected; the whole text at once is slower but right
        print("warning: chunked encoding differs from whole-text encoding; encoding the whole text", flush=True)
        train_ids = tok.encode(train_text, add_special_tokens=False).ids
    train_ids = torch.tensor(train_ids, dtype=torch.long)
    val_ids = tok.encode(valid_text).ids  # BOS first, as `wgrt perplexity` tokenizes a file
    print(f"tokenizer: {tok.get_vocab_size()} tokens in {t_tok:.1f} s; train {len(train_ids)} tokens, "
          f"valid {len(val_ids)} tokens", flush=True)

    cfg = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": tok.get_vocab_size(), "hidden_size": a.dim, "intermediate_size": a.ff,
        "num_hidden_layers": a.layers, "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads,
        "head_dim": a.dim // a.heads, "max_position_embeddings": a.ctx, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": True,
        "attention_bias": False, "mlp_bias": False, "bos_token_id": 0, "eos_token_id": 0,
        "torch_dtype": "float32",
    }
    device = torch.device(a.device)
    model = Model(cfg).to(device)
    gen = torch.Generator(device=device).manual_seed(a.seed)
    model.init_weights(gen)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f} M parameters", flush=True)

    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=device.type == "cuda")

    def lr_at(step):
        if step < a.warmup:
            return a.lr * (step + 1) / a.warmup
        p = (step - a.warmup) / max(1, a.steps - a.warmup)
        return a.lr * (a.min_lr_ratio + (1 - a.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * p)))

    # Each sequence: BOS, then ctx - 1 tokens from a random place in the training stream (as a
    # prompt is run: BOS first). Positions come from a seeded CPU generator.
    data_gen = torch.Generator().manual_seed(a.seed)
    train_dev = train_ids.to(device)
    offsets = torch.arange(a.ctx, device=device)
    bos = torch.zeros(a.batch, 1, dtype=torch.long, device=device)

    rows, best = [], (float("inf"), -1, None)
    log = open(os.path.join(a.out, "loss.csv"), "w", newline="")
    w = csv.writer(log)
    w.writerow(["step", "tokens", "lr", "train_loss", "valid_loss", "seconds"])
    t_train = time.time()
    running, running_n, step = 0.0, 0, 0
    stopped_by = "steps"
    for step in range(a.steps + 1):
        if step % a.eval_every == 0 or step == a.steps:
            vl, vn = eval_loss(model, val_ids, a.ctx, device)
            tl = running / running_n if running_n else float("nan")
            el = time.time() - t_train
            w.writerow([step, step * a.batch * (a.ctx - 1), f"{lr_at(step):.6g}", f"{tl:.5f}", f"{vl:.5f}", f"{el:.2f}"])
            log.flush()
            print(f"step {step:5d}  lr {lr_at(step):.2e}  train {tl:.4f}  valid {vl:.4f}  ({el:.1f} s)", flush=True)
            rows.append((step, tl, vl))
            running, running_n = 0.0, 0
            if vl < best[0]:
                best = (vl, step, {k: v.detach().clone() for k, v in model.hf_tensors().items()})
            if step == a.steps:
                break
            if el > a.time_limit:
                stopped_by = f"time limit {a.time_limit} s"
                break
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        starts = torch.randint(0, len(train_ids) - a.ctx, (a.batch,), generator=data_gen).to(device)
        seq = train_dev[starts[:, None] + offsets[None, :]]  # ctx tokens: ctx - 1 inputs after BOS
        x = torch.cat([bos, seq[:, :-1]], dim=1)
        y = seq
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            logits = model(x, a.dropout)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running += loss.item() if step % 10 == 0 else 0.0
        running_n += 1 if step % 10 == 0 else 0
    log.close()
    train_seconds = time.time() - t_train

    # The checkpoint of lowest validation loss is the model (early stopping).
    with torch.no_grad():
        for k, v in model.hf_tensors().items():
            v.copy_(best[2][k])
    final_val, n_val = eval_loss(model, val_ids, a.ctx, device)
    write_safetensors(os.path.join(a.out, "model.safetensors"), model.hf_tensors())
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    summary = {
        "args": vars(a), "parameters": n_params, "train_tokens": len(train_ids), "valid_tokens": len(val_ids),
        "tokenizer_seconds": t_tok, "train_seconds": train_seconds, "steps_run": step, "stopped_by": stopped_by,
        "best_step": best[1], "valid_loss": final_val, "valid_scored_tokens": n_val,
        "valid_ppl": math.exp(final_val), "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
    }
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
