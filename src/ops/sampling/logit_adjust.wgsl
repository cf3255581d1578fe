// Logit bias, repetition penalties and a grammar's allowed-token mask, in place on logits rows
// (logit_adjust.h). Two kernels of one route: the entries of each row, then the mask.
struct Params {
  n_rows: u32,
  n_vocab: u32,
  max_entries: u32,
  mask_words: u32,
  neg_inf: u32,  // the bits of -inf (a WGSL constant may not be infinite)
  _pad1: u32,
  _pad2: u32,
  _pad3: u32,
}

struct Row {
  n_entries: u32,
  has_mask: u32,
  repeat_penalty: f32,
  presence_penalty: f32,
  repeat_inverse: f32,  // 1 / repeat_penalty, rounded to f32 by the host
  _pad1: u32,
  _pad2: u32,
  _pad3: u32,
}

struct Entry {
  token: u32,
  count: u32,
  bias: f32,
  freq_sub: f32,
}

@group(0) @binding(0) var<storage, read_write> logits: array<f32>;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> entries: array<Entry>;
@group(0) @binding(3) var<storage, read> allow: array<u32>;
@group(0) @binding(4) var<uniform> p: Params;


// Grid (1, n_rows): a workgroup per row, a thread per entry (tokens are distinct: no races).
@compute @workgroup_size(WG)
fn adjust_entries(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.y;
  let r = rows[row];
  let n = min(r.n_entries, p.max_entries);
  for (var i = lid; i < n; i += WG) {
    let e = entries[row * p.max_entries + i];
    if (e.token >= p.n_vocab) { continue; }
    let at = row * p.n_vocab + e.token;
    var l = logits[at];
    if (e.count > 0u) {
      if (r.repeat_penalty != 1.0) {
        // A positive logit times the host's reciprocal, as the CPU rule (llm/sampler.h) does: a
        // product is correctly rounded in WGSL, a division only to 2.5 ulp (an H100 gave 1 ulp).
        l = select(l * r.repeat_penalty, l * r.repeat_inverse, l > 0.0);
      }
      l = (l - r.presence_penalty) - e.freq_sub;
    }
    logits[at] = l + e.bias;
  }
}

// Grid (ceil(n_vocab / WG), n_rows): a thread per logit; a token without its allow bit gets
// -inf (its bit 1 << (i % 32) of word i / 32).
@compute @workgroup_size(WG)
fn adjust_mask(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.y;
  let i = wid.x * WG + lid;
  if (i >= p.n_vocab || rows[row].has_mask == 0u) { return; }
  if (((allow[row * p.mask_words + i / 32u] >> (i % 32u)) & 1u) == 0u) {
    logits[row * p.n_vocab + i] = bitcast<f32>(p.neg_inf);
  }
}
