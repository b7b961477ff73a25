#include "options.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "hbmscope/device_spec.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/length_list.hpp"

namespace hbmscope::cli {

const char* const model_columns_help = R"(Columns (bytes through HBM, reads + writes, one forward pass unless --pass says otherwise):
  Standard attention           three kernels; S and P (N x N) each written and read once
  FlashAttention, no L2 reuse  FlashAttention-2 order; K and V re-read from HBM for every
                               query block of Br rows
  Every value once (floor)     Q, K, V read once and O written once: the least any kernel moves
  --wide puts every column in one table and adds FLOPs (4*d per (query, key) pair and
  head: 4*Nq*Nkv*d, or the visible pairs when causal) and FLOP/B per variant; --columns
  picks groups (bytes, l2, time, flops). A table wider than 120 columns is split into one
  table per group, headed by variant ids (standard, flash_no_l2, floor, ...).
  --fa1 adds "FlashAttention-1 order, no L2 reuse" (variant flash1_no_l2): key/value blocks
  outer, so Q, O and the fp32 row statistics l, m are re-read and O, l, m re-written for
  every key block (forward pass only).

With --pass bwd the same three columns count the backward pass: standard = five kernels
with P kept from the forward pass; FlashAttention = FA2's backward (D = rowsum(dO o O),
key blocks outer, dQ accumulated in fp32 by atomic adds, then converted); floor = Q, K,
V, O, dO and the log-sum-exp read once, dQ, dK, dV written once. FLOPs are 2.5x the
forward's; --pass fwdbwd adds both passes (3.5x) and the forward's log-sum-exp write
that FlashAttention's backward reads. docs/model.md lists every read and write.

With --l2-bytes, or --device (its L2 size and SM count), a simulation of the CTA schedule
and an LRU L2 adds (docs/model.md; forward and backward rows; evaluated by closed forms
over the schedule's runs: 1M tokens x 64 heads x batch 8 in 0.3 to 2 s on one core;
a shape whose simulation would take more than about 10 s is left out, named in a note):
  FlashAttention, simulated L2  FlashAttention-2's DRAM bytes when CTAs run in launch order on
                                SMs x CTAs-per-SM slots and re-reads of K, V hit the L2
  Standard, simulated L2        the three kernels through the same L2: S and P reads that hit
  L2 hit (flash)                read bytes served by the L2 / read bytes requested, in %
  Heads/wave                    distinct heads among resident CTAs, mean over the run
  L2 for floor                  smallest L2 at which the simulated flash traffic is the floor
  L2 hit (standard)             the read hit rate of the three standard kernels, in %

With --decode (or --context-lengths), decode rows instead (docs/model.md, "Decode attention"):
--seq new tokens (1-8, default 1) per sequence against a KV cache of --seq-kv tokens (or a
ragged batch, --context-lengths 512,4K,128K or @FILE), head dim 128 by default:
  Decode: KV once (floor)        K and V read once, Q read, O written: the least any kernel moves
  Decode: split-KV, GQA packed   flash-decoding (decode_split): splits from FlashAttention's
                                 heuristic on --sms / --device SMs (or --splits), fp32 partial O
                                 and LSE written and read back by a combine kernel
  Decode: split-KV, one CTA per head   (decode_split_unpacked) each kv head read G = H/Hkv times
  Decode: paged KV               (decode_paged) decode_split through pages of --page-size tokens
                                 (default 16), whole pages and int32 block-table entries read
  plus the context tokens, the split counts, the KV bytes of each variant (papers quote KV-only
  bandwidth) and FLOP/B against the ridge point (decode is memory-bound).

Attention as served (docs/model.md, "Masks", "Operand shapes", "Ragged prefill"): --window W
and --chunk C (with --causal) cut the key blocks each query block visits, the keys the floor
reads and the keys a decode step reads; --head-dim-v DV, --kv-dtype T and --mla R,P (a latent
KV, MLA absorbed) change what V, O and the KV cache are made of; --seq-lens gives a ragged
prefill batch, summed sequence by sequence. Standard attention still materialises all of S and P.

Numbers take K (x1024), M and G suffixes; lists "1024,4096"; ranges
"1024:65536:x2" (geometric) and "1024:8192:+1024" (arithmetic), inclusive.
Several list-valued options give every combination.

