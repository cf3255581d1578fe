// Loads a model (argv[1], else wgrt's demo model) through the C++ layer (wgrt.hpp), counts the
// prompt's tokens, and streams a greedy continuation through a lambda that stops it after 12
// tokens. Errors arrive as wgrt::api::Error, carrying the C API's status.
#include <wgrt/wgrt.hpp>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  try {
    wgrt::api::Model model(argc > 1 ? argv[1] : "");
    const std::string prompt = "In the beginning";
    std::printf("wgrt %s: \"%s\" is %zu tokens\n", wgrt_version(), prompt.c_str(), model.tokenize(prompt).size());

    wgrt_sampling_params sp = wgrt_sampling_default_params();
    sp.temperature = 0;  // greedy
    int n = 0;
    std::string reply;
    model.generate(prompt, sp, [&](std::string_view text, int32_t) {
      reply += text;
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      return ++n < 12;  // false stops the generation
    });
    std::printf("\n%d tokens, %zu bytes\n", n, reply.size());
    return n == 12 ? 0 : 1;
  } catch (const wgrt::api::Error& e) {
    std::fprintf(stderr, "wgrt: %s\n", e.what());
    return 1;
  }
}
