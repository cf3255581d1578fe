// A part (gpu/pipeline.h, `//! use graph_symbols`): the graph's symbol block (graph.h
// kMaxSymbols, kSymbolBlockBytes), every symbol's live value, written once per update that
// changes one. A kernel that uses this part declares `symbols: Symbols` as a uniform binding
// (graph::Binding::symbol_block) and reads a symbol by the index its uniform block names, so
// that block stays the same from one decode step to the next.
struct Symbols {
  v: array<vec4<u32>, 4>,  // symbol i at v[i / 4][i % 4]: 16 symbols (kMaxSymbols)
}

fn symbol(i: u32) -> u32 { return symbols.v[i / 4u][i % 4u]; }