Examples:
  hbmscope                                  the design note's table
  hbmscope model --seq 1K:128K:x2 --head-dim 128 --heads 32 --kv-heads 8 --causal
  hbmscope model --seq 4096 --head-dim 64,128 --dtype bf16,fp8 --format csv
  hbmscope model --output report.json       JSON, from the extension (.csv, .md too)
  hbmscope model --pass fwd,bwd,fwdbwd --seq 4096 --head-dim 64
  hbmscope model --fa1                      the note's table with FlashAttention-1's order
  hbmscope model --seq 4K:32K:x2 --head-dim 128 --heads 32 --l2-bytes 60M --sms 132
  hbmscope model --decode --seq-kv 128K --batch 1,8 --heads 32 --kv-heads 8 --device h200
  hbmscope model --context-lengths 512,4096,128K --heads 64 --kv-heads 8 --splits 8 --format json
  hbmscope model --seq 32K --head-dim 128 --heads 32 --kv-heads 8 --causal --window 0,4096 --kv-dtype same,fp8
  hbmscope model --decode --mla 512,64 --heads 128 --seq-kv 32K --batch 32 --causal --device h200
  hbmscope model --seq-lens 512,1K:8K,4K --head-dim 128 --heads 32 --kv-heads 8 --causal)";

const char* const measure_help = R"(Runs real kernels on a CUDA device for each shape, after the model's table:
  standard  cuBLAS S = scale*Q*K^T (BF16 S in HBM), our row softmax (S -> P, causal mask
            applied there), cuBLAS O = P*V; held against the model's "standard" bytes
  softmax   the standard path's softmax kernel alone, on a real S: S read once, P written
            once (2 x e x B x H x Nq x Nkv bytes); checked as part of standard
  flash     our FlashAttention-2 forward (mma.sync BF16, cp.async, online softmax), v2
            layout: warps of 32 query rows (4 warps for Br = 128), K and V loaded in
            separate groups, 2 CTAs per SM; its Br x Bc is a compiled instantiation
            (default per head dim: 64 -> 128x128, 128 -> 128x64; pick another with
            --block-rows/--block-cols) and the model's "flash_no_l2" bytes use that Br
  flash_v1  the first layout (warps of 16 rows, 8 warps for Br = 128), kept to time beside
            flash; the Kernel column shows Br x Bc and the warps of each
  floor     one streaming pass: Q, K, V read once, O written once; "floor" bytes
  decode    on decode rows (--decode): our split-KV decode kernel (flash-decoding,
            GQA packed: one CTA reads each KV tile once for the group's query heads)
            and its combine kernel, contiguous cache; held against "decode_split"
            run with the same split count (FlashAttention's heuristic on this
            device's SMs, or --splits)
  decode_paged  the same through a block table of --page-size pages (shuffled,
            as a serving cache's are); held against "decode_paged"
  (decode rows run decode,decode_paged unless --kernels says otherwise)
A device-to-device copy (bytes = read + write) gives the bandwidth ceiling.
Each kernel's output is first checked against the CPU reference on random inputs
(||out - ref|| / ||ref|| < 1e-2; large shapes are checked on a smaller shape of
the same configuration, see docs/cuda.md); a wrong kernel is reported failed and
not timed. A shape that does not fit in free device memory is skipped.

Columns of the measured table:
  Time (median)        median of --repeats runs, each after an L2 flush (CUDA events)
  Spread               (max - min) / median of those runs
  Warm                 mean of back-to-back runs with no flush
  Model bytes          the model's bytes for the kernel's variant
  Bandwidth            model bytes / median time; marked (L2) when the kernel's output
                       fits in the L2 (its writes may not have reached HBM when timing stops)
  % of copy            bandwidth / the measured device-to-device copy bandwidth
  TFLOP/s              4*d per visible (query, key) pair and head / median time
  Predicted            model bytes / copy bandwidth; Measured/predicted = median / that
  Error                relative L2 error on validation (or why it failed / was skipped)

Examples:
  hbmscope measure                                   the note's three shapes
  hbmscope measure --seq 4096,8192 --head-dim 64,128 --batch 4 --heads 16 --causal
  hbmscope measure --seq 8192 --head-dim 128 --heads 32 --kv-heads 8 --kernels flash
  hbmscope measure --seq 4096 --head-dim 64 --block-rows 64 --block-cols 64 --kernels flash
  hbmscope measure --format json --output measured.json
  hbmscope measure --decode --seq 1 --seq-kv 4096 --batch 32 --heads 32 --kv-heads 8 --head-dim 128
  hbmscope measure --context-lengths 512,4096,131072 --heads 32 --kv-heads 8 --head-dim 128 --kernels decode
Without a CUDA device it prints one line saying why and exits 1.)";

namespace {

std::string in_quotes(const std::string& t) { return "'" + t + "'"; }

}  // namespace

CLI::Validator integer_in(std::int64_t lo, std::int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& t) -> std::string {
        std::int64_t v = 0;
        const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
        const std::string range = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
        if (t.empty() || ec == std::errc::invalid_argument || p != t.data() + t.size())
          return in_quotes(t) + " is not " + range;
        if (ec != std::errc() || v < lo || v > hi) return in_quotes(t) + " is out of range (" + range + ")";
        return {};
      },
      "from " + std::to_string(lo) + " to " + std::to_string(hi));
}

