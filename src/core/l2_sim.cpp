#include "hbmscope/l2_sim.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <string>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/model.hpp"
#include "hbmscope/tile_walk.hpp"

namespace hbmscope {

std::string_view rasterization_name(Rasterization r) {
  switch (r) {
    case Rasterization::query_block_major: return "query-block-major";
    case Rasterization::head_major: return "head-major";
  }
  return "?";
}

std::optional<Rasterization> parse_rasterization(std::string_view s) {
  if (s == "query-block-major") return Rasterization::query_block_major;
  if (s == "head-major") return Rasterization::head_major;
  return std::nullopt;
}

void validate(const L2SimConfig& c) {
  if (c.sm_count == 0) throw Error("L2 simulation: SM count must be positive");
  if (c.ctas_per_sm == 0) throw Error("L2 simulation: CTAs per SM must be positive");
}

namespace {

constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint64_t infinite = std::numeric_limits<std::uint64_t>::max();

// An LRU cache over objects of real byte sizes, evaluated for several
// capacities at once through stack distances (docs/model.md): an access hits
// in an LRU of C bytes iff its size plus the sizes of the distinct objects
// touched since its previous access is at most C. The recency stack is kept as
// a Fenwick tree over access times, compacted when it fills, so one access
// costs O(log(live objects)).
class StackL2 {
 public:
  explicit StackL2(const std::vector<std::uint64_t>& capacities) : caps_(capacities) {
    std::sort(caps_.begin(), caps_.end());
    caps_.erase(std::unique(caps_.begin(), caps_.end()), caps_.end());
    miss_add_.assign(caps_.size() + 1, 0);
    reset_tree(4096);
  }

  // Objects are dense ids [0, n); an id may be reused after forget().
  void reserve_objects(std::size_t n) {
    if (obj_pos_.size() < n) obj_pos_.resize(n, none);
  }

  // A read of `bytes` of object obj (or none: an object read or written once).
  void read(std::uint32_t obj, std::uint64_t bytes, bool allocate = true) {
    request_ += bytes;
    const std::uint64_t d = allocate ? touch(obj, bytes) : infinite;
    if (d == infinite) {
      miss_add_.back() += bytes;
      first_reads_ += bytes;
      return;
    }
    max_reuse_distance_ = std::max(max_reuse_distance_, d);
    const auto k = static_cast<std::size_t>(
        std::lower_bound(caps_.begin(), caps_.end(), d) - caps_.begin());
    miss_add_[k] += bytes;
  }

  // A full-tile write: allocates (write-back) without fetching; its bytes reach
  // DRAM once, when evicted or at the end.
  void write(std::uint32_t obj, std::uint64_t bytes, bool allocate = true) {
    writes_ += bytes;
    if (allocate) touch(obj, bytes);
  }

  // The object will not be accessed again: its position need not be kept (its
  // bytes still count in the distances of older objects).
  void forget(std::uint32_t obj) {
    const std::uint32_t p = obj_pos_[obj];
    if (p == none) return;
    owner_[p] = none;
    obj_pos_[obj] = none;
  }

  std::uint64_t dram_reads(std::uint64_t capacity) const {
    const auto m = static_cast<std::size_t>(
        std::lower_bound(caps_.begin(), caps_.end(), capacity) - caps_.begin());
    std::uint64_t r = 0;
    for (std::size_t k = m + 1; k < miss_add_.size(); ++k) r += miss_add_[k];
    return r;
  }
  std::uint64_t writes() const { return writes_; }
  std::uint64_t requested() const { return request_; }
  std::uint64_t first_access_reads() const { return first_reads_; }
  std::uint64_t max_reuse_distance() const { return max_reuse_distance_; }

 private:
  // Moves obj to the top of the recency stack; returns its stack distance in
  // bytes (infinite on a first access).
  std::uint64_t touch(std::uint32_t obj, std::uint64_t bytes) {
    std::uint64_t d = infinite;
    if (obj != none) {
      const std::uint32_t p = obj_pos_[obj];
      if (p != none) {
        d = bytes + (total_ - prefix(p));
        add(p, -bytes);
        owner_[p] = none;
      }
    }
    if (next_ == size_) compact();
    const std::uint32_t t = next_++;
    add(t, bytes);
    owner_[t] = obj;
    if (obj != none) obj_pos_[obj] = t;
    return d;
  }

  void add(std::uint32_t pos, std::uint64_t delta) {  // delta may be a negated value
    weight_[pos] += delta;
    total_ += delta;
    for (std::size_t i = pos + 1; i <= size_; i += i & (~i + 1)) tree_[i] += delta;
  }

