// The segment engine (docs/model.md, "Segments: schedules not in lockstep").
#include "l2_segments.hpp"
#include "big_array.hpp"
#include "radix_sort.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <memory_resource>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"

namespace hbmscope::l2 {

namespace {
constexpr std::uint32_t no_stream = ~0u;
}

std::uint64_t SegmentEngine::schedule(std::uint64_t slots, const std::uint64_t* len, std::uint64_t n,
                                      std::uint64_t* start, std::uint32_t* by_end, std::uint64_t* ends,
                                      std::uint64_t longest) {
  // A CTA finishing at step t frees its slot for the next CTA in launch order
  // from step t + 1 (the CTAs of one step leave before any enters); which of
  // the slots freed in one step it takes changes no distance. CTAs leave in
  // order of last step (each enters after the one it follows has left), so
  // their order by last step is the queue's, ties by id. The running CTAs are
  // kept by last step in a ring of buckets (a bit a bucket), as no CTA ends
  // more than its length past the last one to leave.
  auto out_of_range = [] {
    return Error("internal: the segment engine's schedule takes CTAs of 1 to 2^30 - 1 steps, fewer than 2^32 of them");
  };
  if (longest == 0)
    for (std::uint64_t i = 0; i < n; ++i) longest = std::max(longest, len[i]);
  longest = std::max<std::uint64_t>(longest, 1);
  if (longest >= (std::uint64_t{1} << 30) || n >= std::numeric_limits<std::uint32_t>::max()) throw out_of_range();
  std::uint64_t ring = 64;
  while (ring <= longest) ring *= 2;
  const std::uint64_t mask = ring - 1;
  constexpr std::uint32_t none = ~std::uint32_t{0};
  std::vector<std::uint32_t> first(ring, none);
  Array<std::uint32_t> next(n);  // (each written before it is read)
  std::vector<std::uint64_t> bits(ring / 64, 0);
  std::uint64_t running = 0, last = 0;  // the last step of the last CTA to leave
  auto enter = [&](std::uint64_t i, std::uint64_t end) {
    const std::uint64_t b = end & mask;
    next[i] = first[b];
    first[b] = static_cast<std::uint32_t>(i);
    bits[b / 64] |= std::uint64_t{1} << (b % 64);
    ++running;
  };
  auto leave_next = [&] {  // the CTA with the least last step (one of them) leaves
    const std::uint64_t p = last & mask;
    std::uint64_t w = p / 64, word = bits[w] & (~std::uint64_t{0} << (p % 64));
    while (word == 0) {
      w = (w + 1) % bits.size();
      word = bits[w];
    }
    const std::uint64_t b = w * 64 + static_cast<std::uint64_t>(__builtin_ctzll(word));
    last += (b - p) & mask;
    const std::uint32_t i = first[b];
    first[b] = next[i];
    if (first[b] == none) bits[w] &= ~(std::uint64_t{1} << (b % 64));
    --running;
    return i;
  };
  std::uint64_t steps = 0, ended = 0, tie = 0, tie_last = 0;  // the CTAs [tie, ended) leave at tie_last
  auto record = [&](std::uint32_t i) {
    if (by_end == nullptr) return;
    if (last != tie_last) {
      if (ended - tie > 1) std::sort(by_end + tie, by_end + ended);
      tie = ended;
      tie_last = last;
    }
    if (ends != nullptr) ends[ended] = last;  // (alike over a tie: its sort moves none)
    by_end[ended++] = i;
  };
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t length = len[i];  // (read before start[i] is written: they may be one array)
    if (length == 0 || length > longest) throw out_of_range();  // (a hint too short too)
    std::uint64_t s = 0;
    if (running == slots) {
      record(leave_next());
      s = last + 1;
    }
    start[i] = s;
    enter(i, s + length - 1);
    steps = std::max(steps, s + length);
  }
  while (running > 0) record(leave_next());
  if (by_end != nullptr && ended - tie > 1) std::sort(by_end + tie, by_end + ended);
  return steps;
}

std::uint64_t SegmentEngine::add_kernel(std::uint64_t slots, std::vector<std::uint64_t> lengths) {
  Kernel k;
  k.slots = std::max<std::uint64_t>(1, slots);
  k.first = len_.size();
  k.count = lengths.size();
  kernels_.push_back(k);
  len_.insert(len_.end(), lengths.begin(), lengths.end());
  return k.first;
}

