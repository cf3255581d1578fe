#include "support/install_paths.h"

#include <dlfcn.h>
#include <link.h>

#include <filesystem>
#include <system_error>

namespace wgrt::support {

const std::string_view kDawnFile = WGRT_INSTALL_DAWN;
const std::string_view kDemoModelFile = WGRT_INSTALL_DEMO_MODEL;

std::string own_file() {
  namespace fs = std::filesystem;
  std::error_code ec;
  Dl_info info{};
  link_map* map = nullptr;
  // The main program's link map has an empty name (dladdr would give argv[0], which may be
  // relative or a name found on PATH): the kernel knows its real path.
  if (::dladdr1(reinterpret_cast<void*>(&own_file), &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) &&
      map && map->l_name && map->l_name[0] != '\0') {
    fs::path p = fs::weakly_canonical(fs::absolute(map->l_name, ec), ec);
    if (!ec) return p.string();
  }
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.string();
}

std::vector<std::string> shipped_file_candidates(std::string_view relative) {
  std::vector<std::string> out;
  const std::string self = own_file();
  if (self.empty()) return out;
  const std::filesystem::path dir = std::filesystem::path(self).parent_path();
  out.push_back((dir / relative).string());
  if (dir.has_parent_path() && dir.parent_path() != dir) out.push_back((dir.parent_path() / relative).string());
  return out;
}

std::string find_shipped_file(std::string_view relative) {
  for (const std::string& c : shipped_file_candidates(relative)) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(c, ec)) return c;
  }
  return "";
}

}  // namespace wgrt::support