CLI::Validator unsigned64() {
  return CLI::Validator(
      [](std::string& t) -> std::string {
        std::uint64_t v = 0;
        // from_chars takes no sign for unsigned types, so "-1" cannot wrap.
        const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
        if (t.empty() || ec == std::errc::invalid_argument || p != t.data() + t.size())
          return in_quotes(t) + " is not an integer from 0 to 18446744073709551615";
        if (ec != std::errc()) return in_quotes(t) + " is too large (at most 18446744073709551615)";
        return {};
      },
      "");
}

CLI::Validator finite_number() {
  return CLI::Validator(
      [](std::string& t) -> std::string {
        double v = 0;
        const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
        if (t.empty() || ec != std::errc() || p != t.data() + t.size() || !std::isfinite(v))
          return in_quotes(t) + " is not a number";
        return {};
      },
      "");
}

CLI::Validator not_empty() {
  return CLI::Validator(
      [](std::string& t) -> std::string { return t.empty() ? std::string("'' is empty: give a value") : std::string(); },
      "");
}

void add_measure_options(CLI::App& app, MeasureCliOptions& o) {
  app.add_option("--kernels", o.kernels, "Kernels to run, e.g. flash,flash_v1 or standard,softmax,flash,flash_v1,floor "
                 "[default: standard,softmax,flash,floor]; on decode rows decode,decode_paged (the default there)")
      ->type_name("LIST");
  app.add_option("--repeats", o.repeats, "Timed runs per kernel, each after an L2 flush, e.g. 50 [default: 20]")
      ->check(integer_in(1, 100000));
  app.add_option("--warmup", o.warmup, "Untimed runs first, e.g. 5 [default: 3]")->check(integer_in(0, 100000));
  app.add_option("--device-index", o.device_index, "CUDA device to use, e.g. 1 [default: 0]")
      ->check(integer_in(0, 1023));
  app.add_option("--seed", o.seed, "Seed of the random inputs, e.g. 7 [default: 1]")->check(unsigned64());
  app.add_flag("--no-validate", o.no_validate, "Skip the check against the CPU reference (timings only)");
  app.add_option("--copy-bytes", o.copy_bytes,
                 "Size of each of the copy probe's two buffers, e.g. 256M; under 4x the L2 the probe is "
                 "skipped (no % of copy) [default: 1G]")
      ->type_name("BYTES");
  app.add_option("--flush-bytes", o.flush_bytes,
                 "Size of the buffer written then read before each timed run to flush the L2, e.g. 8M "
                 "(small values are for compute-sanitizer runs: timings are then warm) [default: 2x the L2]")
      ->type_name("BYTES");
  app.add_flag("--counters", o.counters,
               "Also count DRAM bytes read and written over one launch of each kernel (CUPTI; after the same L2 "
               "flush as the timed runs); needs permission to read GPU counters, else timings only");
}

void add_l2_options(CLI::App& app, L2Options& o) {
  app.add_option("--l2-bytes", o.l2_bytes,
                 "Simulate an L2 of BYTES (K, M, G = 2^10, 2^20, 2^30; 0 = none) and add the "
                 "flash_l2_sim and standard_l2_sim columns, e.g. 60M [default: the --device's "
                 "L2, else no simulation]")
      ->type_name("BYTES");
  app.add_option("--sms", o.sms, "Simulation (and decode rows' split heuristic): streaming multiprocessors, e.g. 132 "
                 "[default: the --device's, else 132]")
      ->type_name("N");
  app.add_option("--ctas-per-sm", o.ctas_per_sm,
                 "Simulation: FlashAttention CTAs resident per SM, e.g. 1 [default: what the flash kernel "
                 "the shape would run fits on one SM (registers, shared memory): 2 for the default blocks]")
      ->type_name("N");
  app.add_option("--l2-order", o.order,
                 "Simulation: CTA launch order; query-block-major (query block fastest, then head, "
                 "then batch, as hbmscope's kernel) or head-major (head fastest) "
                 "[default: query-block-major]")
      ->type_name("query-block-major|head-major");
  app.add_option("--l2-qo", o.qo,
                 "Simulation: whether Q tiles read and O tiles written take L2 space (allocate, "
                 "as NVIDIA's L2 does for loads and write-back stores) or bypass it, leaving it "
                 "all to K and V (as with evict-first or streaming hints) [default: allocate]")
      ->type_name("allocate|bypass");
  app.add_option("--l2-method", o.method,
                 "Simulation: how it is evaluated, runs (closed forms over the schedule's runs of "
                 "accesses) or enumeration (every tile access through the LRU, one by one: the "
                 "reference, slow on long contexts); both give identical results [default: runs]")
      ->type_name("runs|enumeration");
}

