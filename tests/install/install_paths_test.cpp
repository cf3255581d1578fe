// Where wgrt finds the files it ships with (support/install_paths.h): beside the binary that
// holds the code, never through build paths. tools/test-install.sh checks the installed and
// moved tree and the errors of a half copy; this checks the rules and the build tree's mirror.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "llm/session.h"
#include "support/install_paths.h"

namespace fs = std::filesystem;
using namespace wgrt;

TEST(InstallPaths, OwnFileIsThisProgram) {
  EXPECT_TRUE(fs::path(support::own_file()).is_absolute());
  EXPECT_TRUE(fs::equivalent(support::own_file(), "/proc/self/exe"));
}

TEST(InstallPaths, CandidatesAreBesideAndOneFolderUp) {
  const fs::path dir = fs::path(support::own_file()).parent_path();
  const std::vector<std::string> want = {(dir / "share/x.bin").string(), (dir.parent_path() / "share/x.bin").string()};
  EXPECT_EQ(support::shipped_file_candidates("share/x.bin"), want);
  EXPECT_EQ(support::find_shipped_file("share/wgrt/no-such-file.gguf"), "");
  EXPECT_EQ(support::find_shipped_file("share/wgrt"), "") << "a folder is not a file";
}

// build/tests/wgrt_tests finds them one folder up, in build/, as PREFIX/bin/wgrt does in PREFIX.
TEST(InstallPaths, TheBuildTreeMirrorsTheInstalledLayout) {
  EXPECT_EQ(support::kDemoModelFile, "share/wgrt/wgrt-demo-q8_0.gguf");
  const std::string demo = support::find_shipped_file(support::kDemoModelFile);
  ASSERT_NE(demo, "");
  EXPECT_TRUE(fs::equivalent(demo, WGRT_SOURCE_DIR "/models/wgrt-demo-q8_0.gguf"));
  EXPECT_EQ(llm::demo_model_path(), demo);
#if !defined(WGRT_SYSTEM_WEBGPU_H)
  EXPECT_EQ(support::kDawnFile, "lib/wgrt/dawn.node");
  EXPECT_NE(support::find_shipped_file(support::kDawnFile), "");
#endif
}