  std::uint64_t prefix(std::uint32_t pos) const {  // sum of weights at positions <= pos
    std::uint64_t s = 0;
    for (std::size_t i = pos + 1; i > 0; i -= i & (~i + 1)) s += tree_[i];
    return s;
  }

  void reset_tree(std::size_t size) {
    size_ = size;
    tree_.assign(size + 1, 0);
    weight_.assign(size, 0);
    owner_.assign(size, none);
  }

  // Renumbers the stack: one entry per tracked object, with the bytes of the
  // untracked entries before it merged into it (they lie below it, so every
  // distance that can still be asked for is unchanged), plus one trailing entry.
  void compact() {
    std::vector<std::uint64_t> w;
    std::vector<std::uint32_t> own;
    std::uint64_t pending = 0;
    for (std::uint32_t p = 0; p < next_; ++p) {
      pending += weight_[p];
      if (owner_[p] != none) {
        w.push_back(pending);
        own.push_back(owner_[p]);
        pending = 0;
      }
    }
    if (pending != 0) {
      w.push_back(pending);
      own.push_back(none);
    }
    if (w.size() > (std::size_t{1} << 30)) throw Error("L2 simulation: too many live objects");
    reset_tree(std::max<std::size_t>(4096, 2 * w.size() + 1024));
    for (std::size_t p = 0; p < w.size(); ++p) {
      weight_[p] = w[p];
      owner_[p] = own[p];
      if (own[p] != none) obj_pos_[own[p]] = static_cast<std::uint32_t>(p);
      tree_[p + 1] = w[p];
    }
    for (std::size_t i = 1; i <= size_; ++i) {  // linear Fenwick build
      const std::size_t up = i + (i & (~i + 1));
      if (up <= size_) tree_[up] += tree_[i];
    }
    next_ = static_cast<std::uint32_t>(w.size());
  }

