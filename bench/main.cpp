// hbmscope_bench: speed of the model's parts, printed as a table. Not a test:
// timings depend on the machine. To add a row, write a function returning a
// Result and append it to `cases` in main() (the L2 simulation's long
// contexts: bench/l2_runs.cpp).
#include <chrono>
#include <ctime>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <fstream>

#include "hbmscope/compare.hpp"
#include "hbmscope/decode.hpp"
#include "hbmscope/json_report.hpp"
#include "hbmscope/l2_sim.hpp"
#include "hbmscope/device_config.hpp"
#include "hbmscope/roofline.hpp"
#include "../src/report/json_check.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/reference.hpp"
#include "hbmscope/sweep.hpp"
#include "hbmscope/tile_walk.hpp"
#include "bench.hpp"

using namespace hbmscope;
using namespace hbmscope_bench;

namespace {

using Clock = std::chrono::steady_clock;

// Repeats f until at least min_s has passed; returns seconds per call.
template <class F>
double time_per_call(F&& f, double min_s = 0.3) {
  f();  // warm up
  int calls = 0;
  const auto t0 = Clock::now();
  double el = 0;
  do {
    f();
    ++calls;
    el = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (el < min_s);
  return el / calls;
}

// As time_per_call, in processor time (all threads): the report-reading rows
// use it, so that a machine shared with other jobs does not decide them.
template <class F>
double cpu_per_call(F&& f, double min_s = 0.3) {
  f();
  int calls = 0;
  const std::clock_t c0 = std::clock();
  double el = 0;
  do {
    f();
    ++calls;
    el = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  } while (el < min_s);
  return el / calls;
}

volatile std::uint64_t sink = 0;  // keeps results alive

std::vector<Shape> bench_shapes() {
  std::vector<Shape> shapes;
  shapes.reserve(100000);
  for (std::uint64_t i = 0; shapes.size() < 100000; ++i) {
    Shape s;
    s.seq_q = 128 + (i * 7919) % 262144;
    s.seq_kv = (i % 3 == 0) ? s.seq_q + (i % 1000) : s.seq_q;
    s.head_dim = (i % 2) ? 128 : 64;
    s.heads = 32;
    s.kv_heads = (i % 4) ? 8 : 32;
    s.batch = 1 + i % 4;
    s.causal = i % 2 == 0;
    shapes.push_back(s);
  }
  return shapes;
}

Result closed_form_model() {
  const std::vector<Shape> shapes = bench_shapes();
  const double t = time_per_call([&] {
    std::uint64_t acc = 0;
    for (const Shape& s : shapes) {
      const ModelBytes m = evaluate(s);
      acc += m.standard ^ m.flash_no_l2 ^ m.floor ^ m.flops;
    }
    sink = sink + acc;
  });
  const double rate = 1e5 / t;
  return {"100000 shapes (causal and not, GQA, Nq != Nkv)", t, 1e5, "shapes", ">= 1e5 shapes/s", rate >= 1e5};
}

Result sweep_rows() {
  const std::vector<Shape> shapes = bench_shapes();
  const double t = time_per_call([&] { sink = sink + model_rows(shapes).size(); });
  const double rate = 1e5 / t;
  return {"model_rows: 100000 rows with three variants each", t, 1e5, "rows", ">= 1e5 rows/s", rate >= 1e5};
}

// Attention as served at long context: windows, chunks that divide the key
// blocks and chunks that do not (the slowest sums, about sqrt(N) steps), DV and
// an fp8 cache, every pass; each shape of one sequence of up to 1M tokens.
Result served_shapes() {
  std::vector<Shape> shapes;
  for (std::uint64_t n : {std::uint64_t{1} << 17, std::uint64_t{1} << 19, std::uint64_t{1} << 20})
    for (std::uint64_t k = 0; k < 100; ++k)
      for (Pass p : {Pass::fwd, Pass::bwd}) {
        Shape s;
        s.seq_q = n - 977 * k;
        s.seq_kv = n;
        s.heads = 32;
        s.kv_heads = 8;
        s.head_dim = 128;
        s.head_dim_v = k % 3 == 0 ? 64 : 0;
        if (k % 2) s.kv_dtype = Dtype::fp8;
        s.causal = true;
        s.block_rows = 128;
        s.block_cols = 64 + k % 5;
        if (k % 4 == 0) s.window = 4096 + 7 * k;
        else if (k % 4 == 1) s.chunk = 8192;
        else s.chunk = 8191 - 13 * k;  // neither a multiple nor a divisor of Bc
        s.pass = p;
        shapes.push_back(s);
      }
  const double t = time_per_call([&] {
    std::uint64_t acc = 0;
    for (const Shape& s : shapes) {
      const ModelBytes m = evaluate(s);
      acc += m.flash_no_l2 ^ m.floor ^ m.flops;
      if (s.pass == Pass::fwd) acc += flash1_no_l2_bytes(s);
    }
    sink = sink + acc;
  });
  const double rate = static_cast<double>(shapes.size()) / t;
  return {std::to_string(shapes.size()) + " windowed/chunked shapes, 128K-1M tokens", t,
          static_cast<double>(shapes.size()), "shapes", ">= 1e3 shapes/s", rate >= 1e3};
}

// A ragged prefill batch of a million sequences, 64 distinct lengths: one
// closed form per distinct item.
Result ragged_batch() {
  std::vector<SeqLen> items;
  items.reserve(1'000'000);
  for (std::uint64_t i = 0; i < 1'000'000; ++i) {
    const std::uint64_t kv = 512 * (1 + i % 64);
    items.push_back({i % 2 ? kv : kv / 2, kv});
  }
  Shape s;
  s.seq_lens = SeqList(std::move(items));
  s.batch = s.seq_lens.size();
  s.seq_q = s.seq_lens.max_q();
  s.seq_kv = s.seq_lens.max_kv();
  s.heads = 32;
  s.kv_heads = 8;
  s.head_dim = 128;
  s.causal = true;
  s.window = 4096;
  const double t = time_per_call([&] { sink = sink + evaluate(s).flash_no_l2; });
  return {"1M sequences (64 distinct), window 4096", t, 1, "batches", "<= 1 ms a batch", t <= 1e-3};
}

Result tile_walk(std::uint64_t n, bool causal) {
  static double first_rate = 0;  // the walk must stay linear: same tiles/s at every N
  Shape s;
  s.seq_q = s.seq_kv = n;
  s.head_dim = 128;
  s.causal = causal;
  WalkTotals w;
  const double t = time_per_call([&] { w = walk_totals(s); sink = sink + w.moved; }, 0.2);
  const double rate = static_cast<double>(w.tiles) / t;
  if (first_rate == 0) first_rate = rate;
  return {"N = " + std::to_string(n) + (causal ? ", causal" : "") + ": " + std::to_string(w.tiles) + " tiles",
          t, static_cast<double>(w.tiles), "tiles", "linear: tiles/s within 40% of the first walk's",
          rate > 0.6 * first_rate && rate < 1.4 * first_rate};
}

Result reference_attention(bool tiled) {
  Shape s;
  s.batch = 2;
  s.heads = s.kv_heads = 4;
  s.seq_q = s.seq_kv = 1024;
  s.head_dim = 128;
  const auto in = random_inputs(s, 1);
  std::vector<float> o(q_elements(s)), lse(lse_elements(s));
  const float scale = default_scale(s);
  const double t = time_per_call(
      [&] {
        if (tiled) attention_tiled(s, scale, in.q, in.k, in.v, o, lse);
        else attention_naive(s, scale, in.q, in.k, in.v, o, lse);
      },
      0.5);
  return {"2 x 4 heads x 1024 x 128, " + std::string(tiled ? "tiled (FA2)" : "naive"), t,
          static_cast<double>(attention_flops(s)), "FLOP", "< 1 s", t < 1.0};
}

// Issue 5's target: batch x heads = 32, N = 32768, d = 128 in under a second.
Result l2_simulation(bool flash) {
  Shape s;
  s.heads = s.kv_heads = 32;
  s.seq_q = s.seq_kv = 32768;
  s.head_dim = 128;
  L2SimConfig c;
  c.l2_bytes = 60ull << 20;
  c.sm_count = 132;
  const double accesses =
      static_cast<double>(flash ? flash_l2_sim_accesses(s) : standard_l2_sim_accesses(s));
  const double t = time_per_call(
      [&] { sink = sink + (flash ? flash_l2_sim(s, c) : standard_l2_sim(s, c)).dram_bytes; }, 0.2);
  return {std::string(flash ? "flash_l2_sim" : "standard_l2_sim") +
              ": 32 heads x 32768 x 128, 60 MiB, 132 SMs",
          t, accesses, "accesses", "< 1 s", t < 1.0};
}

// Decode: a Llama-3 70B layer at batch 64, 32K context, through each decode simulation.
Result decode_l2_simulation(DecodeVariant v) {
  Shape s;
  s.decode = true;
  s.batch = 64;
  s.heads = 64;
  s.kv_heads = 8;
  s.seq_q = 1;
  s.seq_kv = 32768;
  s.head_dim = 128;
  L2SimConfig c;
  c.l2_bytes = 60ull << 20;
  c.sm_count = 132;
  const std::uint64_t splits = decode_splits(s, v, 132);
  const double accesses = static_cast<double>(decode_l2_sim_accesses(s, v, splits));
  const double t = time_per_call([&] { sink = sink + decode_l2_sim(s, v, splits, c).dram_bytes; }, 0.2);
  return {std::string(decode_variant_id(v)) + ": batch 64, 64/8 heads, 32K x 128, 60 MiB", t, accesses,
          "accesses", "< 1 s", t < 1.0};
}

// Issue 15: reading JSON is linear. A report of 100000 rows with roofline
// predictions (about 100 MB), read as every input is (depth and repeated-key
// checks included); target 50 MB/s.
std::string bench_report_text(std::size_t rows, double scale = 1.0) {
  std::vector<Shape> shapes(bench_shapes());
  shapes.resize(rows);
  Report r;
  r.command = "sweep";
  r.rows = model_rows(shapes);
  for (Row& row : r.rows)
    for (auto& v : row.variants) v.bytes = static_cast<std::uint64_t>(static_cast<double>(v.bytes) * scale);
  add_predictions(r, find_device("h100"), 1.0);
  return report_json_text(r);
}

Result json_read() {
  const std::string text = bench_report_text(100000);
  const double t = cpu_per_call([&] { sink = sink + json_check::parse_json_text(text, "bench").size(); }, 0.2);
  const double mb = static_cast<double>(text.size()) / 1e6;
  return {"100000-row report, " + std::to_string(static_cast<int>(mb)) + " MB (CPU time)", t, static_cast<double>(text.size()),
          "B", ">= 50 MB/s", mb / t >= 50};
}

// The input that took 98 s with the callback parser: 1.8 MB of "[{},{},...]".
Result json_read_empty_objects() {
  std::string text = "[{}";
  while (text.size() < 1800000) text += ",{}";
  text += "]";
  const double t = cpu_per_call([&] { sink = sink + json_check::parse_json_text(text, "bench").size(); }, 0.2);
  return {"1.8 MB of [{},{},...] (CPU time)", t, static_cast<double>(text.size()), "B", "< 1 s", t < 1.0};
}

// compare of two 100000-row reports read from files (the streaming path), in
// processor time of both threads (each report is read on its own thread).
// Issue 15's target is 1M rows in under 30 s on this 2-core machine: 60
// core-seconds, so >= 16,667 rows per processor second (bench/report_io.sh
// measures the 1M-row run itself, wall time and memory).
Result compare_files() {
  const std::string a = "/tmp/hbmscope-bench-a-" + std::to_string(::getpid()) + ".json";
  const std::string b = "/tmp/hbmscope-bench-b-" + std::to_string(::getpid()) + ".json";
  std::ofstream(a) << bench_report_text(100000);
  std::ofstream(b) << bench_report_text(100000, 1.1);
  const double t = cpu_per_call(
      [&] {
        const Comparison c = compare_report_files(a, b, {});
        sink = sink + c.rows.size() + render_comparison(c, Format::table).size();
      },
      0.2);
  ::unlink(a.c_str());
  ::unlink(b.c_str());
  return {"2 x 100000-row reports, table output (CPU time, both threads)", t, 1e5, "rows",
          ">= 16667 rows/CPU s (1M in 30 s on 2 cores)", 1e5 / t >= 16667};
}

std::string si(double v) {
  const char* p[] = {"", "k", "M", "G", "T"};
  int i = 0;
  while (v >= 1000 && i < 4) v /= 1000, ++i;
  char b[32];
  std::snprintf(b, sizeof b, "%.3g %s", v, p[i]);
  return b;
}

// Pads to a display width (µ is one column but two bytes).
std::string pad(const std::string& s, std::size_t w, bool right) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  const std::string fill(w > n ? w - n : 0, ' ');
  return right ? fill + s : s + fill;
}

}  // namespace

