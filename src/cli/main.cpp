// wgrt: run large language models on any GPU through WebGPU.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/flags.h"

int main(int argc, char** argv) {
  using namespace wgrt;
  CLI::App app{"wgrt: run large language models on any GPU through WebGPU (Dawn)", "wgrt"};
  app.set_version_flag("--version", std::string("wgrt ") + WGRT_VERSION);
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();  // --help shows each flag's default
  cli::rewrite_llamacpp_aliases(argc, argv);
  gpu::DeviceOptions dev_opts;
  const std::vector<std::pair<const char*, cli::Run>> commands = {
      {"run", cli::add_run(app, dev_opts)},
      {"tokenize", cli::add_tokenize(app)},
      {"perplexity", cli::add_perplexity(app, dev_opts)},
      {"bench", cli::add_bench(app, dev_opts)},
      {"info", cli::add_info(app, dev_opts)},
      {"template", cli::add_template(app)},
      {"chat", cli::add_chat(app, dev_opts)},
      {"serve", cli::add_serve(app, dev_opts)},
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "wgrt: {}\nhint: run `wgrt --help` (or `wgrt <command> --help`)\n", e.what());
    return 2;
  }

  try {
    for (const auto& [name, run] : commands)
      if (app.got_subcommand(name)) return run();
  } catch (const std::exception& e) {
    fmt::print(stderr, "wgrt: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
