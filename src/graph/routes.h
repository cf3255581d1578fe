// Declared routes: a node's kernels chosen by the live value of one key (a symbol or a live
// dim), each route owning a closed range of that key. At build the ranges must be non-empty,
// must not overlap and must cover the key's whole domain; only the active route is encoded.
//
//   q4gsw linear on n_tokens:  [1,1] GEMV   [2,7] small-M   [8,max] tiled GEMM
//
// A route is referred to by its id (plans, profiles, tests, labs), never by its position in
// the set, so declaring a route in front of others changes nothing they see.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "gpu/pipeline.h"
#include "graph/shape.h"

namespace wgrt::graph {

struct RouteKey {
  enum class Kind : uint8_t { Symbol, Dim };
  Kind kind = Kind::Dim;
  SymbolId symbol;
  TensorId tensor;  // Dim: whose live dim
  int dim = 0;

  static RouteKey of_symbol(SymbolId s) { return {Kind::Symbol, s, {}, 0}; }
  static RouteKey of_dim(TensorId t, int d) { return {Kind::Dim, {}, t, d}; }
};

// A kernel's binding: a tensor's buffer, or (uniform = true) the node's uniform block for
// this dispatch.
struct Binding {
  uint32_t slot = 0;
  TensorId tensor;
  bool uniform = false;  // the node's uniform block for this kernel (its plan's params)
  bool symbols = false;  // the graph's symbol block: every symbol's live value (graph.h)

  static Binding of(uint32_t slot, TensorId t) { return {slot, t, false, false}; }
  static Binding params(uint32_t slot) { return {slot, {}, true, false}; }
  static Binding symbol_block(uint32_t slot) { return {slot, {}, false, true}; }
  bool is_tensor() const { return !uniform && !symbols; }
};

struct KernelSpec {
  gpu::PipelineKey pipeline;
  std::vector<Binding> bindings;
  bool optional = false;  // a plan may skip it with the empty grid (0, 0, 0): not encoded
};

// A route's id: declared by its op next to the route (ops/linear/linear.h: kLinearGemv), unique
// within the node. 0 is no id (refused at build).
struct RouteId {
  uint32_t v = 0;
  constexpr bool operator==(const RouteId&) const = default;
};
inline constexpr RouteId kMainRoute{1};  // single_route's
std::ostream& operator<<(std::ostream& os, RouteId id);  // "route id 2" (test messages)

struct Route {
  RouteId id;
  std::string name;  // e.g. "gemv"
  int64_t lo = 0;
  int64_t hi = 0;    // inclusive
  std::vector<KernelSpec> kernels;
  bool idle = false;  // declared to do nothing (no kernels): a node that only runs when asked
};

struct RouteSet {
  RouteKey key;
  std::vector<Route> routes;
};

// A RouteSet of one route, kMainRoute, over the whole domain [lo, hi] (ops without variants).
RouteSet single_route(RouteKey key, int64_t lo, int64_t hi, std::vector<KernelSpec> kernels,
                      std::string name = "main");

// Throws std::invalid_argument naming `key_name` and the route without an id, the id two routes
// share, or the empty range, overlap or gap when the ranges are not an exact cover of [lo, hi].
void validate_routes(const RouteSet& set, int64_t lo, int64_t hi, const std::string& key_name);

// The route whose range holds `value` (validated sets only).
const Route& select_route(const RouteSet& set, int64_t value);

// The route with id `id`, or null.
const Route* find_route(const RouteSet& set, RouteId id);

}  // namespace wgrt::graph