void add_output_options(CLI::App& app, OutputOptions& o) {
  app.add_option("--format", o.format,
                 "Output: table (terminal), json, csv (one header row), md [default: from the "
                 "--output file's extension (.json, .csv, .md), else table]")
      ->type_name("table|json|csv|md");
  app.add_option("--units", o.units,
                 "Byte units in table/md: decimal (MB = 10^6 B, 3 significant figures), binary "
                 "(MiB), bytes (exact integers)")
      ->type_name("decimal|binary|bytes");
  app.add_flag("--wide", o.wide,
               "Table/md: every column in one table, adding FLOPs and arithmetic intensity (FLOP/B)");
  app.add_option("--columns", o.columns,
                 "Table/md: the column groups to show, among bytes, l2 (the simulation's detail), "
                 "time (with --device), flops (FLOPs, intensity, ridge), or all, e.g. bytes,time "
                 "[default: bytes,l2,time; a table wider than 120 columns is split by group]")
      ->type_name("LIST");
  app.add_option("--output", o.output,
                 "Write the report to FILE atomically (temporary file + rename) instead of stdout; "
                 "a device or FIFO is written in place, - is stdout")
      ->type_name("FILE")
      ->check(not_empty());
}

namespace {

std::uint64_t single_value(const std::string& text, std::string_view option, bool zero_ok) {
  const std::string_view t = text;
  if (zero_ok && (t == "0" || t == "0K" || t == "0M" || t == "0G")) return 0;
  const auto v = parse_int_axis(t, option);
  if (v.size() != 1) throw UsageError("--" + std::string(option) + ": '" + text + "' must be one value");
  return v.front();
}

std::uint32_t small_count(const std::string& text, std::string_view option) {
  const std::uint64_t v = single_value(text, option, false);
  if (v > max_sm_count)
    throw UsageError("--" + std::string(option) + ": '" + text + "' is too large (at most " +
                std::to_string(max_sm_count) + ")");
  return static_cast<std::uint32_t>(v);
}

}  // namespace

std::optional<L2SimConfig> to_l2_config(const L2Options& o, const DeviceSpec* device) {
  if (!o.l2_bytes && !device) {
    for (const auto& [given, name] : {std::pair{o.sms.has_value(), "--sms"},
                                      {o.ctas_per_sm.has_value(), "--ctas-per-sm"},
                                      {o.order.has_value(), "--l2-order"},
                                      {o.qo.has_value(), "--l2-qo"},
                                      {o.method.has_value(), "--l2-method"}})
      if (given)
        throw UsageError(std::string(name) + " needs --l2-bytes or --device (the L2 simulation is off)");
    return std::nullopt;
  }
  // --l2-bytes 0: no simulation, even with a device.
  if (o.l2_bytes && single_value(*o.l2_bytes, "l2-bytes", true) == 0) {
    for (const auto& [given, name] : {std::pair{o.sms.has_value(), "--sms"},
                                      {o.ctas_per_sm.has_value(), "--ctas-per-sm"},
                                      {o.order.has_value(), "--l2-order"},
                                      {o.qo.has_value(), "--l2-qo"},
                                      {o.method.has_value(), "--l2-method"}})
      if (given) throw UsageError(std::string(name) + ": the L2 simulation is off (--l2-bytes 0)");
    return std::nullopt;
  }
  L2SimConfig c;
  if (device) {
    c.l2_bytes = device->l2_bytes;
    // Device files are checked against the same limit on load; this keeps
    // the narrowing below exact for a spec made any other way.
    if (device->sm_count == 0 || device->sm_count > max_sm_count)
      throw Error("device '" + device->name + "': " + std::to_string(device->sm_count) +
                  " SMs is not in [1, " + std::to_string(max_sm_count) + "]");
    c.sm_count = static_cast<std::uint32_t>(device->sm_count);
  }
  if (o.l2_bytes) c.l2_bytes = single_value(*o.l2_bytes, "l2-bytes", true);
  if (o.sms) c.sm_count = small_count(*o.sms, "sms");
  if (o.ctas_per_sm) c.ctas_per_sm = small_count(*o.ctas_per_sm, "ctas-per-sm");
  if (o.order) {
    const auto r = parse_rasterization(*o.order);
    if (!r)
      throw UsageError("--l2-order: '" + *o.order + "' is not one of query-block-major, head-major");
    c.order = *r;
  }
  if (o.qo) {
    if (*o.qo != "allocate" && *o.qo != "bypass")
      throw UsageError("--l2-qo: '" + *o.qo + "' is not one of allocate, bypass");
    c.q_o_allocate = *o.qo == "allocate";
  }
  if (o.method) {
    const auto m = parse_l2_method(*o.method);
    if (!m) throw UsageError("--l2-method: '" + *o.method + "' is not one of runs, enumeration");
    c.method = *m;
  }
  return c;
}

