#include "model/model_file.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "model/shape.h"

namespace wgrt::model {

uint64_t WeightView::n_elements() const {
  // The readers refused shapes whose size overflows; a view made otherwise is a bug.
  const std::optional<uint64_t> n = shape_elements(dims);
  if (!n) throw std::logic_error(fmt::format("weight '{}': shape {} overflows 64 bits", name, shape_str(dims)));
  return *n;
}

namespace {

std::string dims_str(const std::vector<uint64_t>& d) { return shape_str(d); }

// Hugging Face names -> GGUF names ("" for tensors wgrt does not use). Gemma's layers have four
// norms: post_attention_layernorm is the attention's post-norm there (llama's ffn_norm elsewhere).
std::string gguf_name(const std::string& hf, Arch arch) {
  static const std::pair<const char*, const char*> top[] = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"}};
  for (auto [from, to] : top)
    if (hf == from) return to;
  static const std::regex layer(R"(model\.layers\.(\d+)\.(.+))");
  std::smatch m;
  if (!std::regex_match(hf, m, layer)) return "";
  static const std::pair<const char*, const char*> parts[] = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.qkv_proj.weight", "attn_qkv.weight"},  // phi3: q|k|v in one matrix
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.bias", "attn_output.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
      {"mlp.gate_up_proj.weight", "ffn_up.weight"},  // phi3: gate|up in one matrix of 2 ff rows
      {"mlp.gate_proj.bias", "ffn_gate.bias"},
      {"mlp.up_proj.bias", "ffn_up.bias"},
      {"mlp.down_proj.bias", "ffn_down.bias"},
      // Mixtral's, Qwen3-MoE's and Qwen2-MoE's routers; Qwen2-MoE's shared expert and its gate.
      {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
      {"mlp.gate.weight", "ffn_gate_inp.weight"},
      {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
      {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
      {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
      {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
      // Experts as transformers 5 may save them, three-dimensional: down_proj [E, dim, ff] is
      // ffn_down_exps as it stands; gate_up_proj [E, 2 ff, dim] splits (split_gate_up_experts).
      {"mlp.experts.down_proj", "ffn_down_exps.weight"},
      {"mlp.experts.gate_up_proj", "ffn_gate_up_exps.weight"}};
  static const std::pair<const char*, const char*> gemma_parts[] = {
      {"post_attention_layernorm.weight", "post_attention_norm.weight"},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"}};
  if (arch == Arch::Gemma2 || arch == Arch::Gemma3)
    for (auto [from, to] : gemma_parts)
      if (m[2] == from) return fmt::format("blk.{}.{}", m[1].str(), to);
  for (auto [from, to] : parts)
    if (m[2] == from) return fmt::format("blk.{}.{}", m[1].str(), to);
  return "";
}

// A checkpoint's expert matrix: its stacked GGUF name (the matrices of every expert of the
// layer, ffn_gate_exps / ffn_up_exps / ffn_down_exps) and the expert's index. Mixtral:
// block_sparse_moe.experts.E.w1 / w3 / w2 (gate / up / down); Qwen3-MoE and Qwen2-MoE:
// mlp.experts.E.gate_proj / up_proj / down_proj.
struct ExpertPart {
  std::string stacked;
  uint64_t expert = 0;
};
std::optional<ExpertPart> expert_part(const std::string& hf) {
  static const std::regex expert(R"(model\.layers\.(\d+)\.(?:block_sparse_moe|mlp)\.experts\.(\d+)\.(\w+)\.weight)");
  static const std::pair<const char*, const char*> kinds[] = {
      {"w1", "ffn_gate_exps"}, {"w3", "ffn_up_exps"}, {"w2", "ffn_down_exps"},
      {"gate_proj", "ffn_gate_exps"}, {"up_proj", "ffn_up_exps"}, {"down_proj", "ffn_down_exps"}};
  std::smatch m;
  if (!std::regex_match(hf, m, expert) || m[2].length() > 9) return std::nullopt;
  for (auto [from, to] : kinds)
    if (m[3] == from) return ExpertPart{fmt::format("blk.{}.{}.weight", m[1].str(), to), std::stoull(m[2].str())};
  return std::nullopt;
}

// The experts' matrices of each stacked name as one view {k, n, n_experts} (WeightView::stacked):
// every expert 0 .. n_experts - 1 present once, all of one type and shape.
void stack_experts(ModelFile& mf, std::map<std::string, std::map<uint64_t, WeightView>>& parts) {
  const uint32_t n_experts = mf.config.n_experts;
  for (auto& [name, experts] : parts) {
    const std::vector<uint64_t> dims = experts.begin()->second.dims;  // copied: the views move below
    const GgmlType type = experts.begin()->second.type;
    if (n_experts == 0 || experts.size() != n_experts || experts.rbegin()->first != n_experts - 1)
      throw ModelError(fmt::format("{}: the checkpoint holds {} experts' matrices for '{}' (indices {} to {}), the "
                                   "config {} experts (hint: the checkpoint is incomplete or its config.json is of "
                                   "another model)", mf.path, experts.size(), name, experts.begin()->first,
                                   experts.rbegin()->first, n_experts));
    WeightView w;
    w.name = name;
    w.type = type;
    for (auto& [e, v] : experts) {
      if (v.dims.size() != 2 || v.dims != dims || v.type != type)
        throw ModelError(fmt::format("{}: expert {} of '{}' has shape {} ({}), expert {} {} ({}) (hint: every expert "
                                     "of a layer has one shape and type)", mf.path, e, name, dims_str(v.dims),
                                     ggml_type_name(uint32_t(v.type)), experts.begin()->first, dims_str(dims),
                                     ggml_type_name(uint32_t(type))));
      w.n_bytes += v.n_bytes;
      w.stacked.push_back(std::move(v));
    }
    w.dims = {dims[0], dims[1], n_experts};
    mf.weights.emplace(name, std::move(w));
  }
}

// A checkpoint's gate_up_proj {dim, 2 ff, E} (each expert's ff gate rows, then its ff up rows)
// as ffn_gate_exps and ffn_up_exps {dim, ff, E}, each expert's rows a view of the same bytes.
void split_gate_up_experts(ModelFile& mf) {
  std::vector<std::string> fused;  // collected first: splitting changes the map
  for (const auto& [name, w] : mf.weights)
    if (name.starts_with("blk.") && name.ends_with(".ffn_gate_up_exps.weight")) fused.push_back(name);
  for (const std::string& name : fused) {
    const WeightView w = mf.weights.at(name);
    const std::string p = name.substr(0, name.size() - std::string("ffn_gate_up_exps.weight").size());
    if (w.dims.size() != 3 || w.dims[1] % 2 || w.dims[1] == 0 || w.dims[2] == 0)
      throw ModelError(fmt::format("{}: tensor '{}' has shape {}, expected {{dim, 2 ff, experts}} (hint: the "
                                   "checkpoint is corrupt)", mf.path, name, dims_str(w.dims)));
    const uint64_t ff = w.dims[1] / 2, half_bytes = w.n_bytes / w.dims[2] / 2;
    mf.weights.erase(name);
    for (const auto& [part, first] : {std::pair{"ffn_gate_exps.weight", 0}, std::pair{"ffn_up_exps.weight", 1}}) {
      WeightView v;
      v.name = p + part;
      v.type = w.type;
      v.dims = {w.dims[0], ff, w.dims[2]};
      v.n_bytes = w.n_bytes / 2;
      for (uint64_t e = 0; e < w.dims[2]; ++e) {
        WeightView expert = w;
        expert.name = fmt::format("{}[{}]", v.name, e);
        expert.dims = {w.dims[0], ff};
        expert.data = w.data + (2 * e + first) * half_bytes;
        expert.n_bytes = half_bytes;
        v.stacked.push_back(std::move(expert));
      }
      if (!mf.weights.emplace(v.name, std::move(v)).second)
        throw ModelError(fmt::format("{}: the checkpoint has both '{}' and a gate_up_proj that holds it (hint: the "
                                     "checkpoint holds one weight twice)", mf.path, p + part));
    }
  }
}

// Qwen2-MoE's shared expert gate is one row: [1, dim] in checkpoints and some GGUF files, a
// [dim] vector in others. It becomes the vector the builder reads (the same bytes).
void squeeze_shared_gates(ModelFile& mf) {
  for (auto& [name, w] : mf.weights)
    if (name.ends_with(".ffn_gate_inp_shexp.weight") && w.dims.size() == 2 && w.dims[1] == 1) w.dims.pop_back();
}

// Replaces weight `name` (rows = the sum of parts' rows; a vector or a matrix [rows, k]) by
// views of its consecutive row ranges named `parts`. GGUF and safetensors rows are contiguous
// whole blocks, so a view is an offset into the same mapped bytes.
void split_rows(ModelFile& mf, const std::string& name, const std::vector<std::pair<std::string, uint64_t>>& parts) {
  auto it = mf.weights.find(name);
  if (it == mf.weights.end()) return;
  const WeightView w = it->second;
  uint64_t total = 0;
  for (const auto& [part, rows] : parts) total += rows;
  const uint64_t rows = w.dims.empty() ? 0 : w.dims.back();
  if (w.dims.empty() || w.dims.size() > 2 || rows != total || rows == 0 || w.n_bytes % rows)
    throw ModelError(fmt::format("{}: tensor '{}' has shape {}, expected {} rows from the model's config (the "
                                 "fused parts' rows) (hint: the file is of another shape than its metadata says)",
                                 mf.path, name, dims_str(w.dims), total));
  const uint64_t row_bytes = w.n_bytes / rows;
  mf.weights.erase(it);
  uint64_t first = 0;
  for (const auto& [part, n] : parts) {
    WeightView v = w;
    v.name = part;
    v.dims.back() = n;
    v.data = w.data + first * row_bytes;
    v.n_bytes = n * row_bytes;
    first += n;
    if (!mf.weights.emplace(part, std::move(v)).second)
      throw ModelError(fmt::format("{}: the file has both '{}' and '{}', which holds it (hint: the file is corrupt)",
                                   mf.path, part, name));
  }
}

// Weights a file stores fused become views under the names the layers read: phi3's attn_qkv
// (q|k|v rows) and its ffn_up of 2 ff rows (gate, then up) where the file has no ffn_gate. The
// forward plan fuses them again wherever one kernel takes them together (model/plan.h). The
// file's own tensors are walked, never the config's layer count (a hostile file may claim
// billions of layers).
void split_fused_weights(ModelFile& mf) {
  const ModelConfig& c = mf.config;
  const uint64_t q = uint64_t(c.n_heads) * c.head_dim, kv = uint64_t(c.n_kv_heads) * c.head_dim;
  std::vector<std::string> fused;  // collected first: splitting changes the map
  for (const auto& [name, w] : mf.weights)
    if (name.starts_with("blk.") && (name.ends_with(".attn_qkv.weight") || name.ends_with(".attn_qkv.bias") ||
                                     name.ends_with(".ffn_up.weight")))
      fused.push_back(name);
  for (const std::string& name : fused) {
    const std::string p = name.substr(0, name.find('.', 4) + 1);  // "blk.N."
    if (name.ends_with(".ffn_up.weight")) {
      const WeightView& up = mf.weights.at(name);
      if (!find_weight(mf, p + "ffn_gate.weight") && up.dims.size() == 2 && up.dims[1] == 2 * uint64_t(c.ff))
        split_rows(mf, name, {{p + "ffn_gate.weight", c.ff}, {p + "ffn_up.weight", c.ff}});
      continue;
    }
    const std::string kind = name.ends_with(".weight") ? "weight" : "bias";
    split_rows(mf, name, {{fmt::format("{}attn_q.{}", p, kind), q}, {fmt::format("{}attn_k.{}", p, kind), kv},
                          {fmt::format("{}attn_v.{}", p, kind), kv}});
  }
}

ModelFile open_hf_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  ModelFile mf;
  mf.path = dir;
  fs::path cfg = fs::path(dir) / "config.json";
  std::ifstream in(cfg);
  if (!in)
    throw ModelError(fmt::format("{}: no config.json (hint: -m takes a .gguf file or a Hugging Face model "
                                 "directory)", dir));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw ModelError(fmt::format("{}: does not parse: {} (hint: the file is corrupt)", cfg.string(), e.what()));
  }
  mf.config = config_from_hf(j, cfg.string());
  // A sentence-transformers model's pooling module.
  if (const fs::path pool = fs::path(dir) / "1_Pooling" / "config.json"; fs::exists(pool)) {
    std::ifstream pin(pool);
    nlohmann::json pj;
    try {
      pj = nlohmann::json::parse(pin);
    } catch (const nlohmann::json::exception& e) {
      throw ModelError(fmt::format("{}: does not parse: {} (hint: the file is corrupt)", pool.string(), e.what()));
    }
    mf.config.pooling = pooling_from_sentence_transformers(pj, pool.string());
    mf.config.pooling_declared = true;
  }
  mf.checkpoint = open_safetensors_dir(dir);
  std::map<std::string, std::string, std::less<>> source;  // weight name -> checkpoint name
  std::map<std::string, std::map<uint64_t, WeightView>> experts;  // stacked name -> expert -> matrix
  for (const StTensor& t : mf.checkpoint->tensors) {
    // A name wgrt does not map keeps its own, so the loader's every-tensor check names it;
    // rotary tables some checkpoints carry are recomputed, not read.
    std::string name = gguf_name(t.name, mf.config.arch);
    if (name.empty() && t.name.ends_with("rotary_emb.inv_freq")) continue;
    const std::optional<ExpertPart> part = mf.config.n_experts ? expert_part(t.name) : std::nullopt;
    if (name.empty()) name = part ? fmt::format("{}[{}]", part->stacked, part->expert) : t.name;
    WeightView w;
    w.name = name;
    w.type = t.dtype == StDtype::F32 ? GgmlType::F32 : t.dtype == StDtype::F16 ? GgmlType::F16 : GgmlType::BF16;
    w.dims.assign(t.shape.rbegin(), t.shape.rend());
    w.data = t.data;
    w.n_bytes = t.n_bytes;
    // Two checkpoint names that map to one (a Hugging Face name and its GGUF name, say)
    // would leave one of them silently unread.
    if (auto [it, fresh] = source.try_emplace(name, t.name); !fresh)
      throw ModelError(fmt::format("{}: tensors '{}' and '{}' both load as '{}' (hint: the checkpoint holds one weight "
                                   "twice under different names)", t.file, it->second, t.name, name));
    if (part) experts[part->stacked].emplace(part->expert, std::move(w));
    else mf.weights.emplace(name, std::move(w));
  }
  for (const auto& [name, parts] : experts)
    if (source.count(name))
      throw ModelError(fmt::format("{}: the checkpoint holds '{}' both stacked and as one matrix per expert (hint: the "
                                   "checkpoint holds one weight twice)", dir, name));
  stack_experts(mf, experts);
  split_gate_up_experts(mf);
  squeeze_shared_gates(mf);
  split_fused_weights(mf);
  fs::path tok = fs::path(dir) / "tokenizer.json";
  if (fs::exists(tok)) mf.tokenizer_json = tok.string();
  return mf;
}

ModelFile from_gguf(GgufFile f) {
  ModelFile mf;
  mf.path = f.path;
  mf.gguf = std::move(f);
  mf.config = config_from_gguf(*mf.gguf);
  for (const GgufTensorInfo& t : mf.gguf->tensors) {
    WeightView w;
    w.name = t.name;
    w.type = t.type;
    w.dims = t.dims;
    w.data = t.data;
    w.n_bytes = t.n_bytes;
    mf.weights.emplace(t.name, std::move(w));
  }
  squeeze_shared_gates(mf);
  split_fused_weights(mf);
  return mf;
}

}  // namespace

ModelFile open_model(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) return open_hf_dir(path);
  if (!fs::exists(path))
    throw ModelError(fmt::format("{}: no such file or directory (hint: -m takes a .gguf file or a Hugging "
                                 "Face model directory)", path));
  return from_gguf(open_gguf(path));
}

ModelFile open_gguf_bytes(std::vector<uint8_t> bytes, const std::string& name) {
  auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  ModelFile mf = from_gguf(parse_gguf(*owned, name));
  mf.bytes = std::move(owned);
  return mf;
}

const WeightView* find_weight(const ModelFile& m, const std::string& name) {
  auto it = m.weights.find(name);
  return it == m.weights.end() ? nullptr : &it->second;
}

const WeightView& get_weight(const ModelFile& m, const std::string& name, const std::vector<uint64_t>& dims) {
  const WeightView* w = find_weight(m, name);
  if (!w)
    throw ModelError(fmt::format("{}: tensor '{}' is missing (hint: the file is incomplete or of another "
                                 "architecture than '{}')", m.path, name, arch_name(m.config.arch)));
  const GgmlTypeInfo* info = ggml_type_info(uint32_t(w->type));
  if (!info || !info->supported)
    throw ModelError(fmt::format("{}: tensor '{}' has type {}, which wgrt does not load (hint: use F32, F16, "
                                 "BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL or "
                                 "IQ4_XS)",
                                 m.path, name, ggml_type_name(uint32_t(w->type))));
  if (w->dims != dims)
    throw ModelError(fmt::format("{}: tensor '{}' has shape {}, expected {} from the model's config (GGUF "
                                 "order, fastest dim first)", m.path, name, dims_str(w->dims), dims_str(dims)));
  return *w;
}

std::vector<float> weight_to_f32(const WeightView& w) {
  std::vector<float> out(w.n_elements());
  if (w.stacked.empty()) {
    dequantize(w.type, w.data, out.data(), out.size());
    return out;
  }
  size_t at = 0;
  for (const WeightView& part : w.stacked) {
    const size_t n = part.n_elements();
    if (at + n > out.size()) throw std::logic_error(fmt::format("weight '{}': its parts outgrow its shape", w.name));
    dequantize(part.type, part.data, out.data() + at, n);
    at += n;
  }
  return out;
}

}  // namespace wgrt::model
