#include "llm/emit.h"

#include <algorithm>


namespace wgrt::llm {

bool is_end_token(const tokenizer::Vocab& v, int32_t id) { return id == v.eos_id || id == v.eot_id; }

std::string stop_filter_push(StopFilter& f, std::string_view text) {
  if (f.stopped) return {};
  f.held += text;
  for (const std::string& s : f.stops) {
    if (s.empty()) continue;
    if (size_t at = f.held.find(s); at != std::string::npos) {
      std::string out = f.held.substr(0, at);
      f.held.clear();
      f.stopped = true;
      return out;
    }
  }
  // Keep the longest tail that is a prefix of some stop string.
  size_t keep = 0;
  for (const std::string& s : f.stops)
    for (size_t n = std::min(s.size() - 1, f.held.size()); n > keep; --n)
      if (f.held.compare(f.held.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
  std::string out = f.held.substr(0, f.held.size() - keep);
  f.held.erase(0, f.held.size() - keep);
  return out;
}

std::string stop_filter_flush(StopFilter& f) {
  std::string out = f.stopped ? std::string() : f.held;
  f.held.clear();
  return out;
}

Emit emit_begin(const tokenizer::Tokenizer& tok, std::vector<std::string> stop, int32_t max_tokens,
                const std::atomic<bool>* interrupt) {
  Emit e;
  e.filter = StopFilter{std::move(stop), {}, false};
  e.dec = tokenizer::make_stream_decoder(tok, /*sequence_start=*/false);
  e.max_tokens = max_tokens;
  e.interrupt = interrupt;
  return e;
}

Emitted emit_token(Emit& e, const tokenizer::Tokenizer& tok, int32_t id, bool full,
                   const std::function<bool()>& make_room) {
  Emitted out;
  auto end = [&](const char* reason) {
    e.stop_reason = reason;
    out.end = true;
    return out;
  };
  if (e.interrupt && e.interrupt->load()) return end("interrupted");
  if (is_end_token(tok.vocab, id)) return end("eos");
  ++e.n_generated;
  out.counted = true;
  out.text = stop_filter_push(e.filter, tokenizer::decode_next(e.dec, id));
  if (e.filter.stopped) return end("stop string");
  if (e.max_tokens >= 0 && e.n_generated >= size_t(e.max_tokens)) return end("length");
  if (full && !(make_room && make_room())) return end("context");
  return out;
}

std::string emit_end(Emit& e) {
  return stop_filter_push(e.filter, tokenizer::decode_flush(e.dec)) + stop_filter_flush(e.filter);
}

}  // namespace wgrt::llm
