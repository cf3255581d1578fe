// wgrt_export_demo: turns the demo model's training output (tools/demo-model/train.py:
// config.json, model.safetensors with f32 weights under Hugging Face's llama names, tokenizer.json)
// into the files wgrt ships and checks, with wgrt's own writers:
//   OUT/wgrt-demo-f32.gguf, OUT/wgrt-demo-q8_0.gguf, OUT/wgrt-demo-q4_0.gguf
//   OUT/wgrt-demo-hf/{config.json, model.safetensors, tokenizer.json, tokenizer_config.json}
//     wgrt_export_demo --in .deps/demo-model/run3 --out .deps/demo-model/export
// GGUF stores llama's q and k rows permuted for interleaved rope pairs (wgrt's GGUF llama path
// rotates (2j, 2j+1); the HF layout rotates (j, j + d/2)), so those two are permuted here.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "model/file_type.h"
#include "model/ggml_quantize.h"
#include "model/gguf_writer.h"
#include "model/safetensors.h"
#include "tokenizer/vocab.h"

namespace {

using namespace wgrt;
using json = nlohmann::json;
namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& what, const std::string& hint) {
  throw std::runtime_error(fmt::format("{} (hint: {})", what, hint));
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail(fmt::format("{}: cannot be read", p.string()), "is --in train.py's output directory?");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Shape {
  uint32_t vocab, dim, ff, layers, heads, kv_heads, head_dim, ctx;
  float eps, rope_theta;
};

Shape read_config(const json& c, const std::string& where) {
  auto u = [&](const char* k) {
    if (!c.contains(k) || !c[k].is_number_unsigned())
      fail(fmt::format("{}: '{}' is missing or not a positive integer", where, k), "train.py writes it");
    return c[k].get<uint32_t>();
  };
  if (!c.value("tie_word_embeddings", false))
    fail(fmt::format("{}: tie_word_embeddings is not true", where), "the demo recipe ties lm_head to embed_tokens");
  return {u("vocab_size"), u("hidden_size"), u("intermediate_size"), u("num_hidden_layers"),
          u("num_attention_heads"), u("num_key_value_heads"), u("head_dim"), u("max_position_embeddings"),
          c.value("rms_norm_eps", 1e-5f), c.value("rope_theta", 10000.f)};
}

// One f32 tensor of the checkpoint, checked against the shape the config implies.
std::vector<float> weight(const model::StCheckpoint& ck, const std::string& name, std::vector<uint64_t> shape) {
  const model::StTensor* t = ck.find(name);
  if (!t) fail(fmt::format("model.safetensors: no tensor '{}'", name), "train.py writes every llama weight");
  if (t->dtype != model::StDtype::F32 || t->shape != shape)
    fail(fmt::format("model.safetensors: '{}' is {} {}, expected F32 {}", name, model::st_dtype_name(t->dtype),
                     json(t->shape).dump(), json(shape).dump()),
         "config.json and the weights disagree");
  std::vector<float> v(t->n_bytes / 4);
  std::memcpy(v.data(), t->data, t->n_bytes);
  return v;
}

// HF row h*hd + k*hd/2 + i becomes GGUF row h*hd + 2i + k (each row `cols` wide).
std::vector<float> permute_rope_rows(const std::vector<float>& w, uint32_t n_heads, uint32_t hd, uint32_t cols) {
  std::vector<float> out(w.size());
  for (uint32_t h = 0; h < n_heads; ++h)
    for (uint32_t i = 0; i < hd / 2; ++i)
      for (uint32_t k = 0; k < 2; ++k)
        std::memcpy(&out[(size_t(h) * hd + 2 * i + k) * cols], &w[(size_t(h) * hd + k * hd / 2 + i) * cols],
                    cols * sizeof(float));
  return out;
}

void add_tokenizer(model::GgufWriter& w, const tokenizer::Vocab& v) {
  model::gguf_set_string(w, "tokenizer.ggml.model", "gpt2");
  model::gguf_set_string(w, "tokenizer.ggml.pre", "gpt-2");  // ByteLevel with GPT-2's regex (train.py)
  model::gguf_set_strings(w, "tokenizer.ggml.tokens", v.tokens);
  std::vector<int64_t> types;
  for (tokenizer::TokenType t : v.types) types.push_back(int64_t(t));
  model::gguf_set_i32s(w, "tokenizer.ggml.token_type", types);
  std::vector<std::string> merges;
  merges.reserve(v.merges.size());
  for (const auto& [a, b] : v.merges) merges.push_back(a + " " + b);
  model::gguf_set_strings(w, "tokenizer.ggml.merges", merges);
  model::gguf_set_u32(w, "tokenizer.ggml.bos_token_id", uint32_t(v.bos_id));
  model::gguf_set_u32(w, "tokenizer.ggml.eos_token_id", uint32_t(v.eos_id));
  model::gguf_set_bool(w, "tokenizer.ggml.add_bos_token", v.add_bos);
}

void add_matrix(model::GgufWriter& w, const std::string& name, model::GgmlType type, const std::vector<float>& x,
                uint64_t rows, uint64_t cols) {
  model::gguf_add_tensor(w, name, type, {cols, rows}, model::quantize(type, x));
}

void write_gguf(const model::StCheckpoint& ck, const Shape& s, const tokenizer::Vocab& vocab, model::GgmlType matrix,
                model::GgmlType embd, const std::string& name, const std::string& path) {
  model::GgufWriter w;
  const std::string a = "llama";
  model::gguf_set_string(w, "general.architecture", a);
  model::gguf_set_string(w, "general.name", name);
  if (auto ft = model::file_type_of(matrix)) model::gguf_set_u32(w, "general.file_type", *ft);
  model::gguf_set_u32(w, a + ".vocab_size", s.vocab);
  model::gguf_set_u32(w, a + ".context_length", s.ctx);
  model::gguf_set_u32(w, a + ".embedding_length", s.dim);
  model::gguf_set_u32(w, a + ".block_count", s.layers);
  model::gguf_set_u32(w, a + ".feed_forward_length", s.ff);
  model::gguf_set_u32(w, a + ".attention.head_count", s.heads);
  model::gguf_set_u32(w, a + ".attention.head_count_kv", s.kv_heads);
  model::gguf_set_u32(w, a + ".attention.key_length", s.head_dim);
  model::gguf_set_u32(w, a + ".attention.value_length", s.head_dim);
  model::gguf_set_u32(w, a + ".rope.dimension_count", s.head_dim);
  model::gguf_set_f32(w, a + ".attention.layer_norm_rms_epsilon", s.eps);
  model::gguf_set_f32(w, a + ".rope.freq_base", s.rope_theta);
  add_tokenizer(w, vocab);

  const uint64_t D = s.dim, Q = uint64_t(s.heads) * s.head_dim, KV = uint64_t(s.kv_heads) * s.head_dim;
  auto norm = [&](const std::string& gguf, const std::string& hf) {
    const std::vector<float> x = weight(ck, hf, {D});
    model::gguf_add_tensor(w, gguf, model::GgmlType::F32, {D}, model::quantize(model::GgmlType::F32, x));
  };
  add_matrix(w, "token_embd.weight", embd, weight(ck, "model.embed_tokens.weight", {s.vocab, D}), s.vocab, D);
  for (uint32_t l = 0; l < s.layers; ++l) {
    const std::string g = fmt::format("blk.{}.", l), h = fmt::format("model.layers.{}.", l);
    norm(g + "attn_norm.weight", h + "input_layernorm.weight");
    add_matrix(w, g + "attn_q.weight", matrix,
               permute_rope_rows(weight(ck, h + "self_attn.q_proj.weight", {Q, D}), s.heads, s.head_dim, s.dim), Q, D);
    add_matrix(w, g + "attn_k.weight", matrix,
               permute_rope_rows(weight(ck, h + "self_attn.k_proj.weight", {KV, D}), s.kv_heads, s.head_dim, s.dim),
               KV, D);
    add_matrix(w, g + "attn_v.weight", matrix, weight(ck, h + "self_attn.v_proj.weight", {KV, D}), KV, D);
    add_matrix(w, g + "attn_output.weight", matrix, weight(ck, h + "self_attn.o_proj.weight", {D, Q}), D, Q);
    norm(g + "ffn_norm.weight", h + "post_attention_layernorm.weight");
    add_matrix(w, g + "ffn_gate.weight", matrix, weight(ck, h + "mlp.gate_proj.weight", {s.ff, D}), s.ff, D);
    add_matrix(w, g + "ffn_up.weight", matrix, weight(ck, h + "mlp.up_proj.weight", {s.ff, D}), s.ff, D);
    add_matrix(w, g + "ffn_down.weight", matrix, weight(ck, h + "mlp.down_proj.weight", {D, s.ff}), D, s.ff);
  }
  norm("output_norm.weight", "model.norm.weight");  // output.weight: tied to token_embd
  model::gguf_write_file(w, path);
}

// safetensors: u64 little-endian header size, the JSON header (padded with spaces to 8 bytes),
// then each tensor's raw little-endian bytes, in header order.
void write_safetensors(const model::StCheckpoint& ck, const std::string& path) {
  std::vector<const model::StTensor*> ts;
  for (const model::StTensor& t : ck.tensors) {
    if (t.dtype != model::StDtype::F32) fail(fmt::format("{}: not F32", t.name), "train.py writes f32 weights");
    ts.push_back(&t);
  }
  // nlohmann's object keeps its keys sorted: lay the bytes out in that order too.
  std::sort(ts.begin(), ts.end(), [](auto* a, auto* b) { return a->name < b->name; });
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t off = 0;
  for (const model::StTensor* t : ts) {
    header[t->name] = {{"dtype", "F32"}, {"shape", t->shape}, {"data_offsets", {off, off + t->n_bytes}}};
    off += t->n_bytes;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary);
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = uint8_t(uint64_t(h.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(le), 8);
  out.write(h.data(), std::streamsize(h.size()));
  for (const model::StTensor* t : ts) out.write(reinterpret_cast<const char*>(t->data), std::streamsize(t->n_bytes));
  if (!out) fail(fmt::format("{}: write failed", path), "check the disk space and the --out directory");
}

void write_hf_dir(const model::StCheckpoint& ck, const json& config, const fs::path& in, const fs::path& dir,
                  const tokenizer::Vocab& vocab) {
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << config.dump(1) << "\n";
  fs::copy_file(in / "tokenizer.json", dir / "tokenizer.json", fs::copy_options::overwrite_existing);
  const std::string bos = vocab.tokens.at(size_t(vocab.bos_id)), eos = vocab.tokens.at(size_t(vocab.eos_id));
  json tc = {{"tokenizer_class", "PreTrainedTokenizerFast"},
             {"bos_token", bos},
             {"eos_token", eos},
             {"model_max_length", config["max_position_embeddings"]},
             {"clean_up_tokenization_spaces", false}};
  std::ofstream(dir / "tokenizer_config.json") << tc.dump(1) << "\n";
  write_safetensors(ck, (dir / "model.safetensors").string());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"export the demo model to GGUF (F32, Q8_0, Q4_0) and a Hugging Face directory", "wgrt_export_demo"};
  std::string in, out, name = "wgrt-demo";
  app.add_option("--in", in, "train.py's output directory (config.json, model.safetensors, tokenizer.json)")
      ->required();
  app.add_option("--out", out, "directory for the exported files")->required();
  app.add_option("--name", name, "general.name and the files' prefix");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    const fs::path dir(in);
    const json config = json::parse(slurp(dir / "config.json"));
    const Shape s = read_config(config, (dir / "config.json").string());
    const model::StCheckpoint ck = model::open_safetensors((dir / "model.safetensors").string());
    tokenizer::Vocab vocab = tokenizer::vocab_from_tokenizer_json((dir / "tokenizer.json").string());
    // tokenizer.json knows BOS (its template prepends it), not EOS: config.json names it.
    if (vocab.eos_id < 0 && config.contains("eos_token_id") && config["eos_token_id"].is_number_unsigned())
      vocab.eos_id = config["eos_token_id"].get<int32_t>();
    if (uint32_t(vocab.n_vocab()) != s.vocab || vocab.bos_id < 0 || vocab.eos_id < 0)
      fail(fmt::format("tokenizer.json has {} tokens (BOS {}, EOS {}), config.json vocab_size {}", vocab.n_vocab(),
                       vocab.bos_id, vocab.eos_id, s.vocab),
           "export the tokenizer trained with these weights");
    fs::create_directories(out);
    using model::GgmlType;
    const std::tuple<const char*, GgmlType, GgmlType> files[] = {{"f32", GgmlType::F32, GgmlType::F32},
                                                                  {"q8_0", GgmlType::Q8_0, GgmlType::Q8_0},
                                                                  {"q4_0", GgmlType::Q4_0, GgmlType::Q8_0}};
    for (auto [suffix, matrix, embd] : files) {
      const std::string path = (fs::path(out) / fmt::format("{}-{}.gguf", name, suffix)).string();
      write_gguf(ck, s, vocab, matrix, embd, name, path);
      fmt::print("wrote {} ({:.2f} MiB)\n", path, fs::file_size(path) / 1048576.0);
    }
    const fs::path hf = fs::path(out) / (name + "-hf");
    write_hf_dir(ck, config, dir, hf, vocab);
    fmt::print("wrote {}/ (config.json, model.safetensors, tokenizer.json, tokenizer_config.json)\n", hf.string());
  } catch (const std::exception& e) {
    fmt::print(stderr, "wgrt_export_demo: {}\n", e.what());
    return 1;
  }
  return 0;
}
