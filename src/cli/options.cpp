#include "options.hpp"

#include "hbmscope/error.hpp"

namespace hbmscope::cli {

const char* const model_columns_help = R"(Columns (bytes through HBM, reads + writes, one forward pass unless --pass says otherwise):
  Standard attention           three kernels; S and P (N x N) each written and read once
  FlashAttention, no L2 reuse  FlashAttention-2 order; K and V re-read from HBM for every
                               query block of Br rows
  Every value once (floor)     Q, K, V read once and O written once: the least any kernel moves
  --wide adds FLOPs (4*Nq*Nkv*d per head, halved when causal) and FLOP/B per variant.
  --fa1 adds "FlashAttention-1 order, no L2 reuse" (variant flash1_no_l2): key/value blocks
  outer, so Q, O and the fp32 row statistics l, m are re-read and O, l, m re-written for
  every key block (forward pass only).

With --pass bwd the same three columns count the backward pass: standard = five kernels
with P kept from the forward pass; FlashAttention = FA2's backward (D = rowsum(dO o O),
key blocks outer, dQ accumulated in fp32 by atomic adds, then converted); floor = Q, K,
V, O, dO and the log-sum-exp read once, dQ, dK, dV written once. FLOPs are 2.5x the
forward's; --pass fwdbwd adds both passes (3.5x). docs/model.md lists every read and write.

Numbers take K (x1024), M and G suffixes; lists "1024,4096"; ranges
"1024:65536:x2" (geometric) and "1024:8192:+1024" (arithmetic), inclusive.
Several list-valued options give every combination.

Examples:
  hbmscope                                  the design note's table
  hbmscope model --seq 1K:128K:x2 --head-dim 128 --heads 32 --kv-heads 8 --causal
  hbmscope model --seq 4096 --head-dim 64,128 --dtype bf16,fp8 --format csv
  hbmscope model --format json --output report.json
  hbmscope model --pass fwd,bwd,fwdbwd --seq 4096 --head-dim 64
  hbmscope model --fa1                      the note's table with FlashAttention-1's order)";

void add_shape_options(CLI::App& app, ShapeOptions& o) {
  app.add_option("--seq", o.seq,
                 "Query sequence length(s) Nq, e.g. 4096 or 1K:64K:x2 [default: the note's rows, "
                 "4096 when --head-dim is given]")
      ->type_name("LIST");
  app.add_option("--seq-kv", o.seq_kv, "Key/value sequence length(s) Nkv, e.g. 8192 [default: = --seq]")
      ->type_name("LIST");
  app.add_option("--head-dim", o.head_dim,
                 "Head dimension(s) d, e.g. 64,128 [default: the note's rows, 64 when --seq is "
                 "given]")
      ->type_name("LIST");
  app.add_option("--batch", o.batch, "Batch size(s), e.g. 8 [default: 1]")->type_name("LIST");
  app.add_option("--heads", o.heads, "Query heads H, e.g. 32 [default: 1]")->type_name("LIST");
  app.add_option("--kv-heads", o.kv_heads,
                 "Key/value heads Hkv (GQA; H a multiple of it), e.g. 8 [default: = --heads]")
      ->type_name("LIST");
  app.add_option("--dtype", o.dtype, "Element type(s): fp32 (4 B), fp16, bf16 (2 B), fp8 (1 B) [default: bf16]")
      ->type_name("LIST");
  app.add_option("--block-rows", o.block_rows, "FlashAttention query block Br, e.g. 64,128 [default: 128]")
      ->type_name("LIST");
  app.add_option("--block-cols", o.block_cols, "FlashAttention key block Bc, e.g. 64 [default: 128]")
      ->type_name("LIST");
  app.add_flag("--causal", o.causal,
               "Causal mask: query row r sees key c iff c <= r + (Nkv - Nq); halves FLOPs");
  app.add_option("--pass", o.pass,
                 "Pass(es) counted: fwd (forward), bwd (backward, from dO), fwdbwd (both, one "
                 "training step), e.g. fwd,bwd [default: fwd]")
      ->type_name("LIST");
}

void add_output_options(CLI::App& app, OutputOptions& o) {
  app.add_option("--format", o.format, "Output: table (terminal), json, csv (one header row), md")
      ->type_name("table|json|csv|md");
  app.add_option("--units", o.units,
                 "Byte units in table/md: decimal (MB = 10^6 B, 3 significant figures), binary "
                 "(MiB), bytes (exact integers)")
      ->type_name("decimal|binary|bytes");
  app.add_flag("--wide", o.wide, "Table/md: add FLOPs and arithmetic intensity (FLOP/B) columns");
  app.add_option("--output", o.output,
                 "Write the report to FILE atomically (temporary file + rename) instead of stdout")
      ->type_name("FILE");
}

SweepAxes to_axes(const ShapeOptions& o) {
  SweepAxes a;
  if (!o.seq && !o.head_dim) {
    a = note_axes();
  } else {
    a.seq = o.seq ? parse_int_axis(*o.seq, "seq") : std::vector<std::uint64_t>{4096};
    a.head_dim = o.head_dim ? parse_int_axis(*o.head_dim, "head-dim") : std::vector<std::uint64_t>{64};
  }
  if (o.seq_kv) a.seq_kv = parse_int_axis(*o.seq_kv, "seq-kv");
  if (o.batch) a.batch = parse_int_axis(*o.batch, "batch");
  if (o.heads) a.heads = parse_int_axis(*o.heads, "heads");
  if (o.kv_heads) a.kv_heads = parse_int_axis(*o.kv_heads, "kv-heads");
  if (o.dtype) a.dtype = parse_dtype_axis(*o.dtype, "dtype");
  if (o.block_rows) a.block_rows = parse_int_axis(*o.block_rows, "block-rows");
  if (o.block_cols) a.block_cols = parse_int_axis(*o.block_cols, "block-cols");
  a.causal = {o.causal};
  if (o.pass) a.pass = parse_pass_axis(*o.pass, "pass");
  return a;
}

PrintOptions to_print_options(const OutputOptions& o) {
  PrintOptions p;
  const auto f = parse_format(o.format);
  if (!f) throw Error("--format: '" + o.format + "' is not one of table, json, csv, md");
  const auto u = parse_units(o.units);
  if (!u) throw Error("--units: '" + o.units + "' is not one of decimal, binary, bytes");
  p.format = *f;
  p.units = *u;
  p.wide = o.wide;
  return p;
}

}  // namespace hbmscope::cli
