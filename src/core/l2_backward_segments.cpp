// The backward pass where CTAs are not in lockstep (masks, ragged batches):
// the main loop through the segment engine, the row sets as one object each,
// and what lies outside it (the row sets' first reads, measured from the
// preprocessing; D's write-back; the dQ conversion; the GQA reduction) from
// each object's first and last access in the main loop (docs/l2-backward.md,
// "The backward through the segment engine").
#include <algorithm>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/l2_sim.hpp"
#include "l2_backward.hpp"
#include "l2_backward_outside.hpp"
#include "l2_backward_rows.hpp"
#include "l2_backward_sweeps.hpp"
#include "l2_segments.hpp"

namespace hbmscope::l2 {

namespace {

using u64 = std::uint64_t;
using i64 = std::int64_t;
constexpr u64 kv_sub = 0, row_sub = 1, dk_sub = 2;
constexpr u64 rows_ns = 0, kv_ns = 1, dk_ns = 2;

// D's write-back distance, per row: the largest of its reads' distances and
// its depth after the main loop. Rows start at the first read's distance and
// that depth; a run of re-reads is passed over in each block of rows whose
// starting values it does not exceed (most: the first read comes after the
// preprocessing of every later row, the depth before the main loop's rest).
class DMax : public ReadObserver {
 public:
  static constexpr u64 block = 64;
  explicit DMax(Array<u64> start) : best_(std::move(start)), low_((best_.size() + block - 1) / block, ~u64{0}) {
    for (u64 r = 0; r < best_.size(); ++r) low_[r / block] = std::min(low_[r / block], best_[r]);
    // The least over 2^k blocks from each, for any range of blocks at once.
    for (u64 w = 1; 2 * w <= low_.size(); w *= 2) {
      const std::vector<u64>& below = spans_.empty() ? low_ : spans_.back();
      std::vector<u64> up(low_.size() - 2 * w + 1);
      for (u64 b = 0; b < up.size(); ++b) up[b] = std::min(below[b], below[b + w]);
      spans_.push_back(std::move(up));
    }
  }
  void reads(u64 x0, u64 d0, i64 step, u64 count) override {
    auto d = [&](u64 x) {
      return step >= 0 ? d0 + static_cast<u64>(step) * (x - x0) : d0 - static_cast<u64>(-step) * (x - x0);
    };
    raise(x0, count, [&](u64 lo, u64 hi) { return std::max(d(lo), d(hi - 1)); }, d);
  }
  void reads_each(u64 x0, const u64* d, u64 count) override {
    auto at = [&](u64 x) { return d[x - x0]; };
    raise(x0, count, [&](u64 lo, u64 hi) { return *std::max_element(d + (lo - x0), d + (hi - x0)); }, at);
  }
  u64 indifferent_up_to(u64 x0, u64 count) const override {
    const u64 b0 = x0 / block, b1 = (x0 + count - 1) / block;
    if (b0 == b1) return low_[b0];
    const int k = 63 - __builtin_clzll(b1 - b0 + 1);  // 2^k blocks cover [b0, b1] from each end
    const std::vector<u64>& m = spans_[static_cast<std::size_t>(k - 1)];
    return std::min(m[b0], m[b1 + 1 - (u64{1} << k)]);
  }
  u64 at(u64 r) const { return best_[r]; }

