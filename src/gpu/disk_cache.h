// Dawn's blob cache kept on disk: the shaders Dawn translates and the driver's pipeline cache
// outlive the process, so a second start skips most of the kernel compilation that a CPU
// driver spends seconds on.
//
// Where: DeviceOptions::cache_dir, else env WGRT_CACHE_DIR, else $XDG_CACHE_HOME/wgrt, else
// ~/.cache/wgrt; the value "off" turns the cache off. Entries live in DIR/pipelines/.
//
// One file per Dawn key, named by two 64-bit hashes of the key (32 hex digits):
//   offset 0      char[8]  magic "WGRTBLOB"
//          8      u32      format version (kDiskCacheVersion)
//          12     u32      key bytes K
//          16     u64      value bytes V
//          24     u64      checksum: FNV-1a 64 over the key, then the value
//          32     K bytes  the key (compared on load: another key's file is a miss)
//          32+K   V bytes  the value
// Little-endian, as written by this machine. A store writes a temporary file and renames it
// over the entry, so a reader sees a whole old file or a whole new one. A file that does not
// check out (size, magic, version, key or checksum) is a miss and is removed. The directory is
// bounded (max_bytes): a store past the bound removes the least recently used entries.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace wgrt::gpu {

inline constexpr uint32_t kDiskCacheVersion = 1;
inline constexpr uint64_t kDiskCacheMaxBytes = uint64_t(512) << 20;

struct DiskCacheStats {
  int64_t load_hits = 0;    // entries handed to Dawn
  int64_t load_misses = 0;  // keys with no entry
  int64_t rejected = 0;     // entries found but refused (corrupt, truncated, another key)
  int64_t stores = 0;       // entries written
  int64_t evicted = 0;      // entries removed to stay under max_bytes
};

struct DiskCache {
  std::string dir;  // .../pipelines
  uint64_t max_bytes = kDiskCacheMaxBytes;
  std::mutex mu;    // Dawn may call from its own threads
  uint64_t total_bytes = 0;  // of the entries, as last counted plus what was stored since
  DiskCacheStats stats;
  // Dawn asks for each key twice (its size, then its bytes): the entry read the first time.
  std::string held_key;
  std::vector<uint8_t> held_value;
};

// The cache directory the option (or, when "", the environment) names; "" when turned off.
// Throws std::invalid_argument when no directory can be found (no HOME) and none was named.
std::string resolve_cache_dir(const std::string& option);

// Opens (creating) `dir`/pipelines. Returns null, after a warning on stderr, when the folder
// cannot be made: the cache is an optimisation, never a reason to fail.
std::unique_ptr<DiskCache> open_disk_cache(const std::string& dir, uint64_t max_bytes = kDiskCacheMaxBytes);

// Dawn's load and store functions (WGPUDawnLoadCacheDataFunction and
// WGPUDawnStoreCacheDataFunction), userdata a DiskCache*.
size_t disk_cache_load(void const* key, size_t key_size, void* value, size_t value_size, void* userdata);
void disk_cache_store(void const* key, size_t key_size, void const* value, size_t value_size, void* userdata);

// The file a key's entry lives in.
std::string disk_cache_entry_path(const DiskCache& c, const void* key, size_t key_size);

uint64_t fnv1a64(const void* data, size_t size, uint64_t h = 0xcbf29ce484222325ull);

}  // namespace wgrt::gpu
