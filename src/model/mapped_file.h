// A read-only memory mapping of a whole file, shared by the readers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace wgrt::model {

struct Mapping {
  void* addr = nullptr;
  size_t size = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();
  const uint8_t* bytes() const;
};

// Throws std::runtime_error naming the path and the system's reason.
std::shared_ptr<Mapping> map_file(const std::string& path);

}  // namespace wgrt::model
