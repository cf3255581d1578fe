#include "model/file_type.h"

#include <utility>

namespace wgrt::model {
namespace {

// The values and printed names of `general.file_type` (values 4-6 and 33-35 are retired).
constexpr std::pair<uint32_t, const char*> kNames[] = {
    {0, "all F32"},
    {1, "F16"},
    {2, "Q4_0"},
    {3, "Q4_1"},
    {7, "Q8_0"},
    {8, "Q5_0"},
    {9, "Q5_1"},
    {10, "Q2_K - Medium"},
    {11, "Q3_K - Small"},
    {12, "Q3_K - Medium"},
    {13, "Q3_K - Large"},
    {14, "Q4_K - Small"},
    {15, "Q4_K - Medium"},
    {16, "Q5_K - Small"},
    {17, "Q5_K - Medium"},
    {18, "Q6_K"},
    {19, "IQ2_XXS - 2.0625 bpw"},
    {20, "IQ2_XS - 2.3125 bpw"},
    {21, "Q2_K - Small"},
    {22, "IQ3_XS - 3.3 bpw"},
    {23, "IQ3_XXS - 3.0625 bpw"},
    {24, "IQ1_S - 1.5625 bpw"},
    {25, "IQ4_NL - 4.5 bpw"},
    {26, "IQ3_S - 3.4375 bpw"},
    {27, "IQ3_S mix - 3.66 bpw"},
    {28, "IQ2_S - 2.5 bpw"},
    {29, "IQ2_M - 2.7 bpw"},
    {30, "IQ4_XS - 4.25 bpw"},
    {31, "IQ1_M - 1.75 bpw"},
    {32, "BF16"},
    {36, "TQ1_0 - 1.69 bpw ternary"},
    {37, "TQ2_0 - 2.06 bpw ternary"},
    {38, "MXFP4 MoE"},
    {39, "NVFP4"},
    {40, "Q1_0"},
    {41, "Q2_0"},
};

}  // namespace

std::string file_type_name(uint32_t file_type) {
  const uint32_t value = file_type & ~kFileTypeGuessed;
  std::string name = "unknown, may not work";
  for (auto [v, n] : kNames)
    if (v == value) name = n;
  return (file_type & kFileTypeGuessed ? "(guessed) " : "") + name;
}

std::optional<uint32_t> file_type_of(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 1;
    case GgmlType::BF16: return 32;
    case GgmlType::Q4_0: return 2;
    case GgmlType::Q4_1: return 3;
    case GgmlType::Q5_0: return 8;
    case GgmlType::Q5_1: return 9;
    case GgmlType::Q8_0: return 7;
    case GgmlType::Q2_K: return 10;
    case GgmlType::Q3_K: return 12;
    case GgmlType::Q4_K: return 15;
    case GgmlType::Q5_K: return 17;
    case GgmlType::Q6_K: return 18;
    case GgmlType::IQ4_NL: return 25;
    case GgmlType::IQ4_XS: return 30;
    default: return std::nullopt;
  }
}

}  // namespace wgrt::model
