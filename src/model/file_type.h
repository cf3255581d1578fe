// The GGUF key `general.file_type` ("mostly Q4_0", "Q4_K - Medium", ...): the numbering the
// GGUF ecosystem writes, the names its tools print for each value, and the value a file
// without the key is taken to have (from its most common tensor type), so `wgrt bench`
// rows name a model as peer tools do ("llama 1B Q4_K - Medium").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/ggml_types.h"

namespace wgrt::model {

// Set on a file type that was guessed, not read from the file.
inline constexpr uint32_t kFileTypeGuessed = 1024;

// "Q4_0", "Q4_K - Medium", "all F32"; "(guessed) " before a guessed one; "unknown, may not
// work" for values without a name.
std::string file_type_name(uint32_t file_type);

// The file type a file whose tensors are mostly `type` has (K-quants: their "Medium" mix),
// without kFileTypeGuessed; nullopt for a type that names no file type.
std::optional<uint32_t> file_type_of(GgmlType type);

}  // namespace wgrt::model