  std::vector<std::uint64_t> caps_;
  std::vector<std::uint64_t> miss_add_;  // [k]: read bytes that miss at caps_[0..k-1]
  std::vector<std::uint32_t> obj_pos_;
  std::vector<std::uint64_t> tree_, weight_;
  std::vector<std::uint32_t> owner_;
  std::size_t size_ = 0;
  std::uint32_t next_ = 0;
  std::uint64_t total_ = 0;
  std::uint64_t request_ = 0, writes_ = 0, first_reads_ = 0;
  std::uint64_t max_reuse_distance_ = 0;
};

struct Stats {
  double heads = 0, kv_heads = 0;
  std::uint64_t waves = 0, steps = 0;
};

void refuse_if_too_large(const Shape& s, std::uint64_t accesses, const char* what) {
  if (accesses > max_l2_sim_accesses)
    throw Error(std::string("shape ") + describe(s) + ": " + what + " would make " +
                std::to_string(accesses) + " L2 accesses (at most " +
                std::to_string(max_l2_sim_accesses) +
                "); use bigger --block-rows/--block-cols or a shorter sequence");
}

std::uint64_t flash_accesses(const Shape& s) {
  constexpr std::string_view what = "L2 simulation";
  const std::uint64_t nqb = query_blocks(s);
  // Closed form: a loop over query blocks would take minutes on a shape that
  // is refused anyway (e.g. 2^40 query blocks of one row).
  const std::uint64_t tiles_per_head = visited_tiles(s);
  return checked_add(checked_product(what, s.batch, s.heads, tiles_per_head),
                     checked_product(what, 2, s.batch, s.heads, nqb), what);
}

std::uint64_t standard_accesses(const Shape& s) {
  constexpr std::string_view what = "L2 simulation";
  const std::uint64_t panels = checked_product(what, s.batch, s.heads, query_blocks(s));
  return checked_add(checked_mul(6, panels, what), checked_product(what, 2, s.batch, s.heads), what);
}

// Counts of resident CTAs per head, and how many heads have at least one.
struct Occupancy {
  std::vector<std::uint32_t> count;
  std::uint64_t distinct = 0;
  explicit Occupancy(std::size_t n) : count(n, 0) {}
  void enter(std::size_t k) { distinct += count[k]++ == 0; }
  void leave(std::size_t k) { distinct -= --count[k] == 0; }
};

// The flash schedule: CTAs in launch order onto sm_count * ctas_per_sm slots,
// lockstep one key block per step, feeding the L2.
template <class Sink>
Stats run_flash(const Shape& s, const L2SimConfig& c, Sink& l2) {
  validate(s);
  validate(c);
  const std::uint64_t e = elem_bytes(s.dtype);
  const std::uint64_t nqb = query_blocks(s);
  const std::uint64_t nkb = key_blocks(s);
  const std::uint64_t group = group_size(s);
  constexpr std::string_view what = "L2 simulation";
  const std::uint64_t ctas = checked_product(what, s.batch, s.heads, nqb);
  refuse_if_too_large(s, flash_accesses(s), "the FlashAttention L2 simulation");
  const std::uint64_t kv_pairs = checked_mul(s.batch, s.kv_heads, what);
  const std::uint64_t slots = std::uint64_t{c.sm_count} * c.ctas_per_sm;

  struct Cta {
    std::uint64_t rows, first_j, visited, next_j;  // key blocks [first_j, visited)
    std::size_t head, pair;   // (batch, head) and (batch, kv head) indices
    std::uint32_t kv_slot;    // pool slot holding this kv head's K/V object ids
  };
  std::vector<std::uint64_t> remaining(kv_pairs, group * nqb);  // CTAs left per kv head
  std::vector<std::uint32_t> slot_of(kv_pairs, none);
  std::vector<std::uint32_t> free_slots;
  std::uint32_t pool = 0;
  Occupancy heads(checked_mul(s.batch, s.heads, what)), kv_heads(kv_pairs);

  std::uint64_t launched = 0;
  auto launch = [&]() {
    const std::uint64_t id = launched++;
    std::uint64_t b, h, i;
    if (c.order == Rasterization::query_block_major) {
      i = id % nqb;
      h = (id / nqb) % s.heads;
      b = id / (nqb * s.heads);
    } else {
      h = id % s.heads;
      i = (id / s.heads) % nqb;
      b = id / (s.heads * nqb);
    }
    Cta t;
    t.rows = std::min(s.block_rows, s.seq_q - i * s.block_rows);
    const KeyRange blocks = visible_key_blocks(s, i);
    t.first_j = t.next_j = blocks.begin;
    t.visited = std::max(blocks.begin, blocks.end);
    t.head = static_cast<std::size_t>(b * s.heads + h);
    t.pair = static_cast<std::size_t>(b * s.kv_heads + h / group);
    if (slot_of[t.pair] == none) {
      if (free_slots.empty()) {
        if ((std::uint64_t{pool} + 1) * nkb >= none)
          throw Error("shape " + describe(s) + ": too many K/V tiles in flight to simulate");
        slot_of[t.pair] = pool++;
        l2.reserve_objects(static_cast<std::size_t>(pool) * nkb);
      } else {
        slot_of[t.pair] = free_slots.back();
        free_slots.pop_back();
      }
    }
    t.kv_slot = slot_of[t.pair];
    heads.enter(t.head);
    kv_heads.enter(t.pair);
    return t;
  };

  Stats st;
  st.waves = ceil_div(ctas, slots);
  std::vector<Cta> resident, next;
  resident.reserve(static_cast<std::size_t>(std::min(slots, ctas)));
  next.reserve(resident.capacity());
  while (launched < ctas && resident.size() < slots) resident.push_back(launch());
  double heads_sum = 0, kv_sum = 0;
  const bool qo = c.q_o_allocate;
  while (!resident.empty()) {
    ++st.steps;
    heads_sum += static_cast<double>(heads.distinct);
    kv_sum += static_cast<double>(kv_heads.distinct);
    next.clear();
    for (Cta& t : resident) {
      if (t.next_j == t.first_j) l2.read(none, e * t.rows * s.head_dim, qo);
      if (t.next_j < t.visited) {
        const std::uint64_t j = t.next_j++;
        const std::uint64_t cols = std::min(s.block_cols, s.seq_kv - j * s.block_cols);
        l2.read(static_cast<std::uint32_t>(t.kv_slot * nkb + j), 2 * e * cols * s.head_dim);
      }
      if (t.next_j < t.visited) {
        next.push_back(t);
        continue;
      }
      l2.write(none, e * t.rows * s.head_dim, qo);
      heads.leave(t.head);
      kv_heads.leave(t.pair);
      if (--remaining[t.pair] == 0) {  // its K/V will not be read again
        for (std::uint64_t j = 0; j < nkb; ++j)
          l2.forget(static_cast<std::uint32_t>(t.kv_slot * nkb + j));
        free_slots.push_back(t.kv_slot);
        slot_of[t.pair] = none;
      }
    }
    // Freed slots take the next CTAs in launch order, from the next step on.
    while (launched < ctas && next.size() < slots) next.push_back(launch());
    resident.swap(next);
  }
  st.heads = heads_sum / static_cast<double>(st.steps);
  st.kv_heads = kv_sum / static_cast<double>(st.steps);
  return st;
}

// Standard attention's three kernels as one ordered stream of row panels
// (docs/model.md): GEMM writes S panel by panel, softmax reads S and writes P,
// GEMM reads P and V and writes O. Each GEMM reads its K or V once per head.
template <class Sink>
void run_standard(const Shape& s, const L2SimConfig& c, Sink& l2) {
  validate(s);
  validate(c);
  constexpr std::string_view what = "L2 simulation";
  const std::uint64_t e = elem_bytes(s.dtype);
  const std::uint64_t nqb = query_blocks(s);
  const std::uint64_t group = group_size(s);
  const std::uint64_t kv_pairs = checked_mul(s.batch, s.kv_heads, what);
  const std::uint64_t panels = checked_product(what, s.batch, s.heads, nqb);
  refuse_if_too_large(s, standard_accesses(s), "the standard-attention L2 simulation");
  const std::uint64_t objects = checked_add(checked_mul(2, kv_pairs, what),
                                            checked_mul(2, panels, what), what);
  if (objects >= (std::uint64_t{1} << 28))
    throw Error("shape " + describe(s) + ": the standard-attention L2 simulation would track " +
                std::to_string(objects) + " objects (at most " +
                std::to_string(std::uint64_t{1} << 28) + ")");
  l2.reserve_objects(static_cast<std::size_t>(objects));
  const auto k_id = [&](std::uint64_t pair) { return static_cast<std::uint32_t>(pair); };
  const auto v_id = [&](std::uint64_t pair) { return static_cast<std::uint32_t>(kv_pairs + pair); };
  const auto s_id = [&](std::uint64_t panel) {
    return static_cast<std::uint32_t>(2 * kv_pairs + panel);
  };
  const auto p_id = [&](std::uint64_t panel) {
    return static_cast<std::uint32_t>(2 * kv_pairs + panels + panel);
  };
  const std::uint64_t kv_bytes = e * s.seq_kv * s.head_dim;
  const bool qo = c.q_o_allocate;
  auto rows_of = [&](std::uint64_t i) { return std::min(s.block_rows, s.seq_q - i * s.block_rows); };

  // Kernel 1: S = Q K^T.
  for (std::uint64_t b = 0; b < s.batch; ++b)
    for (std::uint64_t h = 0; h < s.heads; ++h) {
      const std::uint64_t pair = b * s.kv_heads + h / group;
      l2.read(k_id(pair), kv_bytes);
      for (std::uint64_t i = 0; i < nqb; ++i) {
        l2.read(none, e * rows_of(i) * s.head_dim, qo);
        l2.write(s_id((b * s.heads + h) * nqb + i), e * rows_of(i) * s.seq_kv);
      }
      if (h % group == group - 1) l2.forget(k_id(pair));
    }
  // Kernel 2: P = softmax(S), row panel by row panel.
  for (std::uint64_t panel = 0; panel < panels; ++panel) {
    const std::uint64_t bytes = e * rows_of(panel % nqb) * s.seq_kv;
    l2.read(s_id(panel), bytes);
    l2.forget(s_id(panel));
    l2.write(p_id(panel), bytes);
  }
  // Kernel 3: O = P V.
  for (std::uint64_t b = 0; b < s.batch; ++b)
    for (std::uint64_t h = 0; h < s.heads; ++h) {
      const std::uint64_t pair = b * s.kv_heads + h / group;
      l2.read(v_id(pair), kv_bytes);
      for (std::uint64_t i = 0; i < nqb; ++i) {
        const std::uint64_t panel = (b * s.heads + h) * nqb + i;
        l2.read(p_id(panel), e * rows_of(i) * s.seq_kv);
        l2.forget(p_id(panel));
        l2.write(none, e * rows_of(i) * s.head_dim, qo);
      }
      if (h % group == group - 1) l2.forget(v_id(pair));
    }
}

L2SimResult result_at(const StackL2& l2, std::uint64_t capacity) {
  L2SimResult r;
  r.dram_read_bytes = l2.dram_reads(capacity);
  r.dram_write_bytes = l2.writes();
  r.dram_bytes = checked_add(r.dram_read_bytes, r.dram_write_bytes, "L2 simulation bytes");
  r.read_request_bytes = l2.requested();
  r.l2_hit_rate = r.read_request_bytes == 0
                      ? 0.0
                      : static_cast<double>(r.read_request_bytes - r.dram_read_bytes) /
                            static_cast<double>(r.read_request_bytes);
  r.l2_bytes_to_min = l2.max_reuse_distance();
  r.min_dram_bytes = l2.first_access_reads() + l2.writes();
  return r;
}

std::vector<std::uint64_t> curve(const StackL2& l2, const std::vector<std::uint64_t>& caps) {
  std::vector<std::uint64_t> out;
  out.reserve(caps.size());
  for (auto cap : caps) out.push_back(l2.dram_reads(cap) + l2.writes());
  return out;
}

// Passes the access stream on, for tests and other cache models.
struct TraceSink {
  const std::function<void(const L2Access&)>& f;
  void reserve_objects(std::size_t) {}
  void read(std::uint32_t obj, std::uint64_t bytes, bool allocate = true) {
    f({L2Access::Kind::read, obj, bytes, allocate});
  }
  void write(std::uint32_t obj, std::uint64_t bytes, bool allocate = true) {
    f({L2Access::Kind::write, obj, bytes, allocate});
  }
  void forget(std::uint32_t obj) { f({L2Access::Kind::forget, obj, 0, true}); }
};

// --- Decode ------------------------------------------------------------------

// The decode grid: CTA index spaces and object ids (docs/model.md).
struct DecodeLayout {
  const Shape& s;
  DecodeVariant v;
  std::uint64_t splits;
  bool packed, paged;
  std::uint64_t nh, rows_per_head, mb;  // heads of the grid, query rows per head index, row blocks
  std::uint64_t unit;                   // keys per KV object: Bc, or P when paged
  std::vector<std::uint64_t> unit_prefix, kb_prefix;  // ragged: objects before sequence b
  std::uint64_t units_total = 0, kb_total = 0;
  std::uint64_t q_base = 0, kv_base = 0, table_base = 0, partial_base = 0, objects = 0;

