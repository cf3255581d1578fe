// Writes the seed inputs of the fuzz corpus (tests/fuzz/corpus/<target>/seed-*) with wgrt's own
// writers: small GGUF models and vocabularies, Hugging Face config.json + safetensors pairs,
// tokenizer.json files, tokenizer texts, server request bodies and chat templates.
// Usage: wgrt_fuzz_seeds <corpus dir>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>

#include "fuzz_targets.h"
#include "model/gguf_writer.h"
#include "model/random_model.h"
#include "support/hf_fixture.h"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using namespace wgrt;

void write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
  std::cout << path.string() << ": " << bytes.size() << " bytes\n";
}

std::string as_string(const std::vector<uint8_t>& b) { return std::string(b.begin(), b.end()); }

model::GgufWriter spm_vocab() {
  model::GgufWriter w;
  model::gguf_set_string(w, "tokenizer.ggml.model", "llama");
  model::gguf_set_strings(w, "tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "<0x62>"});
  model::gguf_set_f32s(w, "tokenizer.ggml.scores", {0, 0, 0, -1, -2, -3});
  model::gguf_set_i32s(w, "tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 6});
  model::gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
  return w;
}

model::GgufWriter gpt2_vocab() {
  model::GgufWriter w;
  model::gguf_set_string(w, "tokenizer.ggml.model", "gpt2");
  model::gguf_set_string(w, "tokenizer.ggml.pre", "qwen2");
  model::gguf_set_strings(w, "tokenizer.ggml.tokens", {"a", "b", "ab", "\xC4\xA0", "\xC4\xA0" "ab", "<|end|>"});
  model::gguf_set_i32s(w, "tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 3});
  model::gguf_set_strings(w, "tokenizer.ggml.merges", {"a b", "\xC4\xA0 ab"});
  model::gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 5);
  return w;
}

std::string random_model(model::Arch arch, model::GgmlType matrix, model::GgmlType embd, bool tied,
                         const model::GgufWriter& vocab,
                         const std::function<void(model::GgufWriter&)>& edit = {}) {
  const std::vector<uint8_t> vocab_bytes = model::gguf_serialize(vocab);
  const model::GgufFile vocab_file = model::parse_gguf(vocab_bytes, "vocab");
  model::RandomModelSpec s;
  s.arch = arch;
  s.dim = 32, s.n_layers = 1, s.n_heads = 2, s.n_kv_heads = 1, s.head_dim = 16, s.ff = 32;
  s.matrix_type = matrix;
  s.embd_type = embd;
  s.tied_embeddings = tied;
  s.vocab_from = &vocab_file;
  model::GgufWriter w = model::make_random_model(s);
  if (edit) edit(w);
  return as_string(model::gguf_serialize(w));
}

std::vector<uint8_t> f32_bytes(size_t n, size_t elem) {
  std::vector<uint8_t> b(n * elem);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 37 + 11);
  if (elem == 4)
    for (size_t i = 0; i < n; ++i) {
      const float v = 0.01f * float(i % 17) - 0.05f;
      std::memcpy(b.data() + 4 * i, &v, 4);
    }
  return b;
}

// u32 length | config.json | model.safetensors
std::string hf_input(const json& config, const std::map<std::string, test::StEntry>& tensors) {
  const std::string dir = test::temp_dir("fuzz-seed");
  test::write_safetensors(dir + "/model.safetensors", tensors);
  std::ifstream in(dir + "/model.safetensors", std::ios::binary);
  const std::string st((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove_all(dir);
  const std::string cfg = config.dump(1);
  std::string out(4, '\0');
  const uint32_t n = static_cast<uint32_t>(cfg.size());
  std::memcpy(out.data(), &n, 4);
  return out + cfg + st;
}

std::map<std::string, test::StEntry> hf_tensors(bool biases, bool tied) {
  const uint64_t V = 6, D = 8, KV = 4, F = 16;
  auto entry = [](const char* dtype, std::vector<uint64_t> shape) {
    size_t n = 1;
    for (uint64_t d : shape) n *= d;
    const size_t elem = std::strcmp(dtype, "F32") == 0 ? 4 : 2;
    return test::StEntry{dtype, shape, f32_bytes(n, elem)};
  };
  std::map<std::string, test::StEntry> t;
  t["model.embed_tokens.weight"] = entry("BF16", {V, D});
  const std::string p = "model.layers.0.";
  t[p + "input_layernorm.weight"] = entry("F32", {D});
  t[p + "self_attn.q_proj.weight"] = entry("F16", {D, D});
  t[p + "self_attn.k_proj.weight"] = entry("F16", {KV, D});
  t[p + "self_attn.v_proj.weight"] = entry("F16", {KV, D});
  if (biases) {
    t[p + "self_attn.q_proj.bias"] = entry("F32", {D});
    t[p + "self_attn.k_proj.bias"] = entry("F32", {KV});
    t[p + "self_attn.v_proj.bias"] = entry("F32", {KV});
  }
  t[p + "self_attn.o_proj.weight"] = entry("F16", {D, D});
  t[p + "post_attention_layernorm.weight"] = entry("F32", {D});
  t[p + "mlp.gate_proj.weight"] = entry("BF16", {F, D});
  t[p + "mlp.up_proj.weight"] = entry("BF16", {F, D});
  t[p + "mlp.down_proj.weight"] = entry("BF16", {D, F});
  t["model.norm.weight"] = entry("F32", {D});
  if (!tied) t["lm_head.weight"] = entry("F32", {V, D});
  return t;
}

json hf_config(const char* arch) {
  return {{"architectures", {arch}}, {"vocab_size", 6}, {"hidden_size", 8}, {"num_hidden_layers", 1},
          {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"intermediate_size", 16},
          {"max_position_embeddings", 128}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: wgrt_fuzz_seeds <corpus dir>\n";
    return 2;
  }
  const fs::path root = argv[1];

  write(root / "gguf/seed-llama-q8_0",
        random_model(model::Arch::Llama, model::GgmlType::Q8_0, model::GgmlType::F16, false, spm_vocab()));
  write(root / "gguf/seed-qwen2-q4_0-tied",
        random_model(model::Arch::Qwen2, model::GgmlType::Q4_0, model::GgmlType::F32, true, gpt2_vocab()));
  write(root / "gguf/seed-vocab-spm", as_string(model::gguf_serialize(spm_vocab())));
  write(root / "gguf/seed-vocab-gpt2", as_string(model::gguf_serialize(gpt2_vocab())));

  // Inputs the loader once took wrongly: a size past 32 bits (read as 6 layers), an infinite
  // epsilon, two tensors of one name; a [2^31, 2^31] F32 tensor of 0 bytes (its byte size
  // wrapped 64 bits) and an epsilon that is infinite as a float.
  write(root / "gguf/regress-block-count-past-32-bits",
        random_model(model::Arch::Llama, model::GgmlType::Q8_0, model::GgmlType::F16, false, spm_vocab(),
                     [](model::GgufWriter& w) {
                       model::gguf_set(w, "llama.block_count", {model::GgufType::U64, (uint64_t(1) << 32) + 1});
                     }));
  write(root / "gguf/regress-epsilon-infinite",
        random_model(model::Arch::Llama, model::GgmlType::Q8_0, model::GgmlType::F16, false, spm_vocab(),
                     [](model::GgufWriter& w) {
                       model::gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", INFINITY);
                     }));
  write(root / "gguf/regress-tensor-name-twice",
        random_model(model::Arch::Qwen2, model::GgmlType::Q4_0, model::GgmlType::F32, true, gpt2_vocab(),
                     [](model::GgufWriter& w) { w.tensors.push_back(w.tensors.front()); }));
  auto overflow = hf_tensors(false, false);
  overflow["model.norm.weight"] = {"F32", {uint64_t(1) << 31, uint64_t(1) << 31}, {}};
  write(root / "safetensors/regress-shape-bytes-overflow", hf_input(hf_config("LlamaForCausalLM"), overflow));
  json huge_eps = hf_config("LlamaForCausalLM");
  huge_eps["rms_norm_eps"] = 1e300;
  write(root / "safetensors/regress-epsilon-past-float", hf_input(huge_eps, hf_tensors(false, false)));

  write(root / "safetensors/seed-llama.bin", hf_input(hf_config("LlamaForCausalLM"), hf_tensors(false, false)));
  json qwen = hf_config("Qwen2ForCausalLM");
  qwen["tie_word_embeddings"] = true;
  qwen["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}};
  write(root / "safetensors/seed-qwen2-tied.bin", hf_input(qwen, hf_tensors(true, true)));

  const json norm = {{"type", "Sequence"},
                     {"normalizers",
                      {{{"type", "NFKC"}},
                       {{"type", "Lowercase"}},
                       {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}},
                       {{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}},
                       {{"type", "Prepend"}, {"prepend", ">"}}}}};
  write(root / "tokenizer_json/seed-byte-level.json", fuzz::tiny_byte_level_json(norm).dump());
  json split = fuzz::tiny_byte_level_json({{"type", "NFD"}});
  split["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", "\\p{N}{1,3}| ?\\p{L}+|\\s+"}}}, {"behavior", "Isolated"}},
        {{"type", "Digits"}, {"individual_digits", true}},
        {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", false}}}}};
  split["post_processor"] = {{"type", "TemplateProcessing"},
                             {"single", {{{"SpecialToken", {{"id", "<|end|>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
                             {"special_tokens", {{"<|end|>", {{"id", "<|end|>"}, {"ids", {258}}}}}}};
  write(root / "tokenizer_json/seed-split-template.json",
        split.dump() + std::string(1, '\0') + R"({"eos_token": "<|end|>", "add_bos_token": true})");
  write(root / "tokenizer_json/seed-spm.json", fuzz::tiny_spm_json().dump());
  json metaspace = fuzz::tiny_spm_json();
  metaspace["normalizer"] = {{"type", "NFC"}};
  metaspace["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}};
  write(root / "tokenizer_json/seed-metaspace.json", metaspace.dump());

  const std::vector<std::string> texts = {
      "Hello world, the 123 tests",
      "Ame\xCC\x81lie <hi> <|end|> <tool> caf\xC3\xA9",
      "\xFF\xFE not UTF-8 \xC3 \xE2\x82",
      "\xEF\xAC\x81 \xE2\x91\xA0  many   spaces\t\n\xE3\x80\x80",
      "\xE2\x96\x81" "a ab \xC3\xA9 <s>",
  };
  for (int sel = 0; sel < 6; ++sel)
    for (size_t i = 0; i < texts.size(); ++i) {
      const char selector = static_cast<char>(sel | (i % 2 ? 0x10 : 0));
      write(root / fmt::format("tokenize/seed-{}-{}", sel, i), std::string(1, selector) + texts[i]);
    }
  // server_request: selector byte (the endpoint) | body.
  const std::vector<std::pair<int, std::string>> bodies = {
      {1, R"({"model": "tiny.gguf", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "temperature": 0.7, "top_p": 0.9, "max_tokens": 16, "stream": true, "stream_options": {"include_usage": true}})"},
      {1, R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{\"city\": \"Oslo\"}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "sunny"}], "tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}], "max_completion_tokens": 8, "stop": ["\n", "User:"], "seed": 42, "n": 1})"},
      {1, R"({"messages": [{"role": "user", "content": "x"}], "presence_penalty": 0, "frequency_penalty": 0.5, "logprobs": false})"},
      {0, R"({"model": "tiny.gguf", "prompt": "Once upon a time", "max_tokens": 12, "temperature": 0, "stop": "."})"},
      {0, R"({"prompt": ["one"], "top_k": 40, "min_p": 0.05, "seed": -1, "stream": false, "echo": null})"},
      {0, R"({"prompt": 3, "max_tokens": "8"})"},
      {0, R"({"prompt": "x", "model": "gpt-4o", "n": 2})"},
      {2, R"({"content": "Hello <s> world", "add_special": false})"},
      {3, R"({"tokens": [1, 72, 105, 257, 99999]})"},
      {3, R"({"tokens": [104, 105]})"},
  };
  for (size_t i = 0; i < bodies.size(); ++i)
    write(root / fmt::format("server_request/seed-{}", i), std::string(1, char(bodies[i].first)) + bodies[i].second);

  // chat_template: flags | template [ NUL messages ].
  const std::string conversation = R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}, {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "get", "arguments": {"city": "Oslo"}}}]}, {"role": "tool", "content": "sunny"}, {"role": "assistant", "content": "Sunny."}])";
  const std::vector<std::string> templates = {
      "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content | trim }}"
      "<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}",
      "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' }}{%- if message.tool_calls %}"
      "{%- for tc in message.tool_calls %}<tool_call>{{ tc.function | tojson(indent=2) }}</tool_call>{%- endfor %}"
      "{%- else %}{{- message.content }}{%- endif %}{{- '<|im_end|>\n' }}{%- endfor %}"
      "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- if enable_thinking is defined and not "
      "enable_thinking %}<think>\n\n</think>\n\n{%- endif %}{%- endif %}",
      "{% set ns = namespace(sys='') %}{% for m in messages if m.role == 'system' %}{% set ns.sys = m.content %}"
      "{% endfor %}{% macro turn(r, c) %}[{{ r | upper }}] {{ c }}{% endmacro %}{{ ns.sys ~ '\n' }}"
      "{% for m in messages[1:] %}{% if loop.first %}{{ '>' }}{% elif loop.last %}{{ '<' }}{% endif %}"
      "{{ turn(m.role, m.content | default('', true)) }}{% if m.content is string and 'x' in m.content %}{% break %}"
      "{% endif %}{% endfor %}{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(', ') }}"
      "{{ raise_exception('bad') if messages | length > 99 else '' }}{{ strftime_now('%Y-%m-%d') }}",
      "{%- for m in messages -%}{{ m.role[0] | upper ~ m.role[1:] }}: {{ (m.content or '') | replace('\n', ' ') }}\n"
      "{%- endfor -%}{{ {'a': 1, 'b': [1, 2, 3]} | items | list | tojson }}{{ (3 % 2) if true else 0 }}",
  };
  for (size_t i = 0; i < templates.size(); ++i) {
    write(root / fmt::format("chat_template/seed-{}", i), std::string(1, char(1 + 2 * (i % 2))) + templates[i]);
    write(root / fmt::format("chat_template/seed-{}-tools", i),
          std::string(1, char(1)) + templates[i] + std::string(1, '\0') + conversation);
  }
  return 0;
}
