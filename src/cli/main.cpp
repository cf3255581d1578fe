// wgrt: run large language models on any GPU through WebGPU.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/commands.h"

int main(int argc, char** argv) {
  using namespace wgrt;
  CLI::App app{"wgrt: run large language models on any GPU through WebGPU (Dawn)", "wgrt"};
  app.set_version_flag("--version", std::string("wgrt ") + WGRT_VERSION);
  app.require_subcommand(1);
  gpu::DeviceOptions dev_opts;
  cli::Run run_info = cli::add_info(app, dev_opts);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "wgrt: {}\nhint: run `wgrt --help` (or `wgrt <command> --help`)\n",
               e.what());
    return 2;
  }

  try {
    if (app.got_subcommand("info")) return run_info();
  } catch (const std::exception& e) {
    fmt::print(stderr, "wgrt: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
