/* wgrt's C API: load a model, tokenize, generate, chat, embed.
 *
 * Opaque handles, plain C types. No exception crosses it: every entry point returns a status
 * (or a size) and leaves a message for wgrt_last_error(). docs/API.md has an example. */
#ifndef WGRT_WGRT_H
#define WGRT_WGRT_H

#include <stddef.h>
#include <stdint.h>

/* Exported from libwgrt.so; everything else in it stays hidden. */
#if defined(__GNUC__)
#define WGRT_API __attribute__((visibility("default")))
#else
#define WGRT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* "MAJOR.MINOR.PATCH" of the library; a static string. */
WGRT_API const char* wgrt_version(void);

typedef enum wgrt_status {
  WGRT_OK = 0,
  WGRT_CANCELLED = 1,                /* a generation ended early by wgrt_cancel (not an error) */
  WGRT_ERR_INVALID_ARGUMENT = -1,    /* NULL pointer, value out of range, prompt past the context */
  WGRT_ERR_IO = -2,                  /* a file missing or unreadable */
  WGRT_ERR_MODEL = -3,               /* a model file wgrt cannot read (format, tensors, tokenizer) */
  WGRT_ERR_GPU = -4,                 /* no adapter, device lost, WebGPU error */
  WGRT_ERR_BUSY = -5,                /* the model is running another generation */
  WGRT_ERR_OUT_OF_MEMORY = -6,
  WGRT_ERR_INTERNAL = -7             /* anything else: a bug to report */
} wgrt_status;

/* The message of this thread's latest failed call ("" when none): what failed, where, and a
 * hint. Valid until this thread's next wgrt call. */
WGRT_API const char* wgrt_last_error(void);
/* The status of this thread's latest failed call (WGRT_OK when none); with wgrt_model_load,
 * which returns NULL on failure. */
WGRT_API wgrt_status wgrt_last_status(void);
/* A short name for a status ("WGRT_ERR_IO"); a static string. */
WGRT_API const char* wgrt_status_name(wgrt_status s);

typedef struct wgrt_model wgrt_model;

typedef struct wgrt_model_params {
  const char* model_path;     /* .gguf file or Hugging Face folder; NULL or "": the demo model */
  uint32_t n_ctx;             /* context positions; 0: the model's default */
  int32_t adapter_index;      /* GPU adapter; -1: env WGRT_ADAPTER, else the best one */
  /* Jinja text of a chat template that replaces the model's own (NULL: the model's). */
  const char* chat_template;
  /* The K and V caches' types: "f16", "q8_0" (int8 blocks of 32, 53% of f16's bytes) or "f32"
   * (an f32 cache pairs only with an f32 one); NULL: f16. */
  const char* cache_type_k;
  const char* cache_type_v;
} wgrt_model_params;

WGRT_API wgrt_model_params wgrt_model_default_params(void);

/* NULL on failure (wgrt_last_error says why). */
WGRT_API wgrt_model* wgrt_model_load(const wgrt_model_params* params);
WGRT_API void wgrt_model_free(wgrt_model* model); /* NULL is fine */

/* The text's tokens into tokens[0..capacity). Returns how many the text has (write again with
 * that capacity when it is larger), or a negative wgrt_status. add_special: BOS as the model
 * wants; parse_special: special tokens' texts ("<|eot_id|>") become those tokens. */
WGRT_API int32_t wgrt_tokenize(const wgrt_model* model, const char* text, size_t text_len,
                               int add_special, int parse_special, int32_t* tokens,
                               int32_t capacity);
/* The tokens' text into buf, NUL-terminated when it fits (as snprintf). Returns its length in
 * bytes without the NUL, or a negative wgrt_status. render_special: control tokens as text. */
WGRT_API int32_t wgrt_detokenize(const wgrt_model* model, const int32_t* tokens, int32_t n_tokens,
                                 int render_special, char* buf, size_t capacity);

/* A token and the value added to its logit before sampling (finite; -100 keeps it out in practice). */
typedef struct wgrt_logit_bias {
  int32_t token;
  float bias;
} wgrt_logit_bias;

/* Versioned: struct_size is the size of the struct as the caller compiled it, set by
 * wgrt_sampling_default_params(). A later wgrt appends fields only; it reads the caller's
 * struct_size bytes and takes the defaults for fields past them. Start from the defaults and
 * change what you need. Pointers need only live through the call they are passed to. */