void SegmentEngine::add_stream(std::uint64_t cta, std::uint32_t sub, std::uint64_t k0, std::uint64_t count,
                               std::uint64_t ns, std::uint64_t x0, std::uint64_t bytes, Op op, bool allocate) {
  if (count == 0) return;
  if (streams_.size() >= no_stream) throw Error("L2 simulation: too many streams for the segment engine");
  streams_.push_back({cta, k0, count, ns, x0, bytes, 0, sub, op, allocate, ReadCounts{bytes, 0, false, false}});
}

void SegmentEngine::add_reads(std::uint64_t cta, std::uint32_t sub, std::uint64_t k0, std::uint64_t count,
                              std::uint64_t ns, std::uint64_t x0, std::uint64_t bytes, ReadCounts counts) {
  add_stream(cta, sub, k0, count, ns, x0, bytes, Op::read);
  if (count != 0) streams_.back().counts = counts;
}

namespace {

// The accessor of each object of one namespace as streams are added in
// access order: an interval map from object to stream.
class Painting {
 public:
  struct Piece {
    std::uint64_t lo, hi;  // [lo, hi)
    std::uint32_t owner;
  };
  // The owners over [lo, hi) (no_stream where none), then [lo, hi) -> s.
  void paint(std::uint64_t lo, std::uint64_t hi, std::uint32_t s, std::vector<Piece>& out) {
    out.clear();
    auto it = split(lo);
    const auto end = split(hi);
    std::uint64_t at = lo;
    for (auto i = it; i != end; ++i) {
      if (i->first > at) out.push_back({at, i->first, no_stream});
      out.push_back({i->first, i->second.first, i->second.second});
      at = i->second.first;
    }
    if (at < hi) out.push_back({at, hi, no_stream});
    m_.erase(it, end);
    m_.emplace(lo, std::make_pair(hi, s));
  }
  void clear() { m_.clear(); }

 private:
  // (Nodes from a pool: a paint allocates one or two and frees as many.)
  using Map = std::pmr::map<std::uint64_t, std::pair<std::uint64_t, std::uint32_t>>;
  // The first interval starting at or after x, splitting one that holds x.
  Map::iterator split(std::uint64_t x) {
    auto it = m_.lower_bound(x);
    if (it != m_.end() && it->first == x) return it;
    if (it == m_.begin()) return it;
    auto prev = std::prev(it);
    if (prev->second.first <= x) return it;
    const auto tail = std::make_pair(prev->second.first, prev->second.second);
    prev->second.first = x;
    return m_.emplace_hint(it, x, tail);
  }
  std::pmr::unsynchronized_pool_resource pool_;
  Map m_{&pool_};
};

}  // namespace

