// Device peaks: memory bandwidth (read, write, copy), f32 FMA rate, and trivial dispatches.
// Variants come from override constants: WG (workgroup size) and UNROLL (loads in flight per
// thread per loop turn). Every kernel is grid-stride over `n` vec4 elements, so any grid works.
struct Params {
  n: u32,        // vec4 elements in `src` / `dst`
  iters: u32,    // fma: loop turns per thread
  seed: f32,     // fill: value pattern; fma: multiplier (near 1, so values stay finite)
  _pad: u32,
}

override WG: u32 = 256u;
override UNROLL: u32 = 4u;

@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> p: Params;

fn thread_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
  return (wid.x + wid.y * nwg.x) * WG + lid;
}

fn thread_count(nwg: vec3<u32>) -> u32 {
  return nwg.x * nwg.y * WG;
}

// Reads all of `src`; each thread writes one vec4 (its sum) so no load is dead.
@compute @workgroup_size(WG)
fn read_bw(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = thread_index(wid, nwg, lid);
  let stride = thread_count(nwg);
  var acc = vec4<f32>(0.0);
  var i = t;
  // Main loop: UNROLL independent loads per turn, all in bounds.
  let step = stride * UNROLL;
  if (p.n >= step) {
    let last = p.n - step;
    for (; i <= last; i += step) {
      for (var u = 0u; u < UNROLL; u++) {
        acc += src[i + u * stride];
      }
    }
  }
  for (; i < p.n; i += stride) {
    acc += src[i];
  }
  dst[t] = acc;
}

// Writes all of `dst` with a pattern that is never all zeros.
@compute @workgroup_size(WG)
fn write_bw(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let stride = thread_count(nwg);
  for (var i = thread_index(wid, nwg, lid); i < p.n; i += stride) {
    let x = f32(i & 1023u) * p.seed + 1.0;
    dst[i] = vec4<f32>(x, x + 0.25, x + 0.5, x + 0.75);
  }
}

// dst = src, `n` vec4 each.
@compute @workgroup_size(WG)
fn copy_bw(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = thread_index(wid, nwg, lid);
  let stride = thread_count(nwg);
  var i = t;
  let step = stride * UNROLL;
  if (p.n >= step) {
    let last = p.n - step;
    for (; i <= last; i += step) {
      for (var u = 0u; u < UNROLL; u++) {
        dst[i + u * stride] = src[i + u * stride];
      }
    }
  }
  for (; i < p.n; i += stride) {
    dst[i] = src[i];
  }
}

// f32 FMA rate: 8 independent vec4 chains per thread, 2 rounds per loop turn, so each turn
// is 64 lane-FMAs (128 flops) against one compare-and-branch. The operands come from the
// uniform block and the thread index, so nothing folds at compile time.
@compute @workgroup_size(WG)
fn fma_rate(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) lid: u32) {
  let t = thread_index(wid, nwg, lid);
  let a = vec4<f32>(p.seed);
  let b = vec4<f32>(1e-3, 2e-3, 3e-3, 4e-3);
  let x = f32(t & 255u) * 1e-3;
  var c0 = vec4<f32>(x, x + 0.1, x + 0.2, x + 0.3);
  var c1 = c0 + 1.0;
  var c2 = c0 + 2.0;
  var c3 = c0 + 3.0;
  var c4 = c0 + 4.0;
  var c5 = c0 + 5.0;
  var c6 = c0 + 6.0;
  var c7 = c0 + 7.0;
  for (var k = 0u; k < p.iters; k++) {
    c0 = fma(c0, a, b); c1 = fma(c1, a, b); c2 = fma(c2, a, b); c3 = fma(c3, a, b);
    c4 = fma(c4, a, b); c5 = fma(c5, a, b); c6 = fma(c6, a, b); c7 = fma(c7, a, b);
    c0 = fma(c0, a, b); c1 = fma(c1, a, b); c2 = fma(c2, a, b); c3 = fma(c3, a, b);
    c4 = fma(c4, a, b); c5 = fma(c5, a, b); c6 = fma(c6, a, b); c7 = fma(c7, a, b);
  }
  if (t < p.n) {
    dst[t] = ((c0 + c1) + (c2 + c3)) + ((c4 + c5) + (c6 + c7));
  }
}

// One trivial dispatch: one workgroup bumps one word. `dst` is read_write, so WebGPU orders
// consecutive dispatches (a barrier between each), as in a real graph.
@compute @workgroup_size(WG)
fn tiny(@builtin(local_invocation_index) lid: u32) {
  if (lid == 0u) {
    dst[0].x += 1.0;
  }
}

// The same with only a read-only binding, so WebGPU needs no barrier between dispatches:
// the launch cost alone.
@compute @workgroup_size(WG)
fn tiny_ro(@builtin(local_invocation_index) lid: u32) {
  _ = src[lid];
}
