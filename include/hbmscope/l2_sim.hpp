#pragma once
// Where real traffic lands between flash_no_l2 and the floor: a tile-level
// simulation of the CTA schedule and an LRU L2 in front of DRAM (docs/model.md,
// "The L2 simulation"). Pure: no I/O. Deterministic.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hbmscope/decode.hpp"
#include "hbmscope/report.hpp"
#include "hbmscope/shape.hpp"

namespace hbmscope {

// Launch order of the FlashAttention grid's CTAs.
enum class Rasterization {
  query_block_major,  // query block fastest, then head, then batch (hbmscope's kernel grid)
  head_major,         // head fastest, then query block, then batch
};

std::string_view rasterization_name(Rasterization r);  // "query-block-major", "head-major"
std::optional<Rasterization> parse_rasterization(std::string_view s);

// How the simulation is evaluated (docs/l2-simulation.md): both give
// identical results; they differ only in cost.
enum class L2SimMethod {
  // Closed forms over the schedule's runs where it has them (waves in
  // lockstep: no mask, one sequence length; decode with one split; standard
  // attention), costing O(CTAs); elsewhere the cheaper exact evaluation, the
  // segment engine (segments of accesses with one predecessor and one
  // successor) or the enumeration.
  runs,
  // Every tile access through the stack-distance LRU, one by one (the
  // reference the tests hold the runs against).
  enumeration,
};
std::string_view l2_method_name(L2SimMethod m);  // "runs", "enumeration"
std::optional<L2SimMethod> parse_l2_method(std::string_view s);

struct L2SimConfig {
  std::uint64_t l2_bytes = 0;        // capacity of the simulated L2; 0 = no L2
  std::uint32_t sm_count = 132;      // SMs
  std::uint32_t ctas_per_sm = 2;     // CTAs resident on one SM at once
  Rasterization order = Rasterization::query_block_major;
  // true: Q tiles read and O tiles written take L2 space as K/V do (loads and
  // write-back stores allocate, as on NVIDIA GPUs). false: they bypass the L2.
  bool q_o_allocate = true;
  L2SimMethod method = L2SimMethod::runs;
  friend bool operator==(const L2SimConfig&, const L2SimConfig&) = default;
};

// Throws Error naming the bad field (zero SMs or CTAs per SM).
void validate(const L2SimConfig& c);

struct L2SimResult {
  std::uint64_t dram_read_bytes = 0;
  std::uint64_t dram_write_bytes = 0;  // write-back: every written byte reaches DRAM once
  std::uint64_t dram_bytes = 0;        // read + write
  std::uint64_t read_request_bytes = 0;  // bytes the kernels read (hits + misses)
  double l2_hit_rate = 0.0;  // read bytes served by the L2 / read bytes requested (0 if none)
  // Smallest L2 capacity (bytes) at which this variant's traffic reaches its
  // minimum (for flash: the floor), other parameters equal. Exact, see docs.
  std::uint64_t l2_bytes_to_min = 0;
  std::uint64_t min_dram_bytes = 0;  // that minimum
  // Flash only: mean over lockstep steps of the distinct (batch, head) and
  // (batch, kv head) pairs among resident CTAs; waves = ceil(CTAs / slots).
  double heads_per_wave = 0.0;
  double kv_heads_per_wave = 0.0;
  std::uint64_t waves = 0;
  std::uint64_t steps = 0;  // lockstep steps until the last CTA finishes
};

// FlashAttention-2 on the simulated schedule and L2: the forward pass, the
// backward pass (--pass bwd: its four kernels, docs/model.md "The backward
// pass in the L2 simulation"), or both plus the forward's log-sum-exp write
// (fwdbwd), as s.pass says. heads_per_wave and the figures after it are the
// forward's (the backward's main loop for --pass bwd).
L2SimResult flash_l2_sim(const Shape& s, const L2SimConfig& c);
// Standard three-kernel attention through the same L2 (sm_count, ctas_per_sm
// and order do not apply: the kernels are modelled as one ordered stream).
// Forward pass only: Error for a backward row (its five kernels are not
// simulated, docs/model.md says why).
L2SimResult standard_l2_sim(const Shape& s, const L2SimConfig& c);

// DRAM bytes (read + write) at each of several L2 capacities in one pass;
// capacities in any order, results in the same order. The capacity in c is ignored.
std::vector<std::uint64_t> flash_l2_curve(const Shape& s, const L2SimConfig& c,
                                          const std::vector<std::uint64_t>& capacities);
std::vector<std::uint64_t> standard_l2_curve(const Shape& s, const L2SimConfig& c,
                                             const std::vector<std::uint64_t>& capacities);

// Bytes of every K and V tile of the whole batch (Hkv heads), and of every Q
// and O tile: an L2 of their sum never evicts anything.
std::uint64_t kv_footprint_bytes(const Shape& s);
std::uint64_t qo_footprint_bytes(const Shape& s);

// One access of the simulated stream. obj names a tile object (dense ids,
// reused only after a forget of that id), or is l2_once_only for a tile read or
// written exactly once (Q, O). allocate false: the access bypasses the L2.
inline constexpr std::uint32_t l2_once_only = 0xffffffffu;
// write_dirty: a write of an intermediate (the backward's D, dQ accumulator and
// per-query-head dK, dV): its bytes reach DRAM only if it is evicted before
// its next write or its death (forget).
struct L2Access {
  enum class Kind { read, write, forget, write_dirty } kind = Kind::read;
  std::uint32_t obj = l2_once_only;
  std::uint64_t bytes = 0;
  bool allocate = true;
};
// The access streams the two simulations feed their L2 with (tests check them
// against a direct LRU; a finer cache model can consume them).
void for_each_flash_l2_access(const Shape& s, const L2SimConfig& c,
                              const std::function<void(const L2Access&)>& on_access);
void for_each_standard_l2_access(const Shape& s, const L2SimConfig& c,
                                 const std::function<void(const L2Access&)>& on_access);

// Runs both simulations on row.shape and appends variants "flash_l2_sim" and
// "standard_l2_sim" and the detail row.l2_sim. Errors name the shape. A
// backward or fwdbwd row gets flash_l2_sim only.
// A decode row instead gets "ID_l2_sim" for each of its decode_split,
// decode_split_unpacked and decode_paged variants (with its split count), and
// row.l2_sim->decode. For a decode shape, flash_l2_sim_accesses counts those
// simulations (at their largest split count: --splits, else 128) and
// standard_l2_sim_accesses is 0.
void add_l2_sim(Row& row, const L2SimConfig& c);

// add_l2_sim with a memory of the run's last simulations: a sweep whose groups
// share a shape (two models with the same heads, a whole model's kinds over
// several steps) simulates it once. A replay appends what the simulation did,
// with intensities over this row's FLOPs; results are the same either way.
class L2SimMemo {
 public:
  void add_l2_sim(Row& row, const L2SimConfig& c);
  std::uint64_t replays() const { return replays_; }