void SegmentEngine::link() {
  if (linked_) return;
  linked_ = true;
  // Kernels one after another; streams' phases from their CTAs' starts.
  start_.assign(len_.size(), 0);
  std::uint64_t offset = 0;
  for (Kernel& k : kernels_) {
    k.offset = offset;
    k.steps = schedule(k.slots, len_.data() + k.first, k.count, start_.data() + k.first);
    for (std::uint64_t i = k.first; i < k.first + k.count; ++i) start_[i] += offset;
    offset = checked_add(offset, k.steps, "L2 simulation steps");
  }
  for (Stream& s : streams_)
    s.phase = static_cast<std::int64_t>(start_[s.cta] + s.k0) - static_cast<std::int64_t>(s.x0);

  // Streams of shared objects, each namespace in access order: by step of
  // any common object (phase), then CTA, then position in the step.
  std::vector<std::uint32_t> order;
  for (std::uint32_t i = 0; i < streams_.size(); ++i) {
    const Stream& s = streams_[i];
    if (s.allocate && s.ns != unique) order.push_back(i);
    else if (s.allocate) segs_.push_back({i, s.x0, s.x0 + s.count});
  }
  // (Sorted by keys held beside the index, with the objects each accesses:
  // no stream is touched twice.)
  struct Key {
    std::uint64_t ns;
    std::int64_t phase;
    std::uint64_t cta, x0, count;
    std::uint32_t sub, stream;
  };
  std::vector<Key> keys(order.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    const Stream& a = streams_[order[k]];
    keys[k] = {a.ns, a.phase, a.cta, a.x0, a.count, a.sub, order[k]};
  }
  std::vector<std::uint32_t>().swap(order);
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    if (a.ns != b.ns) return a.ns < b.ns;
    if (a.phase != b.phase) return a.phase < b.phase;
    if (a.cta != b.cta) return a.cta < b.cta;
    return a.sub < b.sub;
  });
  // A namespace whose streams access one object each, of few: each object's
  // last accessor in an array (the painting's pieces are single objects).
  std::vector<std::uint32_t> last, next_of;
  auto single_objects = [&](std::size_t lo, std::size_t hi) {
    std::uint64_t most = 0;
    for (std::size_t k = lo; k < hi; ++k) {
      if (keys[k].count != 1) return false;
      most = std::max(most, keys[k].x0);
    }
    if (most >= 4 * (hi - lo) + (std::uint64_t{1} << 16)) return false;
    last.assign(most + 1, no_stream);
    next_of.resize(hi - lo);
    for (std::size_t k = hi; k-- > lo;) {  // successors
      next_of[k - lo] = last[keys[k].x0];
      last[keys[k].x0] = keys[k].stream;
    }
    std::fill(last.begin(), last.end(), no_stream);
    for (std::size_t k = lo; k < hi; ++k) {  // predecessors
      segs_.push_back({keys[k].stream, keys[k].x0, keys[k].x0 + 1, last[keys[k].x0], next_of[k - lo]});
      last[keys[k].x0] = keys[k].stream;
    }
    return true;
  };
  std::vector<Painting::Piece> pieces, succ;  // successors' pieces: stream k's from succ_at[k]
  std::vector<std::size_t> succ_at(keys.size() + 1);
  Painting paint;
  for (std::size_t lo = 0; lo < keys.size();) {
    std::size_t hi = lo;
    while (hi < keys.size() && keys[hi].ns == keys[lo].ns) ++hi;
    if (single_objects(lo, hi)) {
      lo = hi;
      continue;
    }
    paint.clear();
    succ.clear();
    for (std::size_t k = hi; k-- > lo;) {  // successors: the next accessor, painting backwards
      const Key& s = keys[k];
      paint.paint(s.x0, s.x0 + s.count, s.stream, pieces);
      succ_at[k] = succ.size();
      succ.insert(succ.end(), pieces.begin(), pieces.end());
    }
    paint.clear();
    for (std::size_t k = lo; k < hi; ++k) {  // predecessors, and segments where both are constant
      const Key& s = keys[k];
      paint.paint(s.x0, s.x0 + s.count, s.stream, pieces);
      std::size_t a = 0, b = succ_at[k];
      std::uint64_t at = s.x0;
      while (at < s.x0 + s.count) {
        const std::uint64_t end = std::min(pieces[a].hi, succ[b].hi);
        segs_.push_back({s.stream, at, end, pieces[a].owner, succ[b].owner});
        at = end;
        if (pieces[a].hi == at) ++a;
        if (succ[b].hi == at) ++b;
      }
    }
    lo = hi;
  }
}

