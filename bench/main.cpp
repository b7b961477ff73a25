// hbmscope_bench: speed of the model's parts, printed as a table. Not a test:
// timings depend on the machine. To add a row, write a function returning a
// Result and append it to `cases` in main().
#include <chrono>
#include <ctime>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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

namespace {

using namespace hbmscope;
using Clock = std::chrono::steady_clock;

struct Result {
  std::string work;     // what one run did, e.g. "100000 shapes"
  double seconds = 0;   // wall time of one run
  double items = 0;     // items in one run, for the rate
  std::string unit;     // "shapes", "tiles", ...: rate is items/s
  std::string target;   // the goal, or empty
  bool met = true;
  std::string beside{};  // printed after the target: e.g. the enumeration's time on the same shape
};

struct Case {
  std::string name;
  std::function<Result()> run;
};

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
std::string secs(double s);

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

// Issue 20: the L2 simulation by runs on long contexts, each run once in a
// child process (its wall time and peak memory), beside the enumeration's
// time on the same shape (at most a minute; refused past its budget).
struct ChildRun {
  double seconds = -1;  // -1: refused or failed
  long peak_kb = 0;
  std::string error;
};

template <class F>
ChildRun in_child(F&& f, unsigned limit_s) {
  int fd[2];
  if (::pipe(fd) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fd[0]);
    ::alarm(limit_s);
    char buf[256];
    try {
      const auto t0 = Clock::now();
      f();
      const double t = std::chrono::duration<double>(Clock::now() - t0).count();
      std::snprintf(buf, sizeof buf, "%.6f", t);
    } catch (const std::exception& e) {
      std::snprintf(buf, sizeof buf, "E%s", e.what());
    }
    (void)!::write(fd[1], buf, std::strlen(buf));
    ::_exit(0);
  }
  ::close(fd[1]);
  char buf[256] = {};
  const ssize_t n = ::read(fd[0], buf, sizeof buf - 1);
  ::close(fd[0]);
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  ChildRun r;
  r.peak_kb = ru.ru_maxrss;
  if (n <= 0) r.error = "over " + std::to_string(limit_s) + " s";
  else if (buf[0] == 'E')
    r.error = std::strstr(buf, "work units") ? std::string("refused (over the work budget)") : std::string(buf + 1).substr(0, 60);
  else r.seconds = std::atof(buf);
  return r;
}

Result l2_runs(const std::string& what, const Shape& s, L2SimConfig c) {
  c.method = L2SimMethod::runs;
  const ChildRun r = in_child([&] { sink = sink + flash_l2_sim(s, c).dram_bytes + (s.pass == Pass::fwd ? standard_l2_sim(s, c).dram_bytes : 0); }, 120);
  c.method = L2SimMethod::enumeration;
  const ChildRun e = in_child([&] { sink = sink + flash_l2_sim(s, c).dram_bytes + (s.pass == Pass::fwd ? standard_l2_sim(s, c).dram_bytes : 0); }, 60);
  const double t = r.seconds < 0 ? 1e9 : r.seconds;
  Result out{what + (r.error.empty() ? "" : ": " + r.error), t, static_cast<double>(flash_l2_sim_accesses(s)),
             "accesses", "< 1 s and < 1 GB", r.seconds >= 0 && t < 1.0 && r.peak_kb < (1l << 20)};
  out.beside = "peak " + std::to_string(r.peak_kb / 1024) + " MB; enumeration: " +
               (e.seconds >= 0 ? secs(e.seconds) : e.error);
  return out;
}

Shape long_shape(std::uint64_t seq, std::uint64_t heads, std::uint64_t kv, std::uint64_t batch, bool causal) {
  Shape s;
  s.seq_q = s.seq_kv = seq;
  s.heads = heads;
  s.kv_heads = kv;
  s.batch = batch;
  s.head_dim = 128;
  s.causal = causal;
  return s;
}

