// Rotary position embedding, a thread per (token, head, pair). The angle comes from the
// 0.64 fixed-point turns-per-position table (rope.h): (pos * turns) mod 1 in exact integer
// arithmetic, then centred to [-1/2, 1/2) turn before sin/cos.
struct Params {
  n_tokens: u32,
  n_heads: u32,
  head_dim: u32,
  n_rot: u32,
  pos: u32,
  neox: u32,
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> freqs: array<u32>;  // [n_rot / 2][hi, lo]
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const WG: u32 = 256u;

// The 64-bit product a * b as (lo, hi).
fn mul_wide(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xffffu;
  let a1 = a >> 16u;
  let b0 = b & 0xffffu;
  let b1 = b >> 16u;
  let p00 = a0 * b0;
  let p01 = a0 * b1;
  let p10 = a1 * b0;
  let p11 = a1 * b1;
  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return vec2<u32>((p00 & 0xffffu) | (mid << 16u), p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}

@compute @workgroup_size(WG)
fn rope(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = (wid.x + wid.y * nwg.x) * WG + lid;
  let half_dim = p.head_dim / 2u;
  if (t >= p.n_tokens * p.n_heads * half_dim) { return; }
  let j = t % half_dim;
  let row_head = t / half_dim;  // token * n_heads + head
  let token = row_head / p.n_heads;
  let base = row_head * p.head_dim;
  let half_rot = p.n_rot / 2u;

  if (j >= half_rot) {  // past n_rot: pass through (the same pairs in both layouts)
    y[base + 2u * j] = x[base + 2u * j];
    y[base + 2u * j + 1u] = x[base + 2u * j + 1u];
    return;
  }
  var i0 = base + 2u * j;
  var i1 = i0 + 1u;
  if (p.neox != 0u) {
    i0 = base + j;
    i1 = i0 + half_rot;
  }

  // (pos * turns) mod 1 as a 64-bit fraction; only its top 32 bits (and a little of the low
  // word) matter for an f32 angle.
  let position = p.pos + token;
  let lo = mul_wide(position, freqs[2u * j + 1u]);
  let hi = position * freqs[2u * j] + lo.y;  // wraps mod 2^32: whole turns drop out
  // Signed: [-1/2, 1/2) turn. 2 pi / 2^32 = 1.4629180792671596e-9.
  let angle = f32(bitcast<i32>(hi)) * 1.4629180792671596e-9 + f32(lo.x) * 3.406121e-19;
  let c = cos(angle);
  let s = sin(angle);
  let x0 = x[i0];
  let x1 = x[i1];
  y[i0] = x0 * c - x1 * s;
  y[i1] = x0 * s + x1 * c;
}
