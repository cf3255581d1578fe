#include "gpu/dawn_loader.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

#include "gpu/device.h"
#include "gpu/webgpu.h"
#include "support/install_paths.h"
#include "support/knobs.h"

#if !defined(WGRT_SYSTEM_WEBGPU_H)
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace wgrt::gpu {

#if defined(WGRT_SYSTEM_WEBGPU_H)

void load_dawn() {}
std::string dawn_library_path() { return "(linked at build time)"; }

#else

// ---- Node-API symbols dawn.node binds at load --------------------------------------------
// Its code takes the address of these two (R_X86_64_GLOB_DAT relocations), so the dynamic
// linker must find them even though nothing here calls into the module's Node-side code; every
// other Node-API function it imports is bound lazily, on a first call that never comes. The
// executables export them (CMakeLists.txt: --export-dynamic-symbol=napi_*). Should a future
// build bind another at load, dlopen names it and load_dawn's error says where to add it.
[[noreturn]] static void node_api_called(const char* name) {
  std::fprintf(stderr, "wgrt: Dawn called the Node-API function %s, which wgrt does not provide "
                       "(wgrt uses Dawn's native API only)\n", name);
  std::abort();
}

extern "C" {
#define WGRT_NODE_API_STUB(name) \
  __attribute__((visibility("default"), used)) void name() { node_api_called(#name); }
WGRT_NODE_API_STUB(napi_create_error)
WGRT_NODE_API_STUB(napi_create_type_error)
#undef WGRT_NODE_API_STUB
}

namespace {

// Dawn's own lookup of its native entry points, a local symbol of the file (not exported).
constexpr std::string_view kGetProcAddress = "_ZN4dawn6native20NativeGetProcAddressE14WGPUStringView";
using Proc = void (*)();
using GetProcAddress = Proc (*)(WGPUStringView);

// The entry points, filled by load_dawn().
struct Procs {
#define WGRT_DAWN_SLOT(ret, name, params, args) ret(*name) params = nullptr;
  WGRT_DAWN_FUNCTIONS(WGRT_DAWN_SLOT)
#undef WGRT_DAWN_SLOT
};
Procs procs;

// The value of the function symbol `name` in the ELF file's own symbol table (.symtab), which
// dlsym does not read; 0 if absent. Every read is bounded by the file's size.
uint64_t symtab_function(const std::string& path, std::string_view name) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat st{};
  void* map = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && st.st_size > 0)
    map = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return 0;
  const auto* base = static_cast<const unsigned char*>(map);
  const uint64_t size = uint64_t(st.st_size);
  auto fits = [&](uint64_t off, uint64_t len) { return off <= size && len <= size - off; };

  uint64_t found = 0;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
  if (fits(0, sizeof(Elf64_Ehdr)) && std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 &&
      eh->e_ident[EI_CLASS] == ELFCLASS64 && eh->e_shentsize == sizeof(Elf64_Shdr) &&
      fits(eh->e_shoff, uint64_t(eh->e_shnum) * sizeof(Elf64_Shdr))) {
    const auto* sh = reinterpret_cast<const Elf64_Shdr*>(base + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum && !found; ++i) {
      if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
      const Elf64_Shdr& strs = sh[sh[i].sh_link];
      if (!fits(sh[i].sh_offset, sh[i].sh_size) || !fits(strs.sh_offset, strs.sh_size)) continue;
      const auto* syms = reinterpret_cast<const Elf64_Sym*>(base + sh[i].sh_offset);
      const char* names = reinterpret_cast<const char*>(base + strs.sh_offset);
      for (uint64_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); ++k) {
        const Elf64_Sym& s = syms[k];
        if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_value == 0) continue;
        if (s.st_name >= strs.sh_size || strs.sh_size - s.st_name <= name.size()) continue;
        if (std::memcmp(names + s.st_name, name.data(), name.size()) == 0 &&
            names[s.st_name + name.size()] == '\0') {
          found = s.st_value;
          break;
        }
      }
    }
  }
  ::munmap(map, size_t(st.st_size));
  return found;
}