void SegmentEngine::evaluate(Tally& t, ReadObserver* obs) {
  constexpr std::string_view what = "L2 simulation bytes";
  link();
  // Accesses that bypass the L2: misses and writes, nothing more.
  for (const Stream& s : streams_) {
    if (s.allocate) continue;
    if (s.op == Op::read) t.reads(infinite, 0, s.count, s.counts.read);
    else if (s.op == Op::write) t.write(checked_mul(s.count, s.bytes, what));
  }
  const EventIndex index(*this);
  std::vector<std::uint32_t> hits;
  std::vector<PointRead> points;  // single reads: evaluated together (l2_segment_points.cpp)
  std::vector<PointRead> runs;    // several reads: by the first step of their window

  for (std::uint32_t i = 0; i < segs_.size(); ++i) {
    const Segment& q = segs_[i];
    const Stream& sq = streams_[q.stream];
    const std::uint64_t count = q.b - q.a;
    if (sq.op == Op::write) {
      t.write(checked_mul(count, sq.bytes, what));
      continue;
    }
    if (sq.op == Op::alloc) continue;
    if (q.pred == no_stream) {  // first accesses
      if (sq.counts.first_elsewhere) continue;
      t.reads(infinite, 0, count, sq.counts.read);
      t.writebacks(infinite, 0, count, sq.counts.writeback);
      continue;
    }
    const std::int64_t g = sq.phase - streams_[q.pred].phase;
    const std::int64_t T0 = sq.phase + static_cast<std::int64_t>(q.a);
    // A single read a step or two after its predecessor goes with the runs:
    // its bound settles it without the single reads' trees (a hit, mostly).
    (count == 1 && g > 2 ? points : runs).push_back({i, T0, g});
  }
  std::sort(runs.begin(), runs.end(),
            [](const PointRead& x, const PointRead& y) { return x.T0 - x.g < y.T0 - y.g; });

  // Slope changes inside a segment's steps (T0, T1]; those at or before T0
  // set the first piece's slope, those after T1 do not matter.
  std::vector<std::pair<std::int64_t, std::int64_t>> slope_ev;
  // Slope changes by offset from T0 where a segment is not long beside them,
  // with a bit a step for those touched: both all zero between runs.
  std::vector<std::int64_t> dense;
  std::vector<std::uint64_t> touched;

  const StepBytes step_bytes(index);
  settled_ = 0;

  Tally::Batch batch(t);
  // A run's reads lie between its own bytes and those plus everything
  // accessed in a window of g + 1 steps (infinite past 64 bits: no bound).
  auto upper = [&](const PointRead& run) {
    const Segment& q = segs_[run.seg];
    const Stream& sq = streams_[q.stream];
    const std::int64_t T1 = sq.phase + static_cast<std::int64_t>(q.b) - 1;
    std::uint64_t window = 0, hi = 0;
    if (__builtin_mul_overflow(static_cast<std::uint64_t>(run.g + 1), step_bytes.max(run.T0 - run.g, T1), &window) ||
        __builtin_add_overflow(sq.bytes, window, &hi))
      return infinite;
    return hi;
  };
  auto evaluate_run = [&](const PointRead& run, EventIndex::Stabber& stab) {
    const Segment& q = segs_[run.seg];
    const Stream& sq = streams_[q.stream];
    const Stream& sp = streams_[q.pred];
    const std::int64_t g = sq.phase - sp.phase;
    const std::int64_t T0 = sq.phase + static_cast<std::int64_t>(q.a);
    const std::int64_t T1 = sq.phase + static_cast<std::int64_t>(q.b) - 1;
    const bool observed = obs != nullptr && sq.counts.observed;
    // D(b) = own bytes + sum over events R of z_R |[A_R, B_R] n [b - m, b - gamma]|.
    std::uint64_t d0 = sq.bytes;
    std::int64_t slope = 0;
    slope_ev.clear();
    auto change = [&](std::int64_t at, std::int64_t dz) {
      if (at <= T0) slope += dz;
      else if (at <= T1) slope_ev.push_back({at, dz});
    };
    stab.overlapping(T0 - g, T1, hits);
    const std::uint64_t rp = rank_of(sp), rq = rank_of(sq);
    for (std::uint32_t k : hits) {
      const EventIndex::Event& e = index.ev[k];
      const std::int64_t alpha = rp < e.rank ? 0 : 1;   // (c_R, s_R) <= (c_p, s_p)
      const std::int64_t gamma = e.rank < rq ? 0 : 1;   // (c_R, s_R) >= (c_q, s_q)
      std::int64_t m = g - alpha;
      if (e.G >= 0) m = std::min(m, e.G - 1 + (rq < e.rank_next ? 1 : 0));  // successor after q
      if (m < gamma) continue;
      const auto z = static_cast<std::int64_t>(e.z);
      const std::int64_t lo = std::max(e.A, T0 - m), hi = std::min(e.B, T0 - gamma);
      if (hi >= lo) d0 += static_cast<std::uint64_t>(z * (hi - lo + 1));
      change(e.A + gamma, z);
      change(e.B + gamma + 1, -z);
      change(e.A + m + 1, -z);
      change(e.B + m + 2, z);
    }
    // The pieces of D over [T0, T1], their slope changes in step order: a
    // dense array where the segment is not long beside its changes (found
    // through their bits, 64 steps a word), else sorted.
    const auto len = static_cast<std::size_t>(T1 - T0);
    std::int64_t pos = T0;
    std::uint64_t d = d0;
    // The piece [pos, next - 1]; then D(next) = D(next - 1) + the slope there.
    auto piece_to = [&](std::int64_t next, std::int64_t dz) {
      const std::int64_t n = next - pos;
      batch.reads(d, slope, static_cast<std::uint64_t>(n));
      if (observed) obs->reads(static_cast<std::uint64_t>(pos - sq.phase), d, slope, static_cast<std::uint64_t>(n));
      slope += dz;
      d += static_cast<std::uint64_t>(slope + (slope - dz) * (n - 1));
      pos = next;
    };
    if (len < dense_steps_most() && len <= 256 * slope_ev.size() + 4096) {
      if (dense.size() <= len) {
        dense.resize(len + 1, 0);
        touched.resize(len / 64 + 1, 0);
      }
      for (const auto& [at, dz] : slope_ev) {
        const auto k = static_cast<std::size_t>(at - T0);
        dense[k] += dz;
        touched[k / 64] |= std::uint64_t{1} << (k % 64);
      }
      for (std::size_t w = 0; w <= len / 64; ++w) {
        for (std::uint64_t bits = touched[w]; bits != 0; bits &= bits - 1) {
          const std::size_t k = w * 64 + static_cast<std::size_t>(__builtin_ctzll(bits));
          const std::int64_t dz = dense[k];
          dense[k] = 0;
          if (dz != 0) piece_to(T0 + static_cast<std::int64_t>(k), dz);
        }
        touched[w] = 0;
      }
    } else {
      std::sort(slope_ev.begin(), slope_ev.end());
      for (std::size_t i = 0; i < slope_ev.size();) {
        const std::int64_t at = slope_ev[i].first;
        std::int64_t dz = 0;
        while (i < slope_ev.size() && slope_ev[i].first == at) dz += slope_ev[i++].second;
        if (dz != 0) piece_to(at, dz);
      }
    }
    batch.reads(d, slope, static_cast<std::uint64_t>(T1 - pos + 1));
    if (observed) obs->reads(static_cast<std::uint64_t>(pos - sq.phase), d, slope, static_cast<std::uint64_t>(T1 - pos + 1));
    batch.flush(t, sq.counts.read, sq.counts.writeback);
  };
  // Runs whose bounds could settle them wait for the others and for the
  // single reads, which raise the distance known to be reached; then those
  // whose bound lies below it are counted by their bounds, the rest
  // evaluated.
  std::vector<PointRead> waiting;
  std::vector<std::uint64_t> waiting_hi;
  {
    EventIndex::Stabber stab(index);
    for (const PointRead& run : runs) {
      const Segment& q = segs_[run.seg];
      const Stream& sq = streams_[q.stream];
      const std::uint64_t hi = upper(run);
      if (settled(t, sq.bytes, hi, infinite) &&
          (obs == nullptr || !sq.counts.observed ||
           hi <= obs->indifferent_up_to(static_cast<std::uint64_t>(run.T0 - sq.phase), q.b - q.a))) {
        waiting.push_back(run);
        waiting_hi.push_back(hi);
      } else {
        evaluate_run(run, stab);
      }
    }
  }
  settled_ += evaluate_points(t, index, step_bytes, points, obs);
  const std::uint64_t reached = t.max_reuse_distance();
  EventIndex::Stabber stab(index);
  for (std::size_t i = 0; i < waiting.size(); ++i) {
    const Segment& q = segs_[waiting[i].seg];
    const Stream& sq = streams_[q.stream];
    if (waiting_hi[i] >= reached) {
      evaluate_run(waiting[i], stab);
      continue;
    }
    const std::uint64_t count = q.b - q.a;
    const std::size_t k = t.bucket_of(waiting_hi[i]);
    t.read_in_bucket(k, checked_mul(count, sq.counts.read, what));
    if (sq.counts.writeback != 0) t.writeback_in_bucket(k, checked_mul(count, sq.counts.writeback, what));
    settled_ += count;
  }
}

