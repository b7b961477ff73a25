// Plain timings, for users without counters: the JSON of
// scripts/sdpa_peer.py and a CSV with shape columns and time_s (a call per
// row, with its shape; docs/reconcile.md "Plain timings").
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "hbmscope/error.hpp"
#include "../report/json_check.hpp"
#include "csv_stream.hpp"
#include "ncu_values.hpp"

namespace hbmscope {

using importing::shown;

namespace {

std::optional<KernelRole> kind_word(std::string_view k) {
  if (k == "standard" || k == "math") return KernelRole::gemm;
  if (k == "flash" || k == "flash_fwd" || k == "cudnn" || k == "efficient") return KernelRole::flash_fwd;
  if (k == "flash_bwd") return KernelRole::flash_bwd;
  if (k == "split_kv" || k == "decode") return KernelRole::split_kv;
  if (k == "floor") return KernelRole::floor;
  return std::nullopt;
}

KernelRole call_role(std::optional<KernelRole> r) {
  if (!r) return KernelRole::flash_fwd;
  switch (*r) {
    case KernelRole::flash_fwd:
    case KernelRole::flash_bwd:
    case KernelRole::split_kv:
    case KernelRole::floor:
    case KernelRole::gemm: return *r;
    case KernelRole::softmax:
    case KernelRole::elementwise: return KernelRole::gemm;
    case KernelRole::split_kv_combine: return KernelRole::split_kv;
    default: return KernelRole::flash_fwd;
  }
}

std::uint64_t csv_u64(const std::string& v, const std::string& where, const std::string& col) {
  if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
    throw Error(where + ": column '" + col + "': " + shown(v) + " is not a whole number");
  return std::stoull(v);
}

}  // namespace

void read_timings_csv(const ByteSource& read, std::string_view origin, const KernelTable& table, LaunchStream& out) {
  using namespace importing;
  CsvStream in(read, origin);
  out.format = "timings-csv";
  const std::size_t before = out.launches.size();
  std::vector<std::string> f;
  bool complete = false;
  std::size_t at = 0;
  // The header: the first line that is not blank or a # comment.
  std::map<std::string, std::size_t> col;
  std::size_t width = 0;
  while (true) {
    if (in.peek() == '#') {
      std::string skip;
      in.next_line(skip);
      continue;
    }
    if (!in.next_record(f, complete, at)) throw Error(std::string(origin) + ": empty timings CSV");
    if (f.size() == 1 && f[0].empty()) continue;
    static const char* known[] = {"batch", "heads", "kv_heads", "seq_q", "seq",  "seq_kv", "head_dim",
                                  "d", "dtype", "causal", "pass", "time_s", "dram_bytes_read",
                                  "dram_bytes_write", "kernel"};
    for (std::size_t i = 0; i < f.size(); ++i) {
      bool ok = false;
      for (const char* k : known) ok = ok || f[i] == k;
      if (!ok)
        throw Error(in.where(at) + ": unknown column " + shown(f[i]) +
                    " (known: batch, heads, kv_heads, seq_q, seq_kv, head_dim, dtype, causal, pass, time_s, "
                    "dram_bytes_read, dram_bytes_write, kernel)");
      std::string name = f[i] == "seq" ? "seq_q" : f[i] == "d" ? "head_dim" : f[i];
      if (!col.emplace(name, i).second) throw Error(in.where(at) + ": duplicate column " + shown(f[i]));
    }
    width = f.size();
    break;
  }
  for (const char* need : {"seq_q", "head_dim", "time_s"})
    if (!col.count(need)) throw Error(in.where(at) + ": the timings CSV needs a '" + need + "' column");
  const std::size_t header_line = at;
  while (in.next_record(f, complete, at)) {
    const std::string where = in.where(at);
    if (f.size() == 1 && f[0].empty()) continue;
    if (f.size() != width)
      throw Error(where + ": " + std::to_string(f.size()) + " fields, the header has " + std::to_string(width) +
                  (complete ? "" : " (truncated?)"));
    auto get = [&](const char* k) { return col.count(k) ? f[col[k]] : std::string(); };
    MeasuredLaunch l;
    l.origin = where;
    l.id = std::to_string(out.launches.size() - before + 1);
    Shape s;
    s.seq_q = csv_u64(get("seq_q"), where, "seq_q");
    s.head_dim = csv_u64(get("head_dim"), where, "head_dim");
    s.seq_kv = col.count("seq_kv") ? csv_u64(get("seq_kv"), where, "seq_kv") : s.seq_q;
    s.batch = col.count("batch") ? csv_u64(get("batch"), where, "batch") : 1;
    s.heads = col.count("heads") ? csv_u64(get("heads"), where, "heads") : 1;
    s.kv_heads = col.count("kv_heads") ? csv_u64(get("kv_heads"), where, "kv_heads") : s.heads;
    if (col.count("dtype")) {
      const auto d = parse_dtype(get("dtype"));
      if (!d) throw Error(where + ": column 'dtype': " + shown(get("dtype")) + " is not fp32, fp16, bf16 or fp8");
      s.dtype = *d;
    }
    if (col.count("causal")) {
      const std::string c = get("causal");
      if (c != "0" && c != "1" && c != "true" && c != "false")
        throw Error(where + ": column 'causal': " + shown(c) + " is not 0, 1, true or false");
      s.causal = c == "1" || c == "true";
    }
    if (col.count("pass")) {
      const auto p = parse_pass(get("pass"));
      if (!p || *p == Pass::fwdbwd) throw Error(where + ": column 'pass': " + shown(get("pass")) + " is not fwd or bwd");
      s.pass = *p;
    }
    try {
      validate(s);
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
    l.shape = s;
    LaunchValues values;
    values.add({Metric::time, 1}, "second", get("time_s"), where, "time_s");
    if (col.count("dram_bytes_read")) values.add({Metric::read, 1}, "byte", get("dram_bytes_read"), where, "dram_bytes_read");
    if (col.count("dram_bytes_write"))
      values.add({Metric::write, 1}, "byte", get("dram_bytes_write"), where, "dram_bytes_write");
    values.finish(l, DecimalMark::point);
    if (!l.seconds || *l.seconds <= 0) throw Error(where + ": column 'time_s': " + shown(get("time_s")) + " is not a positive time");
    l.kernel = get("kernel");
    std::optional<KernelRole> role;
    if (!l.kernel.empty()) {
      role = kind_word(l.kernel);
      if (!role)
        if (const auto* p = classify(table, l.kernel)) role = p->role;
    } else {
      l.kernel = "timings row " + l.id;
    }
    if (s.pass == Pass::bwd && (!role || *role == KernelRole::flash_fwd)) role = KernelRole::flash_bwd;
    l.whole_call = call_role(role);
    out.add(std::move(l));
  }
  if (out.launches.size() == before) throw Error(in.where(header_line) + ": a header and no timing rows after it");
}

void read_timings_json(std::string_view text, std::string_view origin, LaunchStream& out) {
  namespace jc = json_check;
  const nlohmann::json j = jc::parse_json_text(text, origin);
  if (!j.is_object()) jc::fail(origin, "(top level)", "an object (the JSON of scripts/sdpa_peer.py)", j);
  if (!j.contains("results") || !j["results"].is_array())
    jc::fail(origin, "results", "an array (the JSON of scripts/sdpa_peer.py)", j.value("results", nlohmann::json()));
  out.format = "timings-json";
  const std::size_t before = out.launches.size();
  std::size_t skipped = 0;
  const auto& rs = j["results"];
  for (std::size_t i = 0; i < rs.size(); ++i) {
    const std::string k = "results[" + std::to_string(i) + "]";
    const auto& r = rs[i];
    if (!r.is_object()) jc::fail(origin, k, "an object", r);
    if (r.contains("status") && !r["status"].is_string()) jc::fail(origin, k + ".status", "a string", r["status"]);
    if (r.value("status", std::string("ok")) != "ok") {
      ++skipped;
      continue;
    }
    auto u64 = [&](const char* key, std::optional<std::uint64_t> dflt) -> std::uint64_t {
      if (!r.contains(key)) {
        if (dflt) return *dflt;
        jc::fail_text(origin, k + "." + key, "missing");
      }
      if (!r[key].is_number_unsigned()) jc::fail(origin, k + "." + key, "a non-negative integer", r[key]);
      return r[key].get<std::uint64_t>();
    };
    Shape s;
    s.batch = u64("batch", 1);
    s.heads = u64("heads", 1);
    s.kv_heads = u64("kv_heads", s.heads);
    s.seq_q = u64("seq", std::nullopt);
    s.seq_kv = u64("seq_kv", s.seq_q);
    s.head_dim = u64("head_dim", std::nullopt);
    if (r.contains("causal")) {
      if (!r["causal"].is_boolean()) jc::fail(origin, k + ".causal", "true or false", r["causal"]);
      s.causal = r["causal"].get<bool>();
    }
    if (r.contains("dtype")) {
      const auto d = r["dtype"].is_string() ? parse_dtype(r["dtype"].get<std::string>()) : std::nullopt;
      if (!d) jc::fail(origin, k + ".dtype", "fp32, fp16, bf16 or fp8", r["dtype"]);
      s.dtype = *d;
    }
    try {
      validate(s);
    } catch (const Error& e) {
      jc::fail_text(origin, k, e.what());
    }
    if (!r.contains("median_s") || !r["median_s"].is_number() || !(r["median_s"].get<double>() > 0) ||
        !std::isfinite(r["median_s"].get<double>()))
      jc::fail(origin, k + ".median_s", "a positive number of seconds", r.value("median_s", nlohmann::json()));
    std::string backend = "sdpa";
    if (r.contains("backend")) {
      if (!r["backend"].is_string()) jc::fail(origin, k + ".backend", "a string", r["backend"]);
      backend = r["backend"].get<std::string>();
    }
    jc::require_printable(origin, k + ".backend", backend);
    MeasuredLaunch l;
    l.origin = std::string(origin) + ":" + k;
    l.id = std::to_string(i + 1);
    l.kernel = "sdpa " + backend;
    l.shape = s;
    l.seconds = r["median_s"].get<double>();
    l.time_from = TimeSource::duration;
    l.whole_call = backend == "math" ? KernelRole::gemm : KernelRole::flash_fwd;
    out.add(std::move(l));
  }
  if (skipped) out.notes.push_back(std::string(origin) + ": " + std::to_string(skipped) + " skipped result(s) left out");
  if (out.launches.size() == before) throw Error(std::string(origin) + ": no results with status \"ok\"");
}

LaunchStream read_timings_json(std::string_view text, std::string_view origin) {
  LaunchStream s;
  read_timings_json(text, origin, s);
  return s;
}

}  // namespace hbmscope