 private:
  // Rows [x0, x0 + count) read at distance d(x): block by block, one whose
  // rows all start at least the largest distance there (most(lo, hi)) is
  // passed over.
  template <class Most, class D>
  void raise(u64 x0, u64 count, Most most, D d) {
    for (u64 lo = x0, end = x0 + count; lo < end;) {
      const u64 hi = std::min(end, (lo / block + 1) * block);
      if (most(lo, hi) > low_[lo / block])
        for (u64 x = lo; x < hi; ++x) best_[x] = std::max(best_[x], d(x));
      lo = hi;
    }
  }
  Array<u64> best_;
  std::vector<u64> low_;                  // per block of rows, its least start
  std::vector<std::vector<u64>> spans_;   // spans_[k - 1][b]: the least of low_ over blocks [b, b + 2^k)
};

}  // namespace

bool backward_in_segments(const Shape& s) { return !backward_in_waves(s); }

namespace {

// Whether `steps` steps of every slot's row set with `kvs` K/V (or dK, dV)
// blocks fit in the smallest L2 asked for, beside one more row set.
bool steps_fit(const Shape& s, const L2SimConfig& c, const BackwardGrid& g, u64 smallest_l2, u64 steps, u64 kvs) {
  const u64 slots = u64{c.sm_count} * c.ctas_per_sm;
  const u64 row_set = (g.ql_row() + g.do_row() + 4 + g.acc_row()) * s.block_rows, kv = g.kv_col() * s.block_cols;
  u64 bytes = 0;
  return !__builtin_mul_overflow(steps * slots, row_set + kvs * kv, &bytes) && bytes + row_set <= smallest_l2;
}

// Two steps of row sets and K/V: bounds settle most re-reads (a step or two
// apart: hits).
bool bounds_settle(const Shape& s, const L2SimConfig& c, const BackwardGrid& g, u64 smallest_l2) {
  return steps_fit(s, c, g, smallest_l2, 2, 1);
}

// Whether the segment engine takes the grid: about 1.6 KB a CTA (its streams,
// segments and index, the grid, the K/V and dK keys) and 130 bytes a row, so
// not past 1.5 M CTAs or 8 M rows (about 2.5 GB, 1 GB).
u64 all_rows(const Shape& s, const BackwardGrid& g) {
  u64 rows = 0;
  for (u64 b = 0; b < s.batch; ++b) rows += s.heads * g.forward().sequence(b).q_blocks;
  return rows;
}
bool engine_fits(const Shape& s, const BackwardGrid& g) {
  return g.ctas() <= (u64{3} << 19) && all_rows(s, g) <= (u64{1} << 23);
}

// Whether a chunk mask cuts each head's CTAs into parts that read disjoint
// rows, each CTA of a part to the part's last row: a head's key blocks in
// order, a part ending where a CTA reads to another last query block, that
// CTA's first no lower than the part's end (chunks whose length is a multiple
// of both block sizes). Each part is then a head of the main loop by rows.
bool chunks_part_heads(const BackwardGrid& g) {
  const FlashGrid& fg = g.forward();
  for (u64 b = 0; b < fg.sequences(); ++b) {
    if (b > 0 && fg.dense()) break;
    u64 end = 0, first = 0;
    for (u64 j = 0; j < fg.sequence(b).k_blocks; ++j) {
      const KeyRange q = g.query_blocks_seeing(b, j);
      if (q.end <= q.begin) continue;
      if (end != 0 && q.end != end && q.begin < end) return false;
      if (end != 0 && q.end == end && q.begin < first) return false;
      end = q.end;
      first = q.begin;
    }
  }
  return true;
}

// The main loop by rows (l2_backward_rows.cpp): any mask or ragged batch in
// query-block-major order (chunks that part the heads, each part a head),
// causal or ragged in head-major order (its rows' readers far apart, settled
// by the rows of the other heads between and the objects accessed there
// alone), where one step of every slot's row set fits in the smallest L2
// asked for (the reads a step apart, most of them, settle as hits: no more
// than a step of row sets lies between two reads of one row a step apart
// where the later reader comes first in launch order, as within a generation
// of CTAs that start together; where the engine takes the grid and the reads
// the bounds leave would cost more, the engine evaluates).
bool by_rows(const Shape& s, const L2SimConfig& c, const BackwardGrid& g, u64 smallest_l2) {
  if (c.order != Rasterization::query_block_major && (s.window != 0 || s.chunk != 0)) return false;
  return steps_fit(s, c, g, smallest_l2, 1, 0);
}

// The main loop's heads by rows where chunks part the grid's: each part's
// CTAs (head key and query blocks; the first row follows) relabelled as a head of their
// own whose rows run from the end of the part before (the head's first row
// for the first); an Error where chunks do not part the heads (as
// chunks_part_heads tells). Returns each part's first row. undo_parts puts
// the grid's labels back (for the segment engine).
std::vector<u64> part_heads(Array<BackwardCta>& ct, const std::vector<u64>& head_row0) {
  std::vector<u64> first_row;
  u64 key = ~u64{0}, end = 0, lo = 0, first = 0;
  for (u64 id = 0; id < ct.size(); ++id) {
    BackwardCta& c = ct[id];
    if (c.head_key != key) {
      key = c.head_key;
      end = lo = 0;
      first_row.push_back(head_row0[key]);
    }
    if (c.end > c.first) {
      if (end != 0 && c.end != end) {
        if (c.first < end) throw Error("internal: a chunk's CTAs read another chunk's rows");
        lo = end;
        first_row.push_back(head_row0[key] + lo);
      } else if (end != 0 && c.first < first) {
        throw Error("internal: a chunk's CTAs read from an earlier row than the CTA before");
      }
      end = c.end;
      first = c.first;
      c.first -= static_cast<std::uint32_t>(lo);
      c.end -= static_cast<std::uint32_t>(lo);
    }
    if (first_row.size() > ~std::uint32_t{0}) throw Error("internal: the backward's heads take fewer than 2^32 parts");
    c.head_key = static_cast<std::uint32_t>(first_row.size() - 1);
  }
  return first_row;
}
// Whether the parts, in a dense grid in query-block-major order, are all
// alike: as many in every head, each of as many consecutive CTAs and rows,
// with part 0's query blocks, ends and columns, row by row. Every grid head
// being alike, the parts of head 0 are checked against its first.
bool parts_alike(const Array<BackwardCta>& ct, const std::vector<u64>& part_row0, const Array<std::uint32_t>& n_rows,
                 u64 grid_heads, u64 per_grid_head) {
  const u64 parts = part_row0.size() - 1;
  if (grid_heads == 0 || parts % grid_heads != 0 || ct.size() % parts != 0) return false;
  const u64 m = ct.size() / parts, per = parts / grid_heads, nq = part_row0[1] - part_row0[0];
  if (m * per != per_grid_head) return false;
  for (u64 p = 0; p < parts; ++p)
    if (part_row0[p + 1] - part_row0[p] != nq) return false;
  for (u64 x = 0; x < per_grid_head; ++x) {
    const BackwardCta &c = ct[x], &c0 = ct[x % m];
    if (c.head_key != x / m || c.first != c0.first || c.end != c0.end || c.cols != c0.cols) return false;
  }
  for (u64 p = 1; p < per; ++p)
    for (u64 i = 0; i < nq; ++i)
      if (n_rows[part_row0[p] + i] != n_rows[part_row0[0] + i]) return false;
  return true;
}

void undo_parts(Array<BackwardCta>& ct, const std::vector<u64>& part_row0, const std::vector<u64>& head_row0, u64 heads) {
  for (u64 id = 0; id < ct.size(); ++id) {
    BackwardCta& c = ct[id];
    const u64 part_row = part_row0[c.head_key];
    c.head_key = static_cast<std::uint32_t>(u64{c.seq} * heads + c.head);
    const u64 lo = part_row - head_row0[c.head_key];
    if (c.end > c.first) {
      c.first += static_cast<std::uint32_t>(lo);
      c.end += static_cast<std::uint32_t>(lo);
    }
  }
}

// The segment engine's work.
u64 engine_work(const Shape& s, const L2SimConfig& c, std::uint64_t smallest_l2) {
  const BackwardGrid g(s, c.order);
  if (!engine_fits(s, g)) return ~u64{0};
  const u64 rows = all_rows(s, g);
  // A CTA's row sets, K/V and dK, dV meet the segments of the CTAs beside it:
  // about 220 units a slot a CTA and 4,000 more (its first and last reads,
  // sorted; the single reads' trees), and 600 a row (sorts and sums). Where
  // two steps of every slot's row set and K/V fit in the smallest L2 asked
  // for, the bounds settle most re-reads as hits without meeting their
  // neighbours: 10 units a slot a CTA and 7,000 more (40 a slot in
  // head-major order, where a row's readers are further apart and fewer of
  // its re-reads settle). Measured on causal, windowed and chunked shapes of
  // 64K to 1M tokens, 16 to 264 slots, both orders (bench/, "L2 runs";
  // docs/l2-simulation.md).
  const u64 slots = u64{c.sm_count} * c.ctas_per_sm;
  const bool settles = bounds_settle(s, c, g, smallest_l2);
  u64 w = 0;
  const u64 per_slot = !settles ? 220 : c.order == Rasterization::head_major ? 40 : 10;
  if (__builtin_mul_overflow(g.ctas(), std::min(g.ctas(), slots) * per_slot + (settles ? 7000 : 4000), &w))
    return ~u64{0};
  return w + rows * 600;
}

}  // namespace

std::uint64_t segments_backward_work(const Shape& s, const L2SimConfig& c, std::uint64_t smallest_l2) {
  if (!backward_in_segments(s)) return ~u64{0};
  const BackwardGrid g(s, c.order);
  if (!by_rows(s, c, g, smallest_l2)) return engine_work(s, c, smallest_l2);
  // By rows: about 600 units a CTA (its runs and their bounds, the reads they
  // leave evaluated over the CTAs beside them, the keys outside the main loop)
  // and 100 a row, up to 1,000 a CTA where only one step of the slots' row
  // sets and two K/V fits in the L2 (more reads are left to evaluate: as many
  // more as a CTA reads rows, up to 64; a window of 128 reads 2 a CTA, 1M x
  // 64/8 x batch 8 at d = 64 on 264 slots in 1.5 s), and more a row-set read
  // where only one step of row sets does (below), on the enumeration's
  // scale (10 units an access, 12 to 18 ns); about 135 bytes a CTA and a row
  // (1M x 64/8 x batch 8: 4.2 M of each, 564 MB), so up to 6.3 M CTAs and
  // rows (under 1 GB). Measured on causal, windowed and chunked
  // shapes of 128K to 1M tokens, batch 1 to 8, on the device presets: 0.4 to
  // 1 us a CTA (bench/, "L2 runs"; docs/l2-backward.md); more where many K/V
  // re-reads are left open (32K x 32/8 in chunks of 8K: 6 us, against the
  // enumeration's 2.5).
  const u64 rows = all_rows(s, g);
  constexpr u64 most = u64{3} << 21;
  if (g.ctas() > most || rows > most) return ~u64{0};
  if (bounds_settle(s, c, g, smallest_l2)) return g.ctas() * 600 + rows * 100;
  const u64 reads = backward_enum_accesses(s) / 5;  // (5 accesses a row-set read; below 2^64 as the CTAs are few)
  const u64 w = g.ctas() * (600 + std::min<u64>(400, 400 * (reads / std::max<u64>(1, g.ctas())) / 64)) + rows * 100;
  if (steps_fit(s, c, g, smallest_l2, 1, 2)) return w;
  // Where the L2 holds 1.4 steps of row sets or more, a run's reads lie
  // well inside its bucket and their bounds (by one read's window) settle
  // most: a sixteenth of a unit a read (1M x 16/8 x batch 8 at d = 256, 132
  // slots: 1.2 s at 1.39 steps, 0.7 s at 1.5, 0.45 to 0.65 s at 1.6 to 2.1;
  // 0.6 s at 1.48 on 108 slots; 64/8, 1.1 s; 64 heads without GQA, 1.7 s).
  // Nearer one step, 2 (2.6 s at 1.15 steps, 5.2 s at 1.03, 4.4 G reads).
  if (steps_fit(s, c, g, smallest_l2 / 7 * 5, 1, 0)) return w + reads / 16;
  return reads > (~u64{0} - w) / 2 ? ~u64{0} : w + 2 * reads;
}

FlashStats segments_backward(const Shape& s, const L2SimConfig& c, Tally& t, MainLoop how) {
  constexpr std::string_view what = "L2 simulation bytes";
  if (!backward_in_segments(s)) throw Error("internal: the backward's segments take masks and ragged batches");
  const ArrayPool pool;  // (each phase's arrays take the pages of the last one's)
  const BackwardGrid g(s, c.order);
  const FlashGrid& fg = g.forward();
  const u64 H = s.heads, Hkv = s.kv_heads, G = fg.group();
  const bool gqa = H != Hkv, qo = c.q_o_allocate;
  const u64 ctas = g.ctas(), slots = u64{c.sm_count} * c.ctas_per_sm;

  // Rows in the preprocessing's order (sequence, head, query block); K/V
  // objects per (sequence, kv head, key block), in the reduction's order.
  std::vector<u64> row_base(s.batch), kv_base(s.batch);
  u64 R = 0, P = 0;
  for (u64 b = 0; b < s.batch; ++b) {
    row_base[b] = R;
    kv_base[b] = P;
    R = checked_add(R, checked_mul(H, fg.sequence(b).q_blocks, what), what);
    P = checked_add(P, checked_mul(Hkv, fg.sequence(b).k_blocks, what), what);
  }
  // Rows of each query block (all but a sequence's last are full); the
  // objects' bytes are these times their bytes a row.
  Array<std::uint32_t> n_rows(R);
  for (u64 b = 0; b < s.batch; ++b) {
    const FlashSeq& f = fg.sequence(b);
    for (u64 h = 0; h < H; ++h)
      for (u64 i = 0; i < f.q_blocks; ++i) {
        const u64 r = row_base[b] + h * f.q_blocks + i, n = std::min(s.block_rows, f.shape.seq_q - i * s.block_rows);
        n_rows[r] = static_cast<std::uint32_t>(n);
      }
  }
  Array<u64> rows_below(R + 1);  // (rows of the rows before each: prefix sums)
  rows_below[0] = 0;
  for (u64 r = 0; r < R; ++r) rows_below[r + 1] = rows_below[r] + n_rows[r];
  const RowSetBytes u{g.ql_row() + g.do_row() + 4 + g.acc_row(), &n_rows, &rows_below};
  auto acc = [&](u64 r) { return g.acc_row() * n_rows[r]; };
  std::vector<u64> head_row0(fg.heads() + 1, R);  // each head key's first row
  for (u64 b = 0; b < s.batch; ++b)
    for (u64 h = 0; h < H; ++h) head_row0[b * H + h] = row_base[b] + h * fg.sequence(b).q_blocks;

  // The main loop in the engine: per CTA its K/V (first step), its row sets
  // (one a step, the last partial block apart) and its dK, dV (last step).
  if (ctas >= (u64{1} << 32) - 1) throw Error("internal: the backward's keys take fewer than 2^32 CTAs");
  Array<BackwardCta> ct(ctas);
  Array<u64> start(ctas);  // (the CTAs' lengths first, then the schedule's starts in their place)
  Array<std::uint32_t> kv_of(ctas);
  g.all(ct.data());
  std::vector<u64> kv_head_base(s.batch * H);  // per head of the grid, its kv head's first object
  for (u64 k = 0; k < kv_head_base.size(); ++k) kv_head_base[k] = kv_base[k / H] + k % H / G * fg.sequence(k / H).k_blocks;
  std::vector<std::uint8_t> place_in_group(H);  // (a head's place in its group, below 256 where kept)
  for (u64 h = 0; h < H; ++h) place_in_group[h] = static_cast<std::uint8_t>(h % G);
  // With GQA, each CTA's head's place in its group (one byte: its dK, dV's
  // place in the reduction's order, gathered later in the order of ends).
  Array<std::uint8_t> in_group(gqa && G <= 256 ? ctas : 0);
  u64 longest = 0;  // (the most steps a CTA runs, for the schedule)
  if (fg.dense() && c.order == Rasterization::query_block_major) {  // (every head's CTAs head 0's: in cache)
    const u64 m = fg.sequence(0).k_blocks;
    for (u64 j = 0; j < std::min(m, ctas); ++j) longest = std::max(longest, ct[j].steps());
    for (u64 h = 0, id = 0; h < kv_head_base.size(); ++h) {
      const u64 base = kv_head_base[h];
      const std::uint8_t place = place_in_group[h % H];
      for (u64 j = 0; j < m; ++j, ++id) {
        start[id] = ct[j].steps();
        kv_of[id] = static_cast<std::uint32_t>(base + ct[j].k_block);
        if (!in_group.empty()) in_group[id] = place;
      }
    }
  } else {
    for (u64 id = 0; id < ctas; ++id) {
      start[id] = ct[id].steps();
      longest = std::max(longest, start[id]);
      kv_of[id] = static_cast<std::uint32_t>(kv_head_base[u64{ct[id].seq} * H + ct[id].head] + ct[id].k_block);
      if (!in_group.empty()) in_group[id] = place_in_group[ct[id].head];
    }
  }
  // The schedule; the main loop by rows (l2_backward_rows.cpp) or through
  // the engine.
  Array<std::uint32_t> by_end(ctas);
  Array<u64> ends(ctas);
  const u64 steps = SegmentEngine::schedule(slots, start.data(), ctas, start.data(), by_end.data(), ends.data(), longest);
  const u64 smallest = t.capacities().empty() ? 0 : t.capacities().front();
  const bool to_engine = how == MainLoop::by_rows_then_engine;
  const bool forced = how == MainLoop::by_rows || how == MainLoop::by_rows_checked ||
                      how == MainLoop::by_rows_every_head || to_engine;
  const bool rows_first = forced || (how == MainLoop::automatic && by_rows(s, c, g, smallest));
  // The main loop's heads: the grid's, or by rows the parts that chunks cut
  // where they part the heads.
  const bool parts = rows_first && s.chunk != 0 && chunks_part_heads(g);
  std::vector<u64> loop_heads;
  if (parts) {
    loop_heads = part_heads(ct, head_row0);
    loop_heads.push_back(R);
  }
  const std::vector<u64>& heads_row0 = parts ? loop_heads : head_row0;
  SegmentEngine e;
  auto engine = [&] {
    std::vector<u64> len(ctas);
    for (u64 id = 0; id < ctas; ++id) len[id] = ct[id].steps();
    e.add_kernel(slots, std::move(len));
    e.reserve_streams(4 * ctas);  // K/V, row sets (two where a last block is partial), dK
    for (u64 id = 0; id < ctas; ++id) {
      const BackwardCta& x = ct[id];
      const u64 kvb = g.kv_col() * x.cols;
      e.add_stream(id, kv_sub, 0, 1, kv_ns, kv_of[id], kvb, Op::read);
      if (x.end > x.first) {
        const u64 nq = fg.sequence(x.seq).q_blocks, r0 = head_row0[x.head_key];  // (the grid's heads here)
        const bool partial = u[r0 + nq - 1] != u[r0];
        const u64 split = partial ? std::min<u64>(x.end, nq - 1) : x.end;
        auto rows = [&](u64 k0, u64 a, u64 b) {
          if (b > a) e.add_reads(id, row_sub, k0, b - a, rows_ns, r0 + a, u[r0 + a], {u[r0 + a], acc(r0 + a), true, true});
        };
        rows(0, x.first, split);
        rows(std::max<u64>(split, x.first) - x.first, std::max<u64>(split, x.first), x.end);
      }
      if (gqa) e.add_stream(id, dk_sub, x.steps() - 1, 1, dk_ns, kv_of[id] * G + x.head % G, kvb, Op::alloc);
      else e.add_stream(id, dk_sub, x.steps() - 1, 1, SegmentEngine::unique, 0, kvb, Op::write, qo);
    }
    e.link();
  };
  if (!rows_first) engine();

  // Outside the main loop (l2_backward_outside.cpp), from the schedule alone:
  // each row's start for D's write-back.
  BackwardArrays arrays;
  arrays.ct = &ct;
  arrays.start = &start;
  arrays.kv_of = &kv_of;
  const FirstRows row0{&ct, &heads_row0};
  arrays.row0 = &row0;
  arrays.u = &u;
  arrays.n_rows = &n_rows;
  arrays.by_end = &by_end;
  arrays.ends = &ends;
  arrays.head_row0 = &heads_row0;
  BackwardKeys keys;
  static_cast<BackwardArrays&>(keys) = arrays;
  keys.grid = &g;
  keys.gqa = gqa;
  keys.qo = qo;
  keys.kv_objects = P;
  keys.steps = steps;
  keys.wide_keys = how == MainLoop::by_rows_checked;
  keys.periods = how != MainLoop::by_rows_every_head;
  keys.heads_alike = fg.dense() && (!parts || (c.order == Rasterization::query_block_major &&
                                                parts_alike(ct, loop_heads, n_rows, s.batch * H, fg.sequence(0).k_blocks)));
  keys.head_major = c.order == Rasterization::head_major;
  keys.in_group = in_group.empty() ? nullptr : &in_group;
  u64 periodic = 0;
  DMax dmax(backward_outside(keys, t, periodic));

  // The main loop's re-reads; D's write-back at the largest of its distances.
  bool done = false;
  u64 repeated = 0, fan_reads = 0, stair_reads = 0;
  if (rows_first) {
    BackwardLoop loop;
    static_cast<BackwardArrays&>(loop) = arrays;
    loop.slots = slots;
    loop.heads = H;
    loop.group = G;
    loop.head_major = c.order == Rasterization::head_major;
    loop.gqa = gqa;
    loop.qo = qo;
    loop.kv_col = g.kv_col();
    loop.acc_row = g.acc_row();
    loop.head_keys = heads_row0.size() - 1;
    loop.parts = parts;
    loop.kv_stride = fg.dense() ? fg.sequence(0).k_blocks : 0;
    loop.kv_objects = P;
    loop.check_bounds = how == MainLoop::by_rows_checked;
    loop.repeats = how != MainLoop::by_rows_every_head;
    loop.heads_alike = keys.heads_alike;
    // Where the reads its bounds leave would cost more than half the engine's
    // estimate, the engine (where that is within the budget).
    const u64 engine_units = forced ? ~u64{0} : engine_work(s, c, smallest);
    const bool engine_too_long = engine_units == ~u64{0} || engine_units > max_l2_sim_work;
    const u64 limit = to_engine ? 0 : engine_too_long ? ~u64{0} : engine_units / 2;
    const std::optional<ByRows> by = backward_by_rows(loop, t, dmax, limit);
    done = by.has_value();
    repeated = by ? by->repeated_heads : 0;
    fan_reads = by ? by->fan_reads : 0;
    stair_reads = by ? by->stair_reads : 0;
  }
  if (!done) {
    if (parts) undo_parts(ct, loop_heads, head_row0, H);
    if (rows_first) engine();
    e.evaluate(t, &dmax);
  }
  {  // D's write-backs, summed by bucket (those that reach DRAM at any size apart)
    sweeps::ByBucket wb(t);
    u64 always = 0;
    for (u64 r = 0; r < R; ++r) {
      const u64 d = dmax.at(r);
      if (d == infinite) always = checked_add(always, u64{4} * n_rows[r], what);
      else wb.writeback(d, u64{4} * n_rows[r]);
    }
    wb.flush(t);
    t.writebacks(infinite, 0, 1, always);
  }

  FlashStats st;
  st.steps = steps;
  st.waves = ceil_div(ctas, slots);
  st.repeated_heads = repeated;
  st.periodic_rows = periodic;
  st.fan_reads = fan_reads;
  st.stair_reads = stair_reads;
  std::vector<u64> pair_of(s.batch * H);  // (per head of the grid: no division a CTA)
  for (u64 k = 0; k < pair_of.size(); ++k) pair_of[k] = k / H * Hkv + k % H / G;
  // (Asked in launch order; where every head is alike in query-block-major
  // order, a CTA's steps are head 0's at its place, in cache.)
  const bool alike = keys.heads_alike && !keys.head_major && ctas % pair_of.size() == 0;
  const u64 per_head = ctas / pair_of.size();
  u64 head = 0, place = 0;  // (alike: CTA id's head and place in it)
  count_in_flight(st, ctas, fg.heads(), fg.pairs(), [&](u64 id) {
    if (!alike) {
      const BackwardCta& x = ct[id];
      const u64 k = u64{x.seq} * H + x.head;
      return InFlight{k, pair_of[k], start[id], start[id] + x.steps() - 1};
    }
    const InFlight f{head, pair_of[head], start[id], start[id] + ct[place].steps() - 1};
    if (++place == per_head) place = 0, ++head;
    return f;
  });
  return st;
}

}  // namespace hbmscope::l2