void SegmentEngine::run(Tally& t) { evaluate(t); }

SegmentEngine::EventIndex::EventIndex(const SegmentEngine& e) {
  ev.reserve(e.segs_.size());
  for (std::uint32_t i = 0; i < e.segs_.size(); ++i) {
    const Segment& g = e.segs_[i];
    const Stream& s = e.streams_[g.stream];
    Event v{s.phase + static_cast<std::int64_t>(g.a), s.phase + static_cast<std::int64_t>(g.b) - 1, -1, s.bytes,
            rank_of(s), 0, i};
    if (g.succ != ~0u) {
      v.G = e.streams_[g.succ].phase - s.phase;
      v.rank_next = rank_of(e.streams_[g.succ]);
    }
    ev.push_back(v);
  }
  radix_sort(ev, [](const Event& x) { return ordered(x.A); });
}

void SegmentEngine::EventIndex::Stabber::overlapping(std::int64_t lo, std::int64_t hi,
                                                     std::vector<std::uint32_t>& hits) {
  // Those that start by lo and end at or after it (the list of those started,
  // shed of the ended as it is read), then those that start in (lo, hi].
  hits.clear();
  while (next_ < ix_.ev.size() && ix_.ev[next_].A <= lo) active_.push_back(static_cast<std::uint32_t>(next_++));
  std::size_t w = 0;
  for (const std::uint32_t k : active_) {
    if (ix_.ev[k].B < lo) continue;
    active_[w++] = k;
    hits.push_back(k);
  }
  active_.resize(w);
  for (std::size_t k = next_; k < ix_.ev.size() && ix_.ev[k].A <= hi; ++k) hits.push_back(static_cast<std::uint32_t>(k));
}

}  // namespace hbmscope::l2