void load(const std::string& path) {
  const std::string hint = "(hint: run tools/setup.sh, or point WGRT_DAWN_LIB at the dawn.node "
                           "of npm webgpu@0.4.0)";
  if (::access(path.c_str(), R_OK) != 0)
    throw GpuError(fmt::format("Dawn's library {} cannot be read: {} {}", path,
                               std::strerror(errno), hint));
  // dawn.node binds the Node-API stubs above at load. Where this code is libwgrt.so opened with
  // RTLD_LOCAL (Python's ctypes), the dynamic linker would not look there: make the library's
  // exports (libwgrt.map) global first. It stays loaded, as Dawn does.
  if (const std::string self = support::own_file(); !self.empty())
    ::dlopen(self.c_str(), RTLD_LAZY | RTLD_NOLOAD | RTLD_GLOBAL);
  void* handle = ::dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (!handle) {
    std::string why = ::dlerror();
    if (why.find("undefined symbol: napi_") != std::string::npos)
      throw GpuError(fmt::format(
          "cannot load Dawn from {}: {} (hint: this Dawn build binds that Node-API symbol at "
          "load; add it to the stubs in src/gpu/dawn_loader.cpp)", path, why));
    throw GpuError(fmt::format("cannot load Dawn from {}: {} {}", path, why, hint));
  }
  // Never closed: Dawn keeps threads and static state for the life of the process.
  const uint64_t offset = symtab_function(path, kGetProcAddress);
  link_map* lm = nullptr;
  if (offset == 0 || ::dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm)
    throw GpuError(fmt::format(
        "Dawn's library {} has no symbol {} (dawn::native::NativeGetProcAddress) in its symbol "
        "table (hint: the file is stripped or from another Dawn; use the package tools/setup.sh "
        "pins)", path, kGetProcAddress));
  auto get_proc = reinterpret_cast<GetProcAddress>(lm->l_addr + offset);

  Procs got;
  std::string missing;
#define WGRT_DAWN_RESOLVE(ret, name, params, args)                                      \
  got.name = reinterpret_cast<decltype(got.name)>(get_proc(WGPUStringView{#name, std::strlen(#name)})); \
  if (!got.name) missing += (missing.empty() ? "" : ", ") + std::string(#name);
  WGRT_DAWN_FUNCTIONS(WGRT_DAWN_RESOLVE)
#undef WGRT_DAWN_RESOLVE
  if (!missing.empty())
    throw GpuError(fmt::format("Dawn in {} lacks the entry points {} (hint: wgrt's "
                               "src/gpu/dawn_abi.h is written for Dawn c5d549e250, npm "
                               "webgpu@0.4.0)", path, missing));
  procs = got;
}

}  // namespace

const knobs::Text kDawnLib{"WGRT_DAWN_LIB", "the Dawn library to load (a dawn.node or libwebgpu_dawn.so)"};

std::string dawn_library_path() {
  if (auto path = kDawnLib.get()) return *path;
  if (std::string found = support::find_shipped_file(support::kDawnFile); !found.empty()) return found;
  std::string tried;
  for (const std::string& c : support::shipped_file_candidates(support::kDawnFile))
    tried += (tried.empty() ? "" : ", ") + c;
  throw GpuError(fmt::format("Dawn's library not found beside {} (tried {}) (hint: install wgrt with "
                             "`cmake --install`, keeping its lib/wgrt/dawn.node, or point WGRT_DAWN_LIB at "
                             "the dawn.node of npm webgpu@0.4.0; tools/setup.sh fetches it)",
                             support::own_file(), tried.empty() ? "nothing" : tried));
}

void load_dawn() {
  static std::once_flag once;
  std::call_once(once, [] { load(dawn_library_path()); });  // a throw leaves it to retry
}

#endif  // WGRT_SYSTEM_WEBGPU_H

}  // namespace wgrt::gpu

#if !defined(WGRT_SYSTEM_WEBGPU_H)
// The C entry points dawn_abi.h declares, each a call through the table load() filled.
extern "C" {
#define WGRT_DAWN_FORWARD(ret, name, params, args) \
  ret name params { return wgrt::gpu::procs.name args; }
WGRT_DAWN_FUNCTIONS(WGRT_DAWN_FORWARD)
#undef WGRT_DAWN_FORWARD
}
#endif