std::uint64_t decode_sm_count(const L2Options& o, const DeviceSpec* device) {
  if (o.sms) return small_count(*o.sms, "sms");
  if (device && device->sm_count > 0) return device->sm_count;
  return default_decode_sm_count;
}

namespace {

// The format a file name asks for: .json, .csv, .md (any case); none otherwise.
std::optional<Format> format_of_name(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  const std::size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return std::nullopt;
  std::string ext = path.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext == "json") return Format::json;
  if (ext == "csv") return Format::csv;
  if (ext == "md" || ext == "markdown") return Format::md;
  return std::nullopt;
}

const char* format_word(Format f) {
  switch (f) {
    case Format::table: return "table";
    case Format::json: return "json";
    case Format::csv: return "csv";
    case Format::md: return "md";
  }
  return "";
}

}  // namespace

Format resolve_format(const std::string& given, const std::optional<std::string>& output, Format fallback) {
  const std::optional<Format> named =
      output && *output != "-" ? format_of_name(*output) : std::nullopt;
  if (given.empty()) return named.value_or(fallback);
  const auto f = parse_format(given);
  if (!f) throw UsageError("--format: '" + given + "' is not one of table, json, csv, md");
  if (named && *named != *f)
    throw UsageError("--format " + given + " contradicts --output '" + *output + "' (a ." +
                     format_word(*named) + " file): drop --format or rename the file");
  return *f;
}

void apply_measure_sizes(const MeasureCliOptions& o, MeasureOptions& opt) {
  if (o.copy_bytes) opt.copy_bytes = single_value(*o.copy_bytes, "copy-bytes", false);
  if (o.flush_bytes) {
    opt.flush_bytes = single_value(*o.flush_bytes, "flush-bytes", false);
    if (opt.flush_bytes % 16 != 0)
      throw UsageError("--flush-bytes: '" + *o.flush_bytes + "' must be a multiple of 16 bytes");
  }
}

PrintOptions to_print_options(const OutputOptions& o) {
  PrintOptions p;
  const auto f = std::optional<Format>(resolve_format(o.format, o.output));
  const std::string units = o.units.value_or("decimal");
  const auto u = parse_units(units);
  if (!u) throw UsageError("--units: '" + units + "' is not one of decimal, binary, bytes");
  // Table and Markdown options: JSON and CSV hold every number exactly, so
  // with them these would do nothing.
  if (*f == Format::json || *f == Format::csv)
    for (const auto& [given, name] : {std::pair{o.units.has_value(), "--units"}, {o.wide, "--wide"},
                                      {o.columns.has_value(), "--columns"}})
      if (given)
        throw UsageError(std::string(name) + ": applies to table and md output; " + format_word(*f) +
                         " holds every number exactly");
  p.format = *f;
  p.units = *u;
  p.wide = o.wide;
  if (o.columns) {
    const std::string& t = *o.columns;
    for (std::size_t pos = 0; pos <= t.size();) {
      const std::size_t comma = std::min(t.find(',', pos), t.size());
      const std::string g = t.substr(pos, comma - pos);
      const auto& known = column_groups();
      if (g == "all") p.columns.insert(p.columns.end(), known.begin(), known.end());
      else if (std::find(known.begin(), known.end(), g) != known.end()) p.columns.push_back(g);
      else
        throw UsageError("--columns: '" + g + "' is not one of bytes, l2, time, flops, all");
      pos = comma + 1;
    }
  }
  return p;
}

}  // namespace hbmscope::cli
