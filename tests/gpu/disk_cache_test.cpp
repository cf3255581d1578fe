// The pipeline cache on disk (gpu/disk_cache.h): Dawn's entries written by one device are
// loaded by the next (hits counted through the load callback), a corrupt or truncated entry is
// a miss and is removed, the folder stays under its bound, and "off" turns it off.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gpu/disk_cache.h"
#include "gpu/pipeline.h"
#include "support/hf_fixture.h"

namespace wgrt::gpu {
namespace {

namespace fs = std::filesystem;

// A kernel no other test compiles, so its entries are this test's.
constexpr const char* kKernel = R"(
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1) fn main() { out[0] = 0x5eedcafeu; }
)";

std::vector<fs::path> entries(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir + "/pipelines"))
    if (e.path().filename().string().size() == 32) out.push_back(e.path());
  return out;
}

Device device_with_cache(const std::string& dir) {
  DeviceOptions o;
  o.cache_dir = dir;
  return create_device(o);
}

TEST(GpuDiskCache, SecondDeviceLoadsWhatTheFirstStored) {
  const std::string dir = test::temp_dir("diskcache-roundtrip");
  {
    Device dev = device_with_cache(dir);
    ASSERT_NE(dev.disk_cache, nullptr);
    create_pipeline(dev, "disk-cache-test", kKernel);
    wait_idle(dev);
    EXPECT_EQ(dev.disk_cache->stats.load_hits, 0);
    EXPECT_GT(dev.disk_cache->stats.load_misses, 0);
  }
  ASSERT_FALSE(entries(dir).empty()) << "the first device stored nothing in " << dir;

  Device dev = device_with_cache(dir);
  create_pipeline(dev, "disk-cache-test", kKernel);
  wait_idle(dev);
  EXPECT_GT(dev.disk_cache->stats.load_hits, 0);
  EXPECT_EQ(dev.disk_cache->stats.rejected, 0);
}