  DecodeLayout(const Shape& shape, DecodeVariant var, std::uint64_t n_splits)
      : s(shape), v(var), splits(n_splits), packed(gqa_packed(var)), paged(var == DecodeVariant::paged) {
    constexpr std::string_view what = "decode L2 simulation";
    nh = packed ? s.kv_heads : s.heads;
    rows_per_head = packed ? checked_mul(s.seq_q, group_size(s), what) : s.seq_q;
    mb = ceil_div(rows_per_head, decode_block_m);
    unit = paged ? s.page_size : s.block_cols;
    if (!s.context_lengths.empty()) {
      unit_prefix.push_back(0);
      kb_prefix.push_back(0);
      for (const SeqLen& seq : s.context_lengths) {
        const std::uint64_t l = seq.kv;
        unit_prefix.push_back(checked_add(unit_prefix.back(), ceil_div(l, unit), what));
        kb_prefix.push_back(checked_add(kb_prefix.back(), ceil_div(l, s.block_cols), what));
      }
      units_total = unit_prefix.back();
      kb_total = kb_prefix.back();
    } else {
      units_total = checked_mul(s.batch, ceil_div(s.seq_kv, unit), what);
      kb_total = checked_mul(s.batch, ceil_div(s.seq_kv, s.block_cols), what);
    }
    const std::uint64_t ctas_per_split = checked_product(what, s.batch, nh, mb);
    q_base = 0;
    kv_base = ctas_per_split;
    table_base = checked_add(kv_base, checked_mul(s.kv_heads, units_total, what), what);
    partial_base = checked_add(table_base, paged ? kb_total : 0, what);
    objects = checked_add(partial_base, splits > 1 ? checked_mul(ctas_per_split, splits, what) : 0, what);
  }
  std::uint64_t units_before(std::uint64_t b) const {
    return unit_prefix.empty() ? b * ceil_div(s.seq_kv, unit) : unit_prefix[b];
  }
  std::uint64_t kb_before(std::uint64_t b) const {
    return kb_prefix.empty() ? b * ceil_div(s.seq_kv, s.block_cols) : kb_prefix[b];
  }
  std::uint64_t kv_id(std::uint64_t b, std::uint64_t kvh, std::uint64_t u) const {
    return kv_base + s.kv_heads * units_before(b) + kvh * ceil_div(context_length(s, b), unit) + u;
  }
  std::uint64_t cta_index(std::uint64_t b, std::uint64_t hh, std::uint64_t m) const { return (b * nh + hh) * mb + m; }
  std::uint64_t rows(std::uint64_t m) const { return std::min(decode_block_m, rows_per_head - m * decode_block_m); }
};

// At most the accesses run_decode makes (exact except for paged runs, where a
// step that reads no new page makes no table read).
std::uint64_t decode_accesses(const Shape& s, DecodeVariant v, std::uint64_t splits) {
  constexpr std::string_view what = "decode L2 simulation";
  if (splits == 0) throw Error("decode: the split count must be positive");
  const bool paged = v == DecodeVariant::paged;
  const std::uint64_t nh = gqa_packed(v) ? s.kv_heads : s.heads;
  const std::uint64_t mb = ceil_div(gqa_packed(v) ? s.seq_q * group_size(s) : s.seq_q, decode_block_m);
  const std::uint64_t per_seq_fixed = splits + (splits > 1 ? splits + 1 : 0);  // writes + combine
  std::uint64_t total = 0;
  auto add_len = [&](std::uint64_t len, std::uint64_t count) {
    const std::uint64_t kbs = ceil_div(len, s.block_cols);
    const std::uint64_t used = std::min(splits, ceil_div(kbs, blocks_per_split(s, splits)));
    std::uint64_t per = used + kbs + per_seq_fixed;  // Q reads, key blocks, writes, combine
    if (paged) per = checked_add(per, checked_add(ceil_div(len, s.page_size), used, what), what);
    total = checked_add(total, checked_product(what, per, count, nh, mb), what);
  };
  if (s.context_lengths.empty()) add_len(s.seq_kv, s.batch);
  else
    for (const SeqGroup& g : s.context_lengths.groups()) add_len(g.item.kv, g.count);
  return total;
}

template <class Sink>
Stats run_decode(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c, Sink& l2) {
  validate(s);
  validate(c);
  if (!s.decode) throw Error("shape " + describe(s) + ": not a decode shape");
  if (v == DecodeVariant::floor) throw Error("decode_floor is a bound, not a kernel: nothing to simulate");
  refuse_if_too_large(s, decode_accesses(s, v, splits), "the decode L2 simulation");
  const DecodeLayout lay(s, v, splits);
  if (lay.objects >= (std::uint64_t{1} << 28))
    throw Error("shape " + describe(s) + ": the decode L2 simulation would track " + std::to_string(lay.objects) +
                " objects (at most " + std::to_string(std::uint64_t{1} << 28) + ")");
  l2.reserve_objects(static_cast<std::size_t>(lay.objects));
  const std::uint64_t e = elem_bytes(s.dtype), d = s.head_dim, G = group_size(s);
  const std::uint64_t ctas = checked_product("decode L2 simulation", s.batch, lay.nh, lay.mb, splits);
  const std::uint64_t slots = std::uint64_t{c.sm_count} * c.ctas_per_sm;
  const bool qo = c.q_o_allocate;
  const auto id32 = [](std::uint64_t id) { return static_cast<std::uint32_t>(id); };

  struct Cta {
    std::uint64_t b, hh, m, j, kvh, rows, pos, end, last_page;
    bool started;
  };
  std::uint64_t launched = 0;
  auto launch = [&]() {
    const std::uint64_t id = launched++;
    Cta t{};
    t.m = id % lay.mb;
    t.j = (id / lay.mb) % splits;
    t.hh = (id / (lay.mb * splits)) % lay.nh;
    t.b = id / (lay.mb * splits * lay.nh);
    t.kvh = lay.packed ? t.hh : t.hh / G;
    t.rows = lay.rows(t.m);
    const KeyRange k = split_key_range(s, splits, t.b, t.j);
    t.pos = k.begin;
    t.end = k.empty() ? k.begin : k.end;
    t.last_page = infinite;
    t.started = false;
    return t;
  };

  Stats st;
  st.waves = ceil_div(ctas, slots);
  std::vector<Cta> resident, next;
  while (launched < ctas && resident.size() < slots) resident.push_back(launch());
  while (!resident.empty()) {
    ++st.steps;
    next.clear();
    for (Cta& t : resident) {
      if (!t.started && t.pos < t.end) l2.read(id32(lay.q_base + lay.cta_index(t.b, t.hh, t.m)), e * t.rows * d, qo);
      t.started = true;
      if (t.pos < t.end) {
        const std::uint64_t kb = t.pos / s.block_cols;
        const std::uint64_t step_end = std::min((kb + 1) * s.block_cols, t.end);
        if (!lay.paged) {
          l2.read(id32(lay.kv_id(t.b, t.kvh, kb)), 2 * e * d * (step_end - t.pos));
        } else {
          const std::uint64_t first = t.pos / s.page_size, last = (step_end - 1) / s.page_size;
          const std::uint64_t from = t.last_page == infinite ? first : std::max(first, t.last_page + 1);
          if (from <= last) {
            l2.read(id32(lay.table_base + lay.kb_before(t.b) + kb), 4 * (last - from + 1));
            for (std::uint64_t pg = from; pg <= last; ++pg)
              l2.read(id32(lay.kv_id(t.b, t.kvh, pg)), 2 * e * d * s.page_size);
            t.last_page = last;
          }
        }
        t.pos = step_end;
        if (t.pos < t.end) {
          next.push_back(t);
          continue;
        }
      }
      if (splits > 1)  // fp32 partial O and LSE of its rows, for the combine kernel
        l2.write(id32(lay.partial_base + lay.cta_index(t.b, t.hh, t.m) * splits + t.j), t.rows * (4 * d + 4));
      else
        l2.write(none, e * t.rows * d, qo);
    }
    while (launched < ctas && next.size() < slots) next.push_back(launch());
    resident.swap(next);
  }
  if (splits > 1)  // the combine kernel: each row block's partials, then its O
    for (std::uint64_t b = 0; b < s.batch; ++b)
      for (std::uint64_t hh = 0; hh < lay.nh; ++hh)
        for (std::uint64_t m = 0; m < lay.mb; ++m) {
          const std::uint64_t ci = lay.cta_index(b, hh, m);
          for (std::uint64_t j = 0; j < splits; ++j) {
            l2.read(id32(lay.partial_base + ci * splits + j), lay.rows(m) * (4 * d + 4));
            l2.forget(id32(lay.partial_base + ci * splits + j));
          }
          l2.write(none, e * lay.rows(m) * d, qo);
        }
  return st;
}

}  // namespace

void for_each_flash_l2_access(const Shape& s, const L2SimConfig& c,
                              const std::function<void(const L2Access&)>& on_access) {
  TraceSink sink{on_access};
  run_flash(s, c, sink);
}

void for_each_standard_l2_access(const Shape& s, const L2SimConfig& c,
                                 const std::function<void(const L2Access&)>& on_access) {
  TraceSink sink{on_access};
  run_standard(s, c, sink);
}

L2SimResult flash_l2_sim(const Shape& s, const L2SimConfig& c) {
  StackL2 l2({c.l2_bytes});
  const Stats st = run_flash(s, c, l2);
  L2SimResult r = result_at(l2, c.l2_bytes);
  r.heads_per_wave = st.heads;
  r.kv_heads_per_wave = st.kv_heads;
  r.waves = st.waves;
  r.steps = st.steps;
  return r;
}

L2SimResult standard_l2_sim(const Shape& s, const L2SimConfig& c) {
  StackL2 l2({c.l2_bytes});
  run_standard(s, c, l2);
  return result_at(l2, c.l2_bytes);
}

std::vector<std::uint64_t> flash_l2_curve(const Shape& s, const L2SimConfig& c,
                                          const std::vector<std::uint64_t>& capacities) {
  StackL2 l2(capacities);
  run_flash(s, c, l2);
  return curve(l2, capacities);
}

std::vector<std::uint64_t> standard_l2_curve(const Shape& s, const L2SimConfig& c,
                                             const std::vector<std::uint64_t>& capacities) {
  StackL2 l2(capacities);
  run_standard(s, c, l2);
  return curve(l2, capacities);
}

std::uint64_t kv_footprint_bytes(const Shape& s) {
  validate(s);
  return checked_product("K/V footprint", 2, s.batch, s.kv_heads, s.seq_kv, s.head_dim,
                         elem_bytes(s.dtype));
}

std::uint64_t qo_footprint_bytes(const Shape& s) {
  validate(s);
  return checked_product("Q/O footprint", 2, s.batch, s.heads, s.seq_q, s.head_dim,
                         elem_bytes(s.dtype));
}

}  // namespace hbmscope

