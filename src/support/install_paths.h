// Where wgrt finds the files it ships with (Dawn, the demo model): relative to the file that
// holds this code (the wgrt binary, libwgrt.so, a test binary), as an installed tree lays them
// out, never through paths of the machine that built it. A copied or installed wgrt works from
// any directory; the build tree mirrors the same layout (CMakeLists.txt links the files in).
//
//   PREFIX/bin/wgrt, PREFIX/lib/libwgrt.so        the programs and the library
//   PREFIX/lib/wgrt/dawn.node                     Dawn (kDawnFile)
//   PREFIX/share/wgrt/wgrt-demo-q8_0.gguf         the demo model (kDemoModelFile)
//
// PREFIX is the folder of that file or the folder above it (build/ holds build/wgrt and
// build/tests/wgrt_tests; PREFIX/bin and PREFIX/lib hold the installed ones).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace wgrt::support {

// The layout below PREFIX; CMakeLists.txt installs to the same places (WGRT_INSTALL_DAWN,
// WGRT_INSTALL_DEMO_MODEL pass them here).
extern const std::string_view kDawnFile;
extern const std::string_view kDemoModelFile;

// The absolute, symlink-free path of the executable or shared library this code is linked into.
std::string own_file();

// The candidates for `relative` (kDawnFile, ...), in the order they are tried.
std::vector<std::string> shipped_file_candidates(std::string_view relative);

// The first candidate that exists, or "" when none does.
std::string find_shipped_file(std::string_view relative);

}  // namespace wgrt::support