// A training pass of `heads` query heads on 8 kv heads.
Shape training(std::uint64_t seq, std::uint64_t heads, std::uint64_t batch, bool causal, Pass pass) {
  Shape s = long_shape(seq, heads, 8, batch, causal);
  s.pass = pass;
  return s;
}

// H200: 60 MiB of L2, 132 SMs, one CTA of the d = 128 flash kernel per SM.
L2SimConfig h200(Rasterization order = Rasterization::query_block_major) {
  L2SimConfig c;
  c.order = order;
  c.l2_bytes = 60ull << 20;
  c.sm_count = 132;
  c.ctas_per_sm = 1;
  return c;
}

// 1M x 64/8 x batch 8, causal, at d = 64: twice d = 128's blocks in the L2.
Shape long_d64() {
  Shape s = long_shape(1 << 20, 64, 8, 8, true);
  s.head_dim = 64;
  return s;
}

// Another device's L2 (MiB, as the presets in configs/devices) and slots.
L2SimConfig l2_device(std::uint64_t l2_mib, std::uint32_t sms, std::uint32_t ctas_per_sm) {
  L2SimConfig c = h200();
  c.l2_bytes = l2_mib << 20;
  c.sm_count = sms;
  c.ctas_per_sm = ctas_per_sm;
  return c;
}

