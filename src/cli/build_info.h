// The commit the binary was built from (cmake/build_info.cmake): "1a2b3c4d5e", with "+" when
// the sources had local changes, "unknown" outside a git checkout; build number = commits.
#pragma once

namespace wgrt::cli {

extern const char* const kBuildCommit;
extern const int kBuildNumber;

}  // namespace wgrt::cli
