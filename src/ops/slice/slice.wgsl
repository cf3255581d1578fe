// last_rows copies rows [first_row, first_row + rows) of x into out; gather_rows copies row
// idx[j] of x (clamped to its first_row live rows) into row j of out.
struct Params {
  first_row: u32,
  rows: u32,
  cols: u32,
  _pad0: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn last_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid;
  if (i >= p.rows * p.cols) { return; }
  out[i] = x[p.first_row * p.cols + i];
}

@group(0) @binding(3) var<storage, read> idx: array<u32>;

@compute @workgroup_size(WG)
fn gather_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid;
  if (i >= p.rows * p.cols) { return; }
  let row = min(idx[i / p.cols], p.first_row - 1u);
  out[i] = x[row * p.cols + i % p.cols];
}