Result decode_runs(DecodeVariant v) {
  Shape s;
  s.decode = true;
  s.batch = 256;
  s.heads = 64;
  s.kv_heads = 8;
  s.seq_q = 1;
  s.seq_kv = 131072;
  s.head_dim = 128;
  L2SimConfig c = h200();
  c.ctas_per_sm = 2;
  const std::uint64_t splits = decode_splits(s, v, 132);
  auto run = [&](L2SimMethod m) {
    c.method = m;
    return in_child([&] { sink = sink + decode_l2_sim(s, v, splits, c).dram_bytes; }, 60);
  };
  const ChildRun r = run(L2SimMethod::runs), e = run(L2SimMethod::enumeration);
  Result out{std::string(decode_variant_id(v)) + ": batch 256, 64/8 heads, 128K x 128",
             r.seconds < 0 ? 1e9 : r.seconds, static_cast<double>(decode_l2_sim_accesses(s, v, splits)), "accesses",
             "< 1 s and < 1 GB", r.seconds >= 0 && r.seconds < 1.0 && r.peak_kb < (1l << 20)};
  out.beside = "peak " + std::to_string(r.peak_kb / 1024) + " MB; enumeration: " +
               (e.seconds >= 0 ? secs(e.seconds) : e.error);
  return out;
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

std::string secs(double s) {
  char b[32];
  if (s < 1e-3) std::snprintf(b, sizeof b, "%.3g µs", s * 1e6);
  else if (s < 1) std::snprintf(b, sizeof b, "%.3g ms", s * 1e3);
  else std::snprintf(b, sizeof b, "%.3g s", s);
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

int main(int argc, char** argv) {
  // An argument picks the cases whose name contains it: hbmscope_bench compare
  const std::string only = argc > 1 ? argv[1] : "";
  const std::vector<Case> cases = {
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
      {"L2 runs", [] { return l2_runs("1M x 64/8 heads x batch 8, GQA", long_shape(1 << 20, 64, 8, 8, false), h200()); }},
      {"L2 runs", [] { return l2_runs("1M x 64 heads x batch 8", long_shape(1 << 20, 64, 64, 8, false), h200()); }},
      {"L2 runs", [] { return l2_runs("1M x 64/8 x batch 8, head-major", long_shape(1 << 20, 64, 8, 8, false), h200(Rasterization::head_major)); }},
      {"L2 runs", [] { return l2_runs("1M x 64/8 x batch 8, causal", long_shape(1 << 20, 64, 8, 8, true), h200()); }},
      {"L2 runs", [] { return l2_runs("1M x 64/8 x batch 8, causal, head-major", long_shape(1 << 20, 64, 8, 8, true), h200(Rasterization::head_major)); }},
      {"L2 runs", [] { return l2_runs("1M x 64 heads, causal, head-major", long_shape(1 << 20, 64, 64, 1, true), h200(Rasterization::head_major)); }},
      // Without GQA (the largest distance in the heads' last CTAs), 64 x 64
      // blocks (8.4 M CTAs), and d = 64 (twice the blocks in the L2: longer
      // CTAs straddle its capacity).
      {"L2 runs", [] { return l2_runs("1M x 64 x batch 8, causal", long_shape(1 << 20, 64, 64, 8, true), h200()); }},
      {"L2 runs", [] { return l2_runs("1M x 64 x batch 8, causal, head-major", long_shape(1 << 20, 64, 64, 8, true), h200(Rasterization::head_major)); }},
      {"L2 runs", [] {
         Shape s = long_shape(1 << 20, 64, 64, 8, false);
         s.block_rows = s.block_cols = 64;
         return l2_runs("1M x 64 x batch 8, head-major, blocks 64", s, h200(Rasterization::head_major));
       }},
      {"L2 runs", [] { return l2_runs("1M x 64/8 x batch 8, causal, d 64", long_d64(), h200()); }},
      // (The CLI's defaults at d = 64: two CTAs an SM.)
      {"L2 runs", [] { return l2_runs("1M x 64/8 x batch 8, causal, d 64, 2 CTAs an SM", long_d64(), l2_device(60, 132, 2)); }},
      // Where the schedule settles into its period late or never (every head
      // evaluated): 3 CTAs an SM, and the CLI's d = 64 defaults on B200 (126 MiB,
      // 148 SMs) and L40S (96 MiB, 142 SMs).
      {"L2 runs", [] { return l2_runs("1M x 64/8 x batch 8, causal, d 64, 3 CTAs an SM", long_d64(), l2_device(60, 132, 3)); }},
      {"L2 runs", [] { return l2_runs("B200: 1M x 64/8 x batch 8, causal, d 64, 2 CTAs", long_d64(), l2_device(126, 148, 2)); }},
      {"L2 runs", [] { return l2_runs("L40S: 1M x 64/8 x batch 8, causal, d 64, 2 CTAs", long_d64(), l2_device(96, 142, 2)); }},
      // (2^23 CTAs, the most the chains take; 3 CTAs an SM, the CLI's default
      // for blocks of 64 rows.)
      {"L2 runs", [] {
         Shape s = long_d64();
         s.block_rows = 64;
         return l2_runs("1M x 64/8 x batch 8, causal, d 64, blocks 64 x 128", s, l2_device(60, 132, 3));
       }},
      // Windows and chunks in the forward at batch 8: through the enumeration
      // (the chains take every CTA reading key blocks from 0, and the segment
      // engine stops at 1.5 M CTAs).
      {"L2 runs", [] {
         Shape s = long_shape(1 << 20, 64, 8, 8, true);
         s.window = 4096;
         return l2_runs("1M x 64/8 x batch 8, causal, window 4096", s, h200());
       }},
      {"L2 runs", [] { return l2_runs("128K x 64/8, causal (llm's largest)", long_shape(1 << 17, 64, 8, 1, true), h200()); }},
      {"L2 runs", [] { return l2_runs("1M x 32/8, causal (long-context)", long_shape(1 << 20, 32, 8, 1, true), h200()); }},
      {"L2 runs", [] { return l2_runs("1M x 64/8, causal (long-context)", long_shape(1 << 20, 64, 8, 1, true), h200()); }},
      {"L2 runs", [] { return l2_runs("1M x 32/8, causal, head-major", long_shape(1 << 20, 32, 8, 1, true), h200(Rasterization::head_major)); }},
      {"L2 runs", [] { return l2_runs("backward: 32K x 32/8, causal", training(1 << 15, 32, 1, true, Pass::bwd), h200()); }},
      // The causal backward: its main loop by rows, most runs of re-reads
      // settled by bounds at one L2 size, the rest evaluated over the CTAs
      // beside them; head-major order through the segment engine.
      {"L2 runs", [] { return l2_runs("backward: 128K x 32/8, causal", training(1 << 17, 32, 1, true, Pass::bwd), h200()); }},
      {"L2 runs", [] { return l2_runs("backward: 1M x 32/8, causal", training(1 << 20, 32, 1, true, Pass::bwd), h200()); }},
      {"L2 runs", [] { return l2_runs("backward: 1M x 64/8, causal", training(1 << 20, 64, 1, true, Pass::bwd), h200()); }},
      {"L2 runs", [] { return l2_runs("backward: 1M x 64/8 x batch 8, causal", training(1 << 20, 64, 8, true, Pass::bwd), h200()); }},
      // Where one step of the slots' row sets and K/V fits (A100), or two
      // steps of 264 slots' at d = 64 (H200): more reads are left to evaluate.
      {"L2 runs", [] { return l2_runs("backward: 1M x 64/8, causal, A100", training(1 << 20, 64, 1, true, Pass::bwd), l2_device(40, 108, 1)); }},
      {"L2 runs", [] { return l2_runs("backward: 1M x 64/8 x batch 8, causal, A100", training(1 << 20, 64, 8, true, Pass::bwd), l2_device(40, 108, 1)); }},
      {"L2 runs", [] {
         Shape s = training(1 << 20, 64, 8, true, Pass::bwd);
         s.head_dim = 64;
         return l2_runs("backward: 1M x 64/8 x batch 8, causal, d 64, B200", s, l2_device(126, 148, 2));
       }},
      {"L2 runs", [] {
         Shape s = training(1 << 20, 64, 8, true, Pass::bwd);
         s.head_dim = 64;
         return l2_runs("backward: 1M x 64/8 x batch 8, causal, d 64, 264 slots", s, l2_device(60, 132, 2));
       }},
      {"L2 runs",
       [] {
         return l2_runs("backward: 1M x 32/8, causal, head-major", training(1 << 20, 32, 1, true, Pass::bwd),
                        h200(Rasterization::head_major));
       }},
      // Chunks of whole blocks by rows, each chunk of a head a head of its
      // own; a sliding window by rows, a row's readers entering and leaving.
      {"L2 runs", [] {
         Shape s = training(1 << 20, 64, 8, true, Pass::bwd);
         s.chunk = 8192;
         return l2_runs("backward: 1M x 64/8 x batch 8, causal, chunks of 8192", s, h200());
       }},
      {"L2 runs", [] {
         Shape s = training(1 << 20, 64, 8, true, Pass::bwd);
         s.window = 4096;
         return l2_runs("backward: 1M x 64/8 x batch 8, causal, window 4096", s, h200());
       }},
      // The backward without a mask: waves in lockstep, in closed form.
      {"L2 runs", [] { return l2_runs("backward: 32K x 32/8", training(1 << 15, 32, 1, false, Pass::bwd), h200()); }},
      {"L2 runs", [] { return l2_runs("backward: 1M x 64/8 x batch 8", training(1 << 20, 64, 8, false, Pass::bwd), h200()); }},
      {"L2 runs", [] {
         return l2_runs("backward: 1M x 64/8 x batch 8, head-major", training(1 << 20, 64, 8, false, Pass::bwd),
                        h200(Rasterization::head_major));
       }},
      {"L2 runs", [] { return l2_runs("fwdbwd: 1M x 64/8 x batch 8", training(1 << 20, 64, 8, false, Pass::fwdbwd), h200()); }},
      {"L2 runs decode", [] { return decode_runs(DecodeVariant::split); }},
      {"L2 runs decode", [] { return decode_runs(DecodeVariant::split_unpacked); }},
      {"L2 runs decode", [] { return decode_runs(DecodeVariant::paged); }},
      {"JSON read", json_read},
      {"JSON read", json_read_empty_objects},
      {"compare", compare_files},
  };
  std::printf("hbmscope_bench: time = mean wall time of one run, repeated for at least 0.2 s; one core (the CPU reference attention uses every core)\n\n");
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
