// Runs the wgrt binary from a bash script, as a user's shell would: `$WGRT` is the binary
// (WGRT_BINARY); the exit code, stdout and stderr come back apart. For the CLI suites.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "support/hf_fixture.h"

namespace wgrt::test {

struct ScriptResult {
  int code = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// `script` in a fresh folder of temp_dir(tag); with no_stdin its stdin is /dev/null (a script
// that reads stdin gives it its own redirection).
inline ScriptResult run_script(const std::string& tag, const std::string& script, bool no_stdin = false) {
  const std::string dir = temp_dir(tag);
  std::ofstream(dir + "/s.sh") << "WGRT=" << WGRT_BINARY << "\n" << script << "\n";
  const std::string cmd = "bash " + dir + "/s.sh >" + dir + "/out 2>" + dir + "/err" + (no_stdin ? " </dev/null" : "");
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir + "/out"), slurp(dir + "/err")};
}

}  // namespace wgrt::test
