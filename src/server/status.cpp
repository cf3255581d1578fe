// GET /props and GET /slots (http.h props_json, slots_json): the server's settings and each
// slot's state, read from the model and the scheduler.
#include <fmt/format.h>

#include "server/http.h"

namespace wgrt::server {

using nlohmann::ordered_json;

ordered_json props_json(const ServerState& st) {
  const ServedModel& m = st.model;
  const CompletionRequest defaults;
  const llm::SamplerParams& p = defaults.sampling;
  auto or_null = [](const std::optional<std::string>& s) { return s ? ordered_json(*s) : ordered_json(nullptr); };
  const ordered_json params = {{"temperature", p.temperature}, {"top_k", p.top_k},   {"top_p", p.top_p},
                               {"min_p", p.min_p},             {"max_tokens", defaults.max_tokens},
                               {"seed", nullptr},  // none: each request draws one
                               {"stop", ordered_json::array()}, {"stream", defaults.stream}};
  return {{"default_generation_settings", {{"n_ctx", m.n_ctx}, {"params", params}}},
          {"total_slots", st.sched.n_slots},
          {"model_alias", m.id},
          {"model_path", m.path},
          {"n_ctx", m.n_ctx},
          {"n_vocab", m.n_vocab},
          {"chat_template", m.tmpl ? ordered_json(m.template_text) : ordered_json(nullptr)},
          {"chat_template_origin", m.tmpl ? ordered_json(m.template_origin) : ordered_json(nullptr)},
          {"bos_token", or_null(m.bos_token)},
          {"eos_token", or_null(m.eos_token)},
          {"modalities", {{"vision", false}, {"audio", false}}},
          {"build_info", fmt::format("wgrt {}", WGRT_VERSION)}};
}

ordered_json slots_json(ServerState& st) {
  std::vector<std::shared_ptr<Job>> jobs;
  std::vector<size_t> cached;
  {
    std::lock_guard lock(st.sched.m);
    jobs = st.sched.slots;
    for (const auto& c : st.sched.cached) cached.push_back(c.size());
  }
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < jobs.size(); ++i) {
    // A free slot's n_cached: the tokens its KV cache keeps for the next request (prompt cache).
    // An ended job's slot (its last event sent, the worker yet to free it) counts as free, with
    // the job's cache.
    const Job* ended = jobs[i] && jobs[i]->ended.load() ? jobs[i].get() : nullptr;
    const Job* j = ended ? nullptr : jobs[i].get();
    if (ended) cached[i] = ended->n_cached.load();
    out.push_back({{"id", i},
                   {"is_processing", j != nullptr},
                   {"n_ctx", st.model.n_ctx},
                   {"request_id", j ? ordered_json(j->id) : ordered_json(nullptr)},
                   {"n_prompt_tokens", j ? j->prompt.size() : size_t(0)},
                   {"n_prompt_tokens_cached", j ? j->n_reused : size_t(0)},
                   {"n_cached", j ? size_t(j->n_cached.load()) : cached[i]},
                   {"n_decoded", j ? j->n_decoded.load() : 0u}});
  }
  return out;
}

}  // namespace wgrt::server
