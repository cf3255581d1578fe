// The soak run shared by soak_test.cpp (CI-sized: 200 generations of the built-in random model
// on the CPU driver) and soak_heavy.cpp (1,000 generations of the demo model on a real GPU):
// random prompts and sampling parameters on one session. After a warm-up, the GPU object count
// must not move and the process's resident memory must stay flat; every output must be valid
// UTF-8 (checked here by the encoding's rules, not by the tokenizer's own validator).
#pragma once

#include <gtest/gtest.h>

#include <fstream>
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

// `runs` generations on `s`, the first `warm_runs` of them warm-up; each predicts 1..max_predict tokens.
inline void soak(llm::Session& s, int runs, int warm_runs, int max_predict) {
  std::mt19937 rng(2026);
  auto uni = [&](float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); };
  const std::vector<std::string> pieces = {"the ", "é", "日本", "🙂", "a", "\n", "0.5 ", "Ünïcode ", "x"};
  gpu::ObjectCounts warm{};
  size_t warm_rss = 0;
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
  }
  const gpu::ObjectCounts end = gpu::object_counts();
  EXPECT_EQ(end.alive_total(), warm.alive_total()) << "GPU objects alive after warm-up changed";
  const size_t rss = resident_kib();
  EXPECT_LE(rss, warm_rss + warm_rss / 20 + 4096) << "resident memory grew from " << warm_rss << " to " << rss << " KiB";
}

}  // namespace wgrt::test
