// NVTX range names that give a call its shape (docs/reconcile.md, "Shapes"):
// "hbmscope:" and KEY=VALUE items, the keys the shape options' fields.
#include <map>
#include <string>
#include <vector>

#include "hbmscope/decode.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/reconcile.hpp"

namespace hbmscope {

namespace {

const char* const known_keys =
    "seq, seq_kv, d, heads, kv_heads, batch, causal, dtype, pass, block_rows, block_cols, window, chunk, head_dim_v, "
    "kv_dtype, mla, seq_lens, decode, context_lengths, splits, page_size";

[[noreturn]] void bad(std::string_view key, std::string_view v, const char* what) {
  throw Error("NVTX range: " + std::string(key) + "='" + std::string(v.substr(0, 40)) + "' " + what);
}

// A decimal integer of an NVTX key; Error names the key.
std::uint64_t number(std::string_view key, std::string_view v) {
  if (v.empty() || v.size() > 19) bad(key, v, "is not a number");
  std::uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') bad(key, v, "is not a number");
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

bool flag(std::string_view key, std::string_view v) {
  if (v != "0" && v != "1") bad(key, v, "is not 0 or 1");
  return v == "1";
}

Dtype dtype(std::string_view key, std::string_view v) {
  const auto d = parse_dtype(v);
  if (!d) bad(key, v, "is not fp32, fp16, bf16 or fp8");
  return *d;
}

// "512;4096;128:4096": items separated by ';', each L or Q:KV (kv only when
// `kv_only`, for context lengths).
std::vector<SeqLen> seq_items(std::string_view key, std::string_view v, bool kv_only) {
  std::vector<SeqLen> items;
  if (v.empty()) bad(key, v, "is an empty list");
  while (!v.empty()) {
    const std::size_t semi = std::min(v.find(';'), v.size());
    const std::string_view item = v.substr(0, semi);
    v = semi < v.size() ? v.substr(semi + 1) : std::string_view{};
    if (items.size() >= max_context_lengths) bad(key, item, "makes the list too long");
    const std::size_t colon = item.find(':');
    if (colon != std::string_view::npos) {
      if (kv_only) bad(key, item, "is not a length (no Q:KV here)");
      items.push_back({number(key, item.substr(0, colon)), number(key, item.substr(colon + 1))});
    } else {
      const std::uint64_t n = number(key, item);
      items.push_back({kv_only ? 0 : n, n});
    }
  }
  return items;
}

}  // namespace

Shape parse_nvtx_shape(std::string_view text, Dtype default_dtype) {
  const std::size_t at = text.rfind("hbmscope:");
  if (at == std::string_view::npos)
    throw Error("NVTX range '" + std::string(text.substr(0, 60)) + "' has no 'hbmscope:'");
  std::string_view body = text.substr(at + 9);
  Shape s;
  s.dtype = default_dtype;
  std::map<std::string, std::string_view> given;
  while (!body.empty()) {
    const std::size_t comma = std::min(body.find(','), body.size());
    std::string_view item = body.substr(0, comma);
    body = comma < body.size() ? body.substr(comma + 1) : std::string_view{};
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      throw Error("NVTX range: '" + std::string(item.substr(0, 40)) + "' is not KEY=VALUE");
    std::string key(item.substr(0, eq));
    if (key == "seq_q") key = "seq";
    if (key == "head_dim") key = "d";
    if (key == "dv") key = "head_dim_v";
    if (key == "latent_kv") key = "mla";
    if (given.count(key)) throw Error("NVTX range: " + key + " given twice");
    given[key] = item.substr(eq + 1);
  }
  auto has = [&](const char* k) { return given.count(k) > 0; };
  for (const auto& [k, v] : given) {
    if (k == "seq") s.seq_q = number(k, v);
    else if (k == "seq_kv") s.seq_kv = number(k, v);
    else if (k == "d") s.head_dim = number(k, v);
    else if (k == "heads") s.heads = number(k, v);
    else if (k == "kv_heads") s.kv_heads = number(k, v);
    else if (k == "batch") s.batch = number(k, v);
    else if (k == "causal") s.causal = flag(k, v);
    else if (k == "dtype") s.dtype = dtype(k, v);
    else if (k == "pass") {
      const auto p = parse_pass(v);
      if (!p) bad(k, v, "is not fwd, bwd or fwdbwd");
      s.pass = *p;
    } else if (k == "block_rows") s.block_rows = number(k, v);
    else if (k == "block_cols") s.block_cols = number(k, v);
    else if (k == "window") s.window = number(k, v);
    else if (k == "chunk") s.chunk = number(k, v);
    else if (k == "head_dim_v") s.head_dim_v = number(k, v);
    else if (k == "kv_dtype") s.kv_dtype = dtype(k, v);
    else if (k == "mla") s.latent_kv = flag(k, v);
    else if (k == "decode") s.decode = flag(k, v);
    else if (k == "splits") s.splits = number(k, v);
    else if (k == "page_size") s.page_size = number(k, v);
    else if (k == "seq_lens") s.seq_lens = SeqList(seq_items(k, v, false));
    else if (k == "context_lengths") s.context_lengths = SeqList(seq_items(k, v, true));
    else throw Error("NVTX range: unknown key '" + k + "' (known: " + known_keys + ")");
  }
  // A ragged batch gives the batch and the longest sequence.
  if (!s.seq_lens.empty()) {
    if (!has("batch")) s.batch = s.seq_lens.size();
    if (!has("seq")) s.seq_q = s.seq_lens.max_q();
    if (!has("seq_kv")) s.seq_kv = s.seq_lens.max_kv();
  }
  if (!s.context_lengths.empty()) {
    s.decode = true;
    if (!has("batch")) s.batch = s.context_lengths.size();
    if (!has("seq_kv")) s.seq_kv = s.context_lengths.max_kv();
  }
  const bool seq_known =
      has("seq") || !s.seq_lens.empty() || (s.decode && (has("seq_kv") || !s.context_lengths.empty()));
  if (s.decode && !has("seq")) s.seq_q = 1;
  if (!seq_known || !has("d"))
    throw Error("NVTX range '" + std::string(text.substr(0, 60)) + "': seq= and d= are required");
  if (!has("seq_kv") && s.seq_lens.empty() && s.context_lengths.empty()) s.seq_kv = s.seq_q;
  if (!has("heads")) s.heads = 1;
  if (!has("kv_heads")) s.kv_heads = s.latent_kv ? 1 : s.heads;
  validate(s);
  return s;
}

}  // namespace hbmscope
