#include "graph/routes.h"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>
#include <stdexcept>

namespace wgrt::graph {

RouteSet single_route(RouteKey key, int64_t lo, int64_t hi, std::vector<KernelSpec> kernels,
                      std::string name) {
  RouteSet set;
  set.key = key;
  set.routes.push_back(Route{kMainRoute, std::move(name), lo, hi, std::move(kernels)});
  return set;
}

void validate_routes(const RouteSet& set, int64_t lo, int64_t hi, const std::string& key_name) {
  if (set.routes.empty())
    throw std::invalid_argument(fmt::format("routes on {}: none declared", key_name));
  for (size_t i = 0; i < set.routes.size(); ++i) {
    const Route& r = set.routes[i];
    if (r.id == RouteId{})
      throw std::invalid_argument(fmt::format(
          "routes on {}: route '{}' has no id (hint: declare its RouteId next to the route, as the ops do)",
          key_name, r.name));
    for (size_t j = 0; j < i; ++j)
      if (set.routes[j].id == r.id)
        throw std::invalid_argument(fmt::format(
            "routes on {}: routes '{}' and '{}' share the id {} (hint: each route of a node needs its own id)",
            key_name, set.routes[j].name, r.name, r.id.v));
  }
  for (const auto& r : set.routes) {
    if (r.lo > r.hi)
      throw std::invalid_argument(fmt::format(
          "routes on {}: route '{}' has the empty range [{}, {}] (hint: lo must be <= hi)",
          key_name, r.name, r.lo, r.hi));
    if (r.kernels.empty() != r.idle)
      throw std::invalid_argument(
          fmt::format("routes on {}: route '{}' [{}, {}] has {} (hint: only a route marked idle runs no "
                      "kernel)", key_name, r.name, r.lo, r.hi, r.idle ? "kernels but is marked idle" : "no kernel"));
  }
  std::vector<const Route*> sorted;
  for (const auto& r : set.routes) sorted.push_back(&r);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->lo < b->lo; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    const Route& a = *sorted[i - 1];
    const Route& b = *sorted[i];
    if (b.lo <= a.hi)
      throw std::invalid_argument(fmt::format(
          "routes on {}: '{}' [{}, {}] and '{}' [{}, {}] overlap on [{}, {}]", key_name, a.name,
          a.lo, a.hi, b.name, b.lo, b.hi, b.lo, std::min(a.hi, b.hi)));
  }
  // Walk the domain: every value in [lo, hi] must fall in some route.
  int64_t next = lo;
  for (const Route* r : sorted) {
    if (r->hi < lo || r->lo > hi)
      throw std::invalid_argument(fmt::format(
          "routes on {}: '{}' [{}, {}] lies outside the domain [{}, {}]", key_name, r->name, r->lo,
          r->hi, lo, hi));
    if (r->lo > next)
      throw std::invalid_argument(fmt::format(
          "routes on {}: gap [{}, {}] in the domain [{}, {}] is covered by no route", key_name,
          next, r->lo - 1, lo, hi));
    next = std::max(next, r->hi + 1);
  }
  if (next <= hi)
    throw std::invalid_argument(fmt::format(
        "routes on {}: gap [{}, {}] in the domain [{}, {}] is covered by no route", key_name, next,
        hi, lo, hi));
  if (sorted.front()->lo < lo || sorted.back()->hi > hi)
    throw std::invalid_argument(fmt::format(
        "routes on {}: ranges [{}, {}] reach past the domain [{}, {}]", key_name,
        sorted.front()->lo, sorted.back()->hi, lo, hi));
}

const Route& select_route(const RouteSet& set, int64_t value) {
  for (const Route& r : set.routes)
    if (value >= r.lo && value <= r.hi) return r;
  throw std::logic_error(fmt::format("no route holds {} (routes were not validated)", value));
}

std::ostream& operator<<(std::ostream& os, RouteId id) { return os << "route id " << id.v; }

const Route* find_route(const RouteSet& set, RouteId id) {
  for (const Route& r : set.routes)
    if (r.id == id) return &r;
  return nullptr;
}

}  // namespace wgrt::graph
