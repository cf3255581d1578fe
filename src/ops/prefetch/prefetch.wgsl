// Prefetch: reads one u32 of every 32-byte sector of up to four buffers (the weights of a
// kernel that runs later in the step), so their bytes are in L2 when that kernel starts. It runs
// beside the kernel dispatched before it (ops/prefetch/prefetch.h says why no barrier waits for
// it there). Its one output is a sink that nothing reads: a thread writes it only when the words'
// xor equals `magic`, so no load is dead code and almost no thread writes.
struct Params {
  end0: u32,   // the sectors of src0, src0..src1, ... src0..src3 (a running sum)
  end1: u32,
  end2: u32,
  end3: u32,
  magic: u32,
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

override WG: u32 = 256u;

@group(0) @binding(0) var<storage, read> src0: array<u32>;
@group(0) @binding(1) var<storage, read> src1: array<u32>;
@group(0) @binding(2) var<storage, read> src2: array<u32>;
@group(0) @binding(3) var<storage, read> src3: array<u32>;
@group(0) @binding(4) var<storage, read_write> sink: array<u32>;
@group(0) @binding(5) var<uniform> p: Params;

// The first word of sector s of the four buffers laid end to end.
fn sector_word(s: u32) -> u32 {
  if (s < p.end0) { return src0[8u * s]; }
  if (s < p.end1) { return src1[8u * (s - p.end0)]; }
  if (s < p.end2) { return src2[8u * (s - p.end1)]; }
  return src3[8u * (s - p.end2)];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let stride = nwg.x * WG;
  var s = wid.x * WG + lid;
  var acc = 0u;
  // Four loads in flight per turn; consecutive threads read consecutive sectors.
  for (; s + 3u * stride < p.end3; s += 4u * stride) {
    acc ^= sector_word(s) ^ sector_word(s + stride) ^ sector_word(s + 2u * stride) ^ sector_word(s + 3u * stride);
  }
  for (; s < p.end3; s += stride) { acc ^= sector_word(s); }
  if (acc == p.magic) { sink[lid] = acc; }
}