typedef struct wgrt_sampling_params {
  uint32_t struct_size;   /* sizeof(wgrt_sampling_params) */
  float temperature;      /* 0: greedy */
  uint32_t top_k;         /* 0: all candidates */
  float top_p;            /* 1: off */
  float min_p;            /* 0: off */
  float repeat_penalty;   /* 1: off; the last repeat_last_n tokens' positive logits divided by it */
  uint32_t repeat_last_n; /* the tokens the penalties look at (the prompt's included) */
  uint64_t seed;
  int32_t max_tokens;     /* tokens to generate; < 0: until end of text or the context is full */
  float presence_penalty;  /* 0: off; subtracted from the logit of each token among the last repeat_last_n */
  float frequency_penalty; /* 0: off; times a token's count among the last repeat_last_n, subtracted */
  const wgrt_logit_bias* logit_bias; /* n_logit_bias entries, distinct tokens of the vocabulary */
  size_t n_logit_bias;
  const char* const* stop; /* n_stop texts: the generation ends before any of them (not emitted) */
  size_t n_stop;
  const char* grammar;     /* GBNF text (start rule root) the output is held to; NULL: none */
  const char* json_schema; /* JSON schema text the output is held to; NULL: none (at most one of the two) */
} wgrt_sampling_params;

WGRT_API wgrt_sampling_params wgrt_sampling_default_params(void);

/* Called once per generated token with its text (NUL-terminated, text_len bytes; empty while a
 * character is split across tokens, whose bytes come with a later one) and id. A last call
 * with token -1 may carry the bytes of a character the generation left unfinished, as U+FFFD.
 * Return 0 to go on, non-zero to stop. */
typedef int (*wgrt_token_callback)(const char* text, size_t text_len, int32_t token, void* user);

/* Generates from `prompt` (a fresh context each call; special tokens' texts are parsed).
 * WGRT_OK when it ends by end of text, max_tokens, the context or the callback;
 * WGRT_CANCELLED after wgrt_cancel. One generation per model at a time (else WGRT_ERR_BUSY). */
WGRT_API wgrt_status wgrt_generate(wgrt_model* model, const char* prompt,
                                   const wgrt_sampling_params* sampling,
                                   wgrt_token_callback callback, void* user);

/* Why a generation ended. */
typedef enum wgrt_stop_reason {
  WGRT_STOP_NONE = 0,        /* no generation has ended on this model yet */
  WGRT_STOP_EOS = 1,         /* the model's end-of-text token */
  WGRT_STOP_LENGTH = 2,      /* max_tokens */
  WGRT_STOP_STRING = 3,      /* one of the stop texts */
  WGRT_STOP_CONTEXT = 4,     /* the context is full */
  WGRT_STOP_CALLBACK = 5,    /* the callback returned non-zero */
  WGRT_STOP_CANCELLED = 6    /* wgrt_cancel */
} wgrt_stop_reason;

/* Versioned as wgrt_sampling_params: set struct_size = sizeof(wgrt_generate_stats). */
typedef struct wgrt_generate_stats {
  uint32_t struct_size;
  wgrt_stop_reason stop_reason;
  int32_t n_prompt;          /* prompt tokens evaluated */
  int32_t n_generated;       /* tokens generated */
  double prompt_seconds;     /* the prompt's evaluation, to its first token's logits */
  double generate_seconds;   /* the tokens after it */
} wgrt_generate_stats;

/* The figures of the model's latest finished generation (wgrt_generate or wgrt_chat, ended in
 * any way but an error) into *stats. */
WGRT_API wgrt_status wgrt_last_generate_stats(const wgrt_model* model, wgrt_generate_stats* stats);

/* Asks the model's running generation to stop before its next token; safe from any thread.
 * A cancel while none runs stops the next one at its start. */
WGRT_API void wgrt_cancel(wgrt_model* model);

typedef struct wgrt_chat_message {
  const char* role;     /* "system", "user", "assistant" */
  const char* content;
} wgrt_chat_message;

/* Renders the conversation with the model's chat template (or params.chat_template), adds the
 * assistant's turn, and generates the reply as wgrt_generate does. */
WGRT_API wgrt_status wgrt_chat(wgrt_model* model, const wgrt_chat_message* messages,
                               size_t n_messages, const wgrt_sampling_params* sampling,
                               wgrt_token_callback callback, void* user);

/* The width of the model's embeddings (its hidden size), or a negative wgrt_status. */
WGRT_API int32_t wgrt_model_n_embd(const wgrt_model* model);

/* The embedding of `text` (text_len bytes; BOS and EOS as the model's vocabulary adds them,
 * special tokens' texts parsed) into out[0..capacity): the final normed hidden states of its
 * tokens pooled as the model file says (GGUF <arch>.pooling_type, sentence-transformers'
 * 1_Pooling; mean when it says nothing), L2-normalized. Returns n_embd, or a negative
 * wgrt_status; with capacity < n_embd it computes and writes nothing (ask again with n_embd).
 * The text must fit the context. It runs on the model's context, one embedding or generation
 * per model at a time (else WGRT_ERR_BUSY). */
WGRT_API int32_t wgrt_embed(wgrt_model* model, const char* text, size_t text_len, float* out, size_t capacity);

#ifdef __cplusplus
}
#endif

#endif /* WGRT_WGRT_H */
