#include "model/mapped_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace wgrt::model {

Mapping::~Mapping() {
  if (addr && size) munmap(addr, size);
}

const uint8_t* Mapping::bytes() const {
  static const uint8_t empty = 0;
  return addr ? static_cast<const uint8_t*>(addr) : &empty;
}

std::shared_ptr<Mapping> map_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    throw std::runtime_error(fmt::format("{}: cannot open: {} (hint: check the path)", path, std::strerror(errno)));
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error(fmt::format("{}: not a regular file", path));
  }
  auto m = std::make_shared<Mapping>();
  m->size = size_t(st.st_size);
  if (m->size > 0) {
    void* a = mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (a == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw std::runtime_error(fmt::format("{}: mmap failed: {}", path, std::strerror(err)));
    }
    m->addr = a;
  }
  ::close(fd);
  return m;
}

}  // namespace wgrt::model