TEST(GpuDiskCache, CorruptAndTruncatedEntriesAreMissesAndRemoved) {
  const std::string dir = test::temp_dir("diskcache-corrupt");
  {
    Device dev = device_with_cache(dir);
    create_pipeline(dev, "disk-cache-test", kKernel);
    wait_idle(dev);
  }
  std::vector<fs::path> files = entries(dir);
  ASSERT_FALSE(files.empty());
  for (size_t i = 0; i < files.size(); ++i) {
    const auto size = fs::file_size(files[i]);
    if (i % 2 == 0) {
      fs::resize_file(files[i], size / 2);  // truncated
    } else {
      std::fstream f(files[i], std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(std::streamoff(size - 1));
      char c = 0;
      f.read(&c, 1);
      f.seekp(std::streamoff(size - 1));
      c = char(c ^ 0x5a);
      f.write(&c, 1);  // one byte of the value flipped: the checksum catches it
    }
  }
  Device dev = device_with_cache(dir);
  Pipeline p = create_pipeline(dev, "disk-cache-test", kKernel);  // still compiles
  wait_idle(dev);
  EXPECT_NE(p.pipeline.get(), nullptr);
  EXPECT_EQ(dev.disk_cache->stats.load_hits, 0);
  EXPECT_GT(dev.disk_cache->stats.rejected, 0);
}

TEST(GpuDiskCache, EntriesCheckSizeKeyAndChecksum) {
  const std::string dir = test::temp_dir("diskcache-unit");
  auto c = open_disk_cache(dir);
  ASSERT_NE(c, nullptr);
  const std::string key = "key-one", other = "key-two", value = "a compiled shader";
  disk_cache_store(key.data(), key.size(), value.data(), value.size(), c.get());
  EXPECT_EQ(c->stats.stores, 1);

  ASSERT_EQ(disk_cache_load(key.data(), key.size(), nullptr, 0, c.get()), value.size());
  std::string got(value.size(), '\0');
  ASSERT_EQ(disk_cache_load(key.data(), key.size(), got.data(), got.size(), c.get()), value.size());
  EXPECT_EQ(got, value);
  EXPECT_EQ(c->stats.load_hits, 1);

  EXPECT_EQ(disk_cache_load(other.data(), other.size(), nullptr, 0, c.get()), 0u);
  EXPECT_EQ(c->stats.load_misses, 1);

  // Another key's file under this key's name: refused (the key is compared), and removed.
  const std::string path = disk_cache_entry_path(*c, other.data(), other.size());
  fs::copy_file(disk_cache_entry_path(*c, key.data(), key.size()), path);
  EXPECT_EQ(disk_cache_load(other.data(), other.size(), nullptr, 0, c.get()), 0u);
  EXPECT_EQ(c->stats.rejected, 1);
  EXPECT_FALSE(fs::exists(path));

  // A file shorter than its header says, and one of zero bytes.
  const std::string mine = disk_cache_entry_path(*c, key.data(), key.size());
  fs::resize_file(mine, fs::file_size(mine) - 1);
  EXPECT_EQ(disk_cache_load(key.data(), key.size(), nullptr, 0, c.get()), 0u);
  std::ofstream(mine, std::ios::trunc).close();
  EXPECT_EQ(disk_cache_load(key.data(), key.size(), nullptr, 0, c.get()), 0u);
  EXPECT_EQ(c->stats.rejected, 3);
}

TEST(GpuDiskCache, StaysUnderItsBound) {
  const std::string dir = test::temp_dir("diskcache-bound");
  auto c = open_disk_cache(dir, /*max_bytes=*/16 * 1024);
  ASSERT_NE(c, nullptr);
  const std::string value(1000, 'v');
  for (int i = 0; i < 40; ++i) {
    const std::string key = "key-" + std::to_string(i);
    disk_cache_store(key.data(), key.size(), value.data(), value.size(), c.get());
  }
  uint64_t total = 0;
  for (const auto& p : entries(dir)) total += fs::file_size(p);
  EXPECT_LE(total, 16u * 1024);
  EXPECT_GT(c->stats.evicted, 0);
  const std::string last = "key-39";  // the newest survives
  EXPECT_EQ(disk_cache_load(last.data(), last.size(), nullptr, 0, c.get()), value.size());
  // One entry larger than a quarter of the bound is not stored.
  const std::string big(8 * 1024, 'b'), big_key = "big";
  disk_cache_store(big_key.data(), big_key.size(), big.data(), big.size(), c.get());
  EXPECT_EQ(disk_cache_load(big_key.data(), big_key.size(), nullptr, 0, c.get()), 0u);
}

TEST(GpuDiskCache, DirectoryChoiceAndOff) {
  const char* saved_env = std::getenv("WGRT_CACHE_DIR");
  const std::string saved = saved_env ? saved_env : "";
  const char* saved_xdg_env = std::getenv("XDG_CACHE_HOME");
  const std::string saved_xdg = saved_xdg_env ? saved_xdg_env : "";

  setenv("WGRT_CACHE_DIR", "off", 1);
  EXPECT_EQ(resolve_cache_dir(""), "");
  {
    Device dev = create_device({});
    EXPECT_EQ(dev.disk_cache, nullptr);
  }
  EXPECT_EQ(resolve_cache_dir("/some/dir"), "/some/dir");  // the option wins over the environment
  EXPECT_EQ(resolve_cache_dir("off"), "");
  setenv("WGRT_CACHE_DIR", "/env/dir", 1);
  EXPECT_EQ(resolve_cache_dir(""), "/env/dir");
  unsetenv("WGRT_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(resolve_cache_dir(""), "/xdg/wgrt");
  unsetenv("XDG_CACHE_HOME");
  if (const char* home = std::getenv("HOME")) {
    EXPECT_EQ(resolve_cache_dir(""), std::string(home) + "/.cache/wgrt");
  }

  if (saved_env) setenv("WGRT_CACHE_DIR", saved.c_str(), 1);
  if (saved_xdg_env) setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
}

TEST(GpuDiskCache, IsolationKeyFollowsTheAdapter) {
  AdapterDesc a;
  a.name = "GPU";
  a.vendor_id = 0x10de;
  a.device_id = 0x2330;
  a.driver = "driver 1";
  AdapterDesc b = a;
  b.driver = "driver 2";
  AdapterDesc c = a;
  c.device_id = 0x2331;
  EXPECT_EQ(cache_isolation_key(a), cache_isolation_key(a));
  EXPECT_NE(cache_isolation_key(a), cache_isolation_key(b));
  EXPECT_NE(cache_isolation_key(a), cache_isolation_key(c));
}

}  // namespace
}  // namespace wgrt::gpu
