// A part (gpu/pipeline.h, `//! use kv_rows`): token i's row of KvRows::table (kv_cache.h),
// (p_i, b_i), for kernels built with the override TABLE. The kernel that uses this part
// declares `kv_rows: array<u32>` (read-only storage: the table, or without TABLE another
// tensor the kernel reads, never read through kv_rows). Cache rows are clamped into a cache of n_ctx positions so that a bad table can never
// reach past it.

// p_i as given (RoPE turns at it).
fn kv_pos(i: u32) -> u32 { return kv_rows[2u * i]; }

// (base, keys): b_i clamped to the cache, and the keys of token i, p_i + 1, clamped so that
// base + keys <= n_ctx (>= 1).
fn kv_span(i: u32, n_ctx: u32) -> vec2<u32> {
  let base = min(kv_rows[2u * i + 1u], n_ctx - 1u);
  return vec2<u32>(base, min(kv_rows[2u * i], n_ctx - 1u - base) + 1u);
}

// The cache row token i writes: b_i + p_i, clamped.
fn kv_dst(i: u32, n_ctx: u32) -> u32 {
  let s = kv_span(i, n_ctx);
  return s.x + s.y - 1u;
}
