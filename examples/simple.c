/* Loads a model (argv[1], else wgrt's demo model) and prints a short greedy continuation. */
#include <stdio.h>
#include <wgrt/wgrt.h>

static int print_token(const char* text, size_t len, int32_t token, void* user) {
  (void)token;
  (void)user;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  return 0; /* non-zero stops the generation */
}

int main(int argc, char** argv) {
  printf("wgrt %s\n", wgrt_version());
  wgrt_model_params mp = wgrt_model_default_params();
  mp.model_path = argc > 1 ? argv[1] : NULL;
  wgrt_model* model = wgrt_model_load(&mp);
  if (!model) {
    fprintf(stderr, "load failed: %s\n", wgrt_last_error());
    return 1;
  }
  wgrt_sampling_params sp = wgrt_sampling_default_params();
  sp.temperature = 0; /* greedy */
  sp.max_tokens = 16;
  wgrt_status st = wgrt_generate(model, "Once upon a time", &sp, print_token, NULL);
  printf("\n");
  if (st != WGRT_OK) fprintf(stderr, "%s: %s\n", wgrt_status_name(st), wgrt_last_error());
  wgrt_model_free(model);
  return st == WGRT_OK ? 0 : 1;
}