std::string hbmscope_bench::secs(double s) {
  char b[32];
  if (s < 1e-3) std::snprintf(b, sizeof b, "%.3g µs", s * 1e6);
  else if (s < 1) std::snprintf(b, sizeof b, "%.3g ms", s * 1e3);
  else std::snprintf(b, sizeof b, "%.3g s", s);
  return b;
}

int main(int argc, char** argv) {
  // An argument picks the cases whose name contains it: hbmscope_bench compare
  const std::string only = argc > 1 ? argv[1] : "";
  std::vector<Case> cases = {
      {"closed-form model", closed_form_model},
      {"sweep rows", sweep_rows},
      {"served shapes", served_shapes},
      {"served shapes", ragged_batch},
      {"tile walk", [] { return tile_walk(32768, false); }},
      {"tile walk", [] { return tile_walk(65536, false); }},
      {"tile walk", [] { return tile_walk(131072, false); }},
      {"tile walk", [] { return tile_walk(131072, true); }},
      {"CPU reference attention", [] { return reference_attention(false); }},
      {"CPU reference attention", [] { return reference_attention(true); }},
      {"L2 simulation", [] { return l2_simulation(true); }},
      {"L2 simulation", [] { return l2_simulation(false); }},
      {"decode L2 simulation", [] { return decode_l2_simulation(DecodeVariant::split); }},
      {"decode L2 simulation", [] { return decode_l2_simulation(DecodeVariant::split_unpacked); }},
      {"decode L2 simulation", [] { return decode_l2_simulation(DecodeVariant::paged); }},
  };
  for (Case& c : l2_runs_cases()) cases.push_back(std::move(c));  // bench/l2_runs.cpp
  cases.push_back({"JSON read", json_read});
  cases.push_back({"JSON read", json_read_empty_objects});
  cases.push_back({"compare", compare_files});
  std::printf(
      "hbmscope_bench: time = mean wall time of one run, repeated for at least 0.2 s (L2 runs: the median of three runs "
      "in child processes); one core (the CPU reference attention uses every core)\n\n");
  std::printf("%-24s  %-58s  %10s  %18s  %s\n", "case", "work", "time", "rate", "target");
  bool all_met = true;
  for (const auto& c : cases) {
    if (c.name.find(only) == std::string::npos) continue;
    const Result r = c.run();
    all_met &= r.met;
    const std::string rate = r.seconds >= 1e8 ? std::string("-") : si(r.items / r.seconds) + r.unit + "/s";
    std::printf("%s  %s  %s  %s  %s%s%s%s\n", pad(c.name, 24, false).c_str(), pad(r.work, 58, false).c_str(),
                pad(r.seconds >= 1e8 ? std::string("-") : secs(r.seconds), 10, true).c_str(), pad(rate, 18, true).c_str(),
                r.target.c_str(), r.target.empty() ? "" : (r.met ? " (met)" : " (MISSED)"), r.beside.empty() ? "" : "; ",
                r.beside.c_str());
  }
  return all_met ? 0 : 1;
}
