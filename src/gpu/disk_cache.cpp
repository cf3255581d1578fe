#include "gpu/disk_cache.h"

#include "support/knobs.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <system_error>

namespace wgrt::gpu {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'W', 'G', 'R', 'T', 'B', 'L', 'O', 'B'};
constexpr size_t kHeaderBytes = 32;
// Dawn's keys are a few hundred bytes; a larger one is not Dawn's and is not stored.
constexpr size_t kMaxKeyBytes = 1 << 20;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t key_size;
  uint64_t value_size;
  uint64_t checksum;
};
static_assert(sizeof(Header) == kHeaderBytes);

uint64_t checksum(const void* key, size_t key_size, const void* value, size_t value_size) {
  return fnv1a64(value, value_size, fnv1a64(key, key_size));
}

bool is_entry_name(const std::string& name) {
  return name.size() == 32 && std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The entry's value when the file at `path` checks out for `key`; nullopt-like false otherwise.
// `found` tells a missing file from a refused one.
bool read_entry(const std::string& path, const void* key, size_t key_size, std::vector<uint8_t>& value,
                bool& found) {
  found = false;
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  found = true;
  std::error_code ec;
  const uint64_t file_size = fs::file_size(path, ec);
  if (ec || file_size < kHeaderBytes) return false;
  Header h{};
  if (!in.read(reinterpret_cast<char*>(&h), kHeaderBytes)) return false;
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kDiskCacheVersion) return false;
  if (h.key_size != key_size || file_size != kHeaderBytes + uint64_t(h.key_size) + h.value_size) return false;
  std::vector<uint8_t> stored_key(key_size);
  if (!in.read(reinterpret_cast<char*>(stored_key.data()), std::streamsize(key_size))) return false;
  if (std::memcmp(stored_key.data(), key, key_size) != 0) return false;
  value.resize(h.value_size);
  if (!in.read(reinterpret_cast<char*>(value.data()), std::streamsize(h.value_size))) return false;
  if (checksum(key, key_size, value.data(), value.size()) != h.checksum) return false;
  return h.value_size > 0;
}

// Removes the least recently used entries until the total is at most `target`. Holds c.mu.
void evict(DiskCache& c, uint64_t target) {
  struct Entry {
    fs::path path;
    uint64_t size;
    fs::file_time_type used;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(c.dir, ec)) {
    if (!is_entry_name(e.path().filename().string())) continue;
    std::error_code e1, e2;
    const uint64_t size = e.file_size(e1);
    const auto used = e.last_write_time(e2);
    if (e1 || e2) continue;
    entries.push_back({e.path(), size, used});
    total += size;
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
  for (const Entry& e : entries) {
    if (total <= target) break;
    std::error_code rm;
    if (fs::remove(e.path, rm)) {
      total -= e.size;
      ++c.stats.evicted;
    }
  }
  c.total_bytes = total;
}

}  // namespace

uint64_t fnv1a64(const void* data, size_t size, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

namespace {
const knobs::Text kCacheDir{"WGRT_CACHE_DIR",
                            "the pipeline cache's folder (default $XDG_CACHE_HOME/wgrt or ~/.cache/wgrt; off: none)"};
}  // namespace

std::string resolve_cache_dir(const std::string& option) {
  std::string dir = option;
  if (dir.empty()) dir = kCacheDir.get().value_or("");
  if (dir == "off") return "";
  if (!dir.empty()) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/wgrt";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/wgrt";
  throw std::invalid_argument("no cache directory: HOME and XDG_CACHE_HOME are unset (hint: set WGRT_CACHE_DIR "
                              "to a folder, or WGRT_CACHE_DIR=off)");
}

std::unique_ptr<DiskCache> open_disk_cache(const std::string& dir, uint64_t max_bytes) {
  auto c = std::make_unique<DiskCache>();
  c->dir = dir + "/pipelines";
  c->max_bytes = max_bytes;
  std::error_code ec;
  fs::create_directories(c->dir, ec);
  if (ec || !fs::is_directory(c->dir)) {
    std::fprintf(stderr, "wgrt: warning: no pipeline cache: cannot make %s (%s) (hint: WGRT_CACHE_DIR=DIR names "
                         "another folder, WGRT_CACHE_DIR=off turns the cache off)\n",
                 c->dir.c_str(), ec ? ec.message().c_str() : "not a folder");
    return nullptr;
  }
  std::lock_guard lock(c->mu);
  evict(*c, max_bytes);  // counts what is there, and trims a folder left over the bound
  return c;
}

std::string disk_cache_entry_path(const DiskCache& c, const void* key, size_t key_size) {
  return fmt::format("{}/{:016x}{:016x}", c.dir, fnv1a64(key, key_size),
                     fnv1a64(key, key_size, 0x84222325cbf29ce4ull));
}

size_t disk_cache_load(void const* key, size_t key_size, void* value, size_t value_size, void* userdata) {
  auto& c = *static_cast<DiskCache*>(userdata);
  std::lock_guard lock(c.mu);
  const std::string_view k(static_cast<const char*>(key), key_size);
  if (c.held_key != k) {
    c.held_key.clear();
    c.held_value.clear();
    const std::string path = disk_cache_entry_path(c, key, key_size);
    bool found = false;
    std::vector<uint8_t> v;
    if (!read_entry(path, key, key_size, v, found)) {
      if (found) {
        ++c.stats.rejected;
        std::error_code ec;
        fs::remove(path, ec);
      } else {
        ++c.stats.load_misses;
      }
      return 0;
    }
    std::error_code ec;
    fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // recently used: evicted last
    c.held_key.assign(k);
    c.held_value = std::move(v);
  }
  const size_t size = c.held_value.size();
  if (value == nullptr) return size;  // the size question; the bytes follow
  if (value_size != size) return 0;
  std::memcpy(value, c.held_value.data(), size);
  ++c.stats.load_hits;
  c.held_key.clear();
  c.held_value.clear();
  return size;
}

void disk_cache_store(void const* key, size_t key_size, void const* value, size_t value_size, void* userdata) {
  auto& c = *static_cast<DiskCache*>(userdata);
  if (key_size == 0 || key_size > kMaxKeyBytes || value_size == 0) return;
  const uint64_t bytes = kHeaderBytes + key_size + value_size;
  std::lock_guard lock(c.mu);
  if (bytes > c.max_bytes / 4) return;  // one entry never takes most of the cache
  const std::string path = disk_cache_entry_path(c, key, key_size);
  static std::atomic<uint64_t> serial{0};
  const std::string tmp = fmt::format("{}/tmp-{}-{}", c.dir, getpid(), serial++);
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kDiskCacheVersion;
  h.key_size = uint32_t(key_size);
  h.value_size = value_size;
  h.checksum = checksum(key, key_size, value, value_size);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&h), kHeaderBytes);
    out.write(static_cast<const char*>(key), std::streamsize(key_size));
    out.write(static_cast<const char*>(value), std::streamsize(value_size));
    if (!out.flush()) {
      out.close();
      std::error_code ec;
      fs::remove(tmp, ec);
      return;  // a full disk costs the cache, not the run
    }
  }
  std::error_code ec;
  uint64_t replaced = 0;
  if (const uint64_t old = fs::file_size(path, ec); !ec) replaced = old;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return;
  }
  ++c.stats.stores;
  c.total_bytes = c.total_bytes + bytes - std::min(replaced, c.total_bytes);
  if (c.held_key == std::string_view(static_cast<const char*>(key), key_size)) c.held_key.clear();
  if (c.total_bytes > c.max_bytes) evict(c, c.max_bytes / 4 * 3);
}

}  // namespace wgrt::gpu