 private:
  struct Entry {
    Shape shape;
    L2SimConfig config;
    std::vector<std::pair<std::string, std::uint64_t>> asked;  // the row's variants and splits before
    std::vector<VariantResult> added;
    std::optional<L2SimDetail> detail;
  };
  static constexpr std::size_t capacity = 64;
  std::vector<Entry> recent_;  // oldest first
  std::uint64_t replays_ = 0;
};

// What a simulation costs, counted without running it (docs/l2-simulation.md,
// "Cost"): in work units of about a nanosecond on one core. For the runs
// method it grows with the CTAs of the grid where the closed forms or the
// causal backward's rows apply (up to 8 M CTAs), and otherwise as the cheaper
// of the segment engine (CTAs times the CTAs resident beside each, and at
// least a fraction of the tile accesses; not past 1.5 M CTAs) and the
// enumeration (the tile accesses). Both simulations of a prefill row (flash and
// standard), or the three decode variants of a decode row (at their largest
// split count: --splits, else 128).
std::uint64_t l2_sim_work(const Shape& s, const L2SimConfig& c);
// The most work one shape may take (about 10 s): larger ones are refused.
inline constexpr std::uint64_t max_l2_sim_work = std::uint64_t{1} << 34;
// The most work one run may take, summed over its shapes (about a minute).
inline constexpr std::uint64_t max_l2_sim_run_work = std::uint64_t{1} << 36;
// Whether l2_sim_work(s, c) is within max_l2_sim_work (the one budget that
// model, sweep and reconcile apply).
bool l2_sim_within_budget(const Shape& s, const L2SimConfig& c);
// Whether s's backward pass has no closed form (a mask or a ragged batch): the
// runs take it through the segment engine, at a cost that grows with the CTAs
// (times the slots where bounds do not settle re-reads), or enumerate it
// (docs/l2-backward.md, "The backward through the segment engine"); false
// for forward rows.
bool l2_sim_backward_not_in_closed_form(const Shape& s);
// Whether a shape over the budget in head-major order (by runs) is within it
// in query-block-major order: the masked backward's main loop goes by rows
// there and through the segment engine in head-major order.
bool l2_sim_fits_query_block_major(const Shape& s, const L2SimConfig& c);
// Throws Error naming the shape, its work, the limit and what to change when
// the shape is over max_l2_sim_work.
void check_l2_sim_size(const Shape& s, const L2SimConfig& c);

// Accesses the enumeration makes on this shape (the larger of its two
// simulations; flash and standard alone), counted without running it.
std::uint64_t l2_sim_accesses(const Shape& s);
std::uint64_t flash_l2_sim_accesses(const Shape& s);
std::uint64_t standard_l2_sim_accesses(const Shape& s);

// Decode (decode.hpp, docs/model.md "Decode in the L2 simulation"): the split
// kernel's CTAs in FlashAttention-2's launch order (query-row block fastest,
// then split, then head: the kv head when GQA is packed, the query head when
// not; then sequence) on sm_count x ctas_per_sm slots, one key block per step
// (the Q tile with the first); each writes its fp32 partial O and LSE (or, with
// one split, O); then the combine kernel reads every partial of a head and
// writes O. v is decode_split, decode_split_unpacked or decode_paged (paged:
// each step reads the block-table entries and the whole pages its keys touch
// that the CTA has not read yet). c.order does not apply. With an L2 of 0 the
// result is decode_bytes(s, v, splits); never below decode_floor.
L2SimResult decode_l2_sim(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c);
std::vector<std::uint64_t> decode_l2_curve(const Shape& s, DecodeVariant v, std::uint64_t splits,
                                           const L2SimConfig& c, const std::vector<std::uint64_t>& capacities);
void for_each_decode_l2_access(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c,
                               const std::function<void(const L2Access&)>& on_access);
// Accesses the enumeration of that simulation makes, counted without running it.
std::uint64_t decode_l2_sim_accesses(const Shape& s, DecodeVariant v, std::uint64_t splits);

}  // namespace hbmscope