namespace hbmscope {

namespace {
// The split counts a decode shape's simulations may run with: --splits, or
// at most FlashAttention's cap.
std::uint64_t decode_split_bound(const Shape& s) { return s.splits != 0 ? s.splits : max_heuristic_splits; }
}  // namespace

std::uint64_t flash_l2_sim_accesses(const Shape& s) {
  validate(s);
  if (s.decode) {
    std::uint64_t n = 0;
    for (DecodeVariant v : {DecodeVariant::split, DecodeVariant::split_unpacked, DecodeVariant::paged})
      n = checked_add(n, decode_accesses(s, v, decode_split_bound(s)), "L2 simulation");
    return n;
  }
  return flash_accesses(s);
}

std::uint64_t standard_l2_sim_accesses(const Shape& s) {
  validate(s);
  if (s.decode) return 0;  // a decode row has no standard-attention simulation
  return standard_accesses(s);
}

std::uint64_t decode_l2_sim_accesses(const Shape& s, DecodeVariant v, std::uint64_t splits) {
  validate(s);
  return decode_accesses(s, v, splits);
}

L2SimResult decode_l2_sim(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c) {
  StackL2 l2({c.l2_bytes});
  const Stats st = run_decode(s, v, splits, c, l2);
  L2SimResult r = result_at(l2, c.l2_bytes);
  r.waves = st.waves;
  r.steps = st.steps;
  return r;
}

std::vector<std::uint64_t> decode_l2_curve(const Shape& s, DecodeVariant v, std::uint64_t splits,
                                           const L2SimConfig& c, const std::vector<std::uint64_t>& capacities) {
  StackL2 l2(capacities);
  run_decode(s, v, splits, c, l2);
  return curve(l2, capacities);
}

void for_each_decode_l2_access(const Shape& s, DecodeVariant v, std::uint64_t splits, const L2SimConfig& c,
                               const std::function<void(const L2Access&)>& on_access) {
  TraceSink sink{on_access};
  run_decode(s, v, splits, c, sink);
}

void check_l2_sim_size(const Shape& s) {
  if (s.decode) {
    for (DecodeVariant v : {DecodeVariant::split, DecodeVariant::split_unpacked, DecodeVariant::paged})
      refuse_if_too_large(s, decode_l2_sim_accesses(s, v, decode_split_bound(s)), "the decode L2 simulation");
    return;
  }
  refuse_if_too_large(s, flash_l2_sim_accesses(s), "the FlashAttention L2 simulation");
  refuse_if_too_large(s, standard_l2_sim_accesses(s), "the standard-attention L2 simulation");
}

std::uint64_t l2_sim_accesses(const Shape& s) {
  return std::max(flash_l2_sim_accesses(s), standard_l2_sim_accesses(s));
}

namespace {
void add_decode_l2_sim(Row& row, const L2SimConfig& c) {
  L2SimDetail d;
  d.l2_bytes = c.l2_bytes;
  d.sm_count = c.sm_count;
  d.ctas_per_sm = c.ctas_per_sm;
  d.order = "split-major";  // FlashAttention-2's split-KV grid: row block, split, head, sequence
  d.q_o_allocate = c.q_o_allocate;
  std::vector<VariantResult> added;
  for (const auto& v : row.variants) {
    const auto dv = parse_decode_variant(v.id);
    if (!dv || *dv == DecodeVariant::floor) continue;
    L2SimResult r;
    try {
      r = decode_l2_sim(row.shape, *dv, v.splits, c);
    } catch (const Error& e) {
      const std::string msg = e.what();
      if (msg.rfind("shape ", 0) == 0) throw;
      throw Error("shape " + describe(row.shape) + ": " + msg);
    }
    added.push_back({v.id + "_l2_sim", r.dram_bytes, intensity(row.flops, r.dram_bytes)});
    d.decode.push_back({v.id, v.splits, {r.dram_read_bytes, r.dram_write_bytes, r.l2_hit_rate, r.l2_bytes_to_min},
                        r.waves});
  }
  for (auto& a : added) row.variants.push_back(std::move(a));
  row.l2_sim = d;
}
}  // namespace

void add_l2_sim(Row& row, const L2SimConfig& c) {
  if (row.shape.decode) {
    add_decode_l2_sim(row, c);
    return;
  }
  L2SimResult f, st;
  try {
    f = flash_l2_sim(row.shape, c);
    st = standard_l2_sim(row.shape, c);
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.rfind("shape ", 0) == 0) throw;
    throw Error("shape " + describe(row.shape) + ": " + msg);
  }
  auto ratio = [&](std::uint64_t bytes) {
    return bytes == 0 ? 0.0 : static_cast<double>(row.flops) / static_cast<double>(bytes);
  };
  row.variants.push_back({"flash_l2_sim", f.dram_bytes, ratio(f.dram_bytes)});
  row.variants.push_back({"standard_l2_sim", st.dram_bytes, ratio(st.dram_bytes)});
  L2SimDetail d;
  d.l2_bytes = c.l2_bytes;
  d.sm_count = c.sm_count;
  d.ctas_per_sm = c.ctas_per_sm;
  d.order = std::string(rasterization_name(c.order));
  d.q_o_allocate = c.q_o_allocate;
  d.flash = {f.dram_read_bytes, f.dram_write_bytes, f.l2_hit_rate, f.l2_bytes_to_min};
  d.standard = {st.dram_read_bytes, st.dram_write_bytes, st.l2_hit_rate, st.l2_bytes_to_min};
  d.heads_per_wave = f.heads_per_wave;
  d.kv_heads_per_wave = f.kv_heads_per_wave;
  d.waves = f.waves;
  row.l2_sim = d;
}

}  // namespace hbmscope
