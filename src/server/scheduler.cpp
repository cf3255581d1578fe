#include "server/scheduler.h"

#include <algorithm>

namespace wgrt::server {

void push_event(Job& j, Event e) {
  if (e.done) j.ended.store(true);
  {
    std::lock_guard lock(j.m);
    j.events.push_back(std::move(e));
  }
  j.cv.notify_all();
}

std::optional<Event> wait_event(Job& j, std::chrono::milliseconds timeout) {
  std::unique_lock lock(j.m);
  if (!j.cv.wait_for(lock, timeout, [&] { return !j.events.empty(); })) return std::nullopt;
  Event e = std::move(j.events.front());
  j.events.pop_front();
  return e;
}

void init_scheduler(Scheduler& s, size_t n_slots, size_t max_queued) {
  s.n_slots = std::max<size_t>(n_slots, 1);
  s.max_queued = max_queued;
  s.slots.assign(s.n_slots, nullptr);
  s.cached.assign(s.n_slots, {});
  s.last_used.assign(s.n_slots, 0);
}

size_t reusable_prefix(const std::vector<int32_t>& cached, const std::vector<int32_t>& prompt) {
  if (prompt.empty()) return 0;
  const size_t most = std::min(cached.size(), prompt.size() - 1);
  size_t n = 0;
  while (n < most && cached[n] == prompt[n]) ++n;
  return n;
}

namespace {

size_t busy_count(const Scheduler& s) {
  size_t n = 0;
  for (const auto& j : s.slots) n += j != nullptr;
  return n;
}

// Queued jobs whose client went away leave the queue (under s.m), ended as cancelled.
void drop_cancelled(Scheduler& s) {
  for (auto it = s.queue.begin(); it != s.queue.end();) {
    if (!(*it)->cancelled.load()) {
      ++it;
      continue;
    }
    Event e;
    e.done = true;
    e.stop_reason = "cancelled";
    push_event(**it, std::move(e));
    ++s.left_queue;
    it = s.queue.erase(it);
  }
}

}  // namespace

bool submit(Scheduler& s, std::shared_ptr<Job> job) {
  {
    std::lock_guard lock(s.m);
    drop_cancelled(s);
    // Free slots take jobs at once: only jobs beyond them wait, max_queued at most.
    const size_t free = s.n_slots - busy_count(s);
    if (s.stopping || s.queue.size() >= s.max_queued + free) return false;
    s.queue.push_back(std::move(job));
  }
  s.cv.notify_all();
  return true;
}

std::vector<size_t> fill_slots(Scheduler& s, std::chrono::milliseconds wait) {
  std::unique_lock lock(s.m);
  if (busy_count(s) == 0)
    s.cv.wait_for(lock, wait, [&] { return s.stopping || !s.queue.empty(); });
  drop_cancelled(s);
  while (!s.stopping && !s.queue.empty()) {
    Job& job = *s.queue.front();
    // The free slot with the longest reusable prefix, else the one idle longest, else the lowest.
    std::optional<size_t> best;
    size_t best_reuse = 0;
    for (size_t i = 0; i < s.n_slots; ++i) {
      if (s.slots[i]) continue;
      const size_t reuse = job.req.cache_prompt ? reusable_prefix(s.cached[i], job.prompt) : 0;
      if (!best || reuse > best_reuse || (reuse == best_reuse && s.last_used[i] < s.last_used[*best])) {
        best = i;
        best_reuse = reuse;
      }
    }
    if (!best) break;
    job.n_reused = best_reuse;
    s.last_used[*best] = ++s.n_filled;
    s.slots[*best] = std::move(s.queue.front());
    s.queue.pop_front();
  }
  std::vector<size_t> busy;
  for (size_t i = 0; i < s.n_slots; ++i)
    if (s.slots[i]) busy.push_back(i);
  return busy;
}

bool slots_would_change(Scheduler& s) {
  std::lock_guard lock(s.m);
  return s.stopping || (!s.queue.empty() && busy_count(s) < s.slots.size());
}

void free_slot(Scheduler& s, size_t slot, std::vector<int32_t> kv_tokens) {
  std::lock_guard lock(s.m);
  s.slots.at(slot).reset();
  s.cached.at(slot) = std::move(kv_tokens);
}

void clear_caches(Scheduler& s) {
  std::lock_guard lock(s.m);
  for (size_t i = 0; i < s.n_slots; ++i)
    if (!s.slots[i]) s.cached[i].clear();
}


void stop_scheduler(Scheduler& s) {
  std::deque<std::shared_ptr<Job>> left;
  {
    std::lock_guard lock(s.m);
    s.stopping = true;
    left.swap(s.queue);
  }
  s.cv.notify_all();
  for (auto& j : left) {
    Event e;
    e.done = true;
    e.error = ApiError(503, "server_error", "shutting_down", "the server is shutting down");
    push_event(*j, std::move(e));
  }
}

QueueCounts queue_counts(Scheduler& s) {
  std::lock_guard lock(s.m);
  return {s.queue.size(), busy_count(s), s.left_queue};
}

}  // namespace wgrt::server
