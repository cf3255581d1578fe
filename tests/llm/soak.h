// The soak run shared by soak_test.cpp (CI-sized: 200 generations of the built-in random model
// on the CPU driver) and soak_heavy.cpp (1,000 generations of the demo model on a real GPU):
// random prompts and sampling parameters on one session. After a warm-up, what would leak must
// stay flat: wgrt's live GPU objects, kind by kind, and the bytes of live heap allocations
// (counted exactly by the allocator, not the resident memory, which the allocator's caches, ASan's
// quarantine of freed blocks and the driver's pools move by tens of MiB without any leak). Every
// output must be valid UTF-8 (checked here by the encoding's rules, not by the tokenizer's own
// validator).
#pragma once

#include <gtest/gtest.h>

#if defined(__SANITIZE_ADDRESS__)
// The sanitizer runtime's allocator statistics (sanitizer/allocator_interface.h, which GCC does
// not ship).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#else
#include <malloc.h>
#endif

#include <algorithm>
#include <fstream>
#include <iostream>
#include <random>
#include <string>

#include "gpu/handles.h"
#include "llm/generate.h"
#include "llm/session.h"
#include "support/device.h"

namespace wgrt::test {

// RFC 3629: shortest forms, no surrogates, nothing past U+10FFFF.
inline bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = uint8_t(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto b = uint8_t(s[i + k]);
      if ((b >> 6) != 0x2) return false;
      cp = cp << 6 | (b & 0x3F);
    }
    static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

// The bytes of the process's live heap allocations (wgrt's, Dawn's, the driver's): under ASan
// its allocator's own count, which drops a block when it is freed (its quarantine of freed
// blocks does not count); else glibc's (mallinfo2: bytes in use in every arena plus mmapped
// blocks; freed blocks kept in a thread's cache still count, a few hundred KiB at most).
inline size_t live_heap_bytes() {
#if defined(__SANITIZE_ADDRESS__)
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#endif
}

inline size_t resident_kib() {
  std::ifstream in("/proc/self/status");
  std::string key;
  size_t v = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> v;
      return v;
    }
    std::getline(in, key);
  }
  return 0;
}

// The live heap may grow by at most this much after the warm-up. Measured on the CPU driver (200
// generations of the random model), the live heap moves within 150 KiB without a trend, with
// ASan or glibc alike, while the resident memory under ASan swings by 290 MiB (its quarantine of
// freed blocks). A leak of more than 1.5 KiB per generation fails over CI's 180 generations, of
// more than 300 bytes over the heavy soak's 950.
constexpr size_t kSoakHeapSlack = size_t(256) << 10;
// The generations whose least live heap is compared, at the start and the end: a minimum skips
// what is only in flight at one moment (a freed block a thread's cache still holds); a leak
// raises every later one.
constexpr int kSoakHeapWindow = 10;

// `runs` generations on `s`, the first `warm_runs` of them warm-up; each predicts 1..max_predict tokens.
inline void soak(llm::Session& s, int runs, int warm_runs, int max_predict) {
  std::mt19937 rng(2026);
  auto uni = [&](float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); };
  const std::vector<std::string> pieces = {"the ", "é", "日本", "🙂", "a", "\n", "0.5 ", "Ünïcode ", "x"};
  gpu::ObjectCounts warm{};
  size_t warm_rss = 0;
  std::vector<size_t> heap;  // live heap bytes after each generation past the warm-up
  for (int run = 0; run < runs; ++run) {
    SCOPED_TRACE(run);
    if (run == warm_runs) {
      warm = gpu::object_counts();
      warm_rss = resident_kib();
    }
    llm::GenerateOptions g;
    const int n_pieces = 1 + int(rng() % 12);
    for (int i = 0; i < n_pieces; ++i) g.prompt += pieces[rng() % pieces.size()];
    g.n_predict = 1 + int(rng() % max_predict);
    g.sampling.temperature = rng() % 4 == 0 ? 0.f : uni(0.1f, 1.5f);
    g.sampling.top_k = rng() % 50;
    g.sampling.top_p = uni(0.5f, 1.f);
    g.sampling.min_p = uni(0.f, 0.2f);
    g.sampling.repeat_penalty = rng() % 3 == 0 ? uni(1.f, 1.3f) : 1.f;
    g.sampling.seed = rng();
    if (rng() % 5 == 0) g.stop = {"e"};
    llm::reset(s);
    std::string out;
    const llm::GenerateStats st = llm::generate(s, g, [&](std::string_view t) { out += t; });
    ASSERT_TRUE(valid_utf8(out)) << "output of run " << run << " is not valid UTF-8";
    ASSERT_LE(st.n_generated, size_t(g.n_predict));
    ASSERT_FALSE(st.stop_reason.empty());
    if (run >= warm_runs) heap.push_back(live_heap_bytes());
  }
  const gpu::ObjectCounts end = gpu::object_counts();
  for (size_t k = 0; k < size_t(gpu::ObjectKind::Count); ++k)
    EXPECT_EQ(end.alive[k], warm.alive[k]) << "live " << gpu::object_kind_name(gpu::ObjectKind(k))
                                           << " objects changed after the warm-up";
  EXPECT_EQ(end.created_persistent(), warm.created_persistent())
      << "GPU objects other than per-submit ones were created after the warm-up";
  ASSERT_GE(heap.size(), size_t(2 * kSoakHeapWindow));
  const size_t first = *std::min_element(heap.begin(), heap.begin() + kSoakHeapWindow);
  const size_t last = *std::min_element(heap.end() - kSoakHeapWindow, heap.end());
  EXPECT_LE(last, first + kSoakHeapSlack) << "the live heap grew from " << first << " to " << last << " bytes over "
                                          << heap.size() << " generations";
  std::cout << "soak: " << heap.size() << " generations after the warm-up: live heap " << first << " -> " << last
            << " bytes (least of " << kSoakHeapWindow << " generations; range " << *std::min_element(heap.begin(), heap.end())
            << " to " << *std::max_element(heap.begin(), heap.end()) << "), GPU objects alive " << warm.alive_total()
            << " -> " << end.alive_total() << ", resident " << warm_rss << " -> " << resident_kib() << " KiB\n";
}

}  // namespace wgrt::test
