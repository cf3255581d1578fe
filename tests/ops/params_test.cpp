// Every op's C++ uniform block agrees with its WGSL `struct Params`: same field names in the
// same order at the same offsets, same size.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "gpu/pipeline.h"
#include "ops/common.h"

namespace wgrt::ops {
namespace {

struct WgslField {
  std::string name;
  uint32_t offset;
};

// Size and alignment of the WGSL scalar and vector types uniform blocks use.
std::pair<uint32_t, uint32_t> size_align(const std::string& type) {
  if (type == "u32" || type == "i32" || type == "f32") return {4, 4};
  if (type.starts_with("vec2")) return {8, 8};
  if (type.starts_with("vec3")) return {12, 16};
  if (type.starts_with("vec4")) return {16, 16};
  ADD_FAILURE() << "uniform field type not handled by this test: " << type;
  return {4, 4};
}

std::pair<std::vector<WgslField>, uint32_t> parse_params(std::string_view source) {
  std::string src(source);
  std::smatch m;
  EXPECT_TRUE(std::regex_search(src, m, std::regex(R"(struct\s+Params\s*\{([^}]*)\})")))
      << "no `struct Params` in the kernel";
  // Comments may hold anything (colons included): drop them before reading `name: type`.
  const std::string body = std::regex_replace(std::string(m[1]), std::regex(R"(//[^\n]*)"), "");
  std::vector<WgslField> fields;
  uint32_t offset = 0, align_max = 16;
  std::regex field_re(R"((\w+)\s*:\s*([\w<>]+)\s*,?)");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), field_re); it != std::sregex_iterator(); ++it) {
    auto [size, align] = size_align((*it)[2]);
    offset = (offset + align - 1) / align * align;
    fields.push_back({(*it)[1], offset});
    offset += size;
    align_max = std::max(align_max, align);
  }
  return {fields, (offset + align_max - 1) / align_max * align_max};
}

TEST(OpParams, CppAndWgslAgree) {
  ASSERT_FALSE(param_layouts().empty());
  for (const ParamLayout& layout : param_layouts()) {
    SCOPED_TRACE(layout.kernel);
    auto [fields, size] = parse_params(gpu::kernel_source(layout.kernel));
    ASSERT_EQ(fields.size(), layout.fields.size());
    for (size_t i = 0; i < fields.size(); ++i) {
      EXPECT_EQ(fields[i].name, layout.fields[i].name) << "field " << i;
      EXPECT_EQ(fields[i].offset, layout.fields[i].offset) << fields[i].name;
    }
    EXPECT_EQ(size, layout.size);
  }
}

}  // namespace
}  // namespace wgrt::ops
