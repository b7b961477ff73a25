// The segment engine's single reads, evaluated together (docs/l2-simulation.md,
// "Single reads"): a read whose predecessor is far back (the first read of a
// key block by the next head of a GQA group) would meet every segment in
// between; here it costs two Fenwick-tree queries and, unless its bounds
// settle it ("Reads settled by bounds"), the segments at three steps. Also
// the bytes accessed at each step, which give those bounds.
#include <algorithm>

#include "l2_segments.hpp"
#include "radix_sort.hpp"
#include "step_index.hpp"

namespace hbmscope::l2 {

namespace {

// Sums of z |[A, B] n (-inf, v]| over ramps added and removed, at any step v:
// a Fenwick tree of slopes and intercepts over the breakpoints, which the
// caller gives by index into their sorted list (mod 2^64: the sums asked for
// fit in 64 bits, their terms need not). The first ramps may be added before
// the tree is made, in O(1) each.
class RampSum {
 public:
  explicit RampSum(std::size_t breakpoints) : t_(breakpoints + 1) {}

  // A ramp that starts at A and ends after B, breakpoints ia and ib.
  template <bool made = true>
  void ramp(std::size_t ia, std::int64_t A, std::size_t ib, std::int64_t B, std::uint64_t z, bool remove) {
    const std::uint64_t s = remove ? 0 - z : z;
    add<made>(ia + 1, s, 0 - s * static_cast<std::uint64_t>(A - 1));
    add<made>(ib + 1, 0 - s, s * static_cast<std::uint64_t>(B));
  }
  void make() {
    for (std::size_t i = 1; i < t_.size(); ++i) {
      const std::size_t j = i + (i & (0 - i));
      if (j < t_.size()) {
        t_[j].s += t_[i].s;
        t_[j].c += t_[i].c;
      }
    }
  }
  // At step v, with k breakpoints at or before it.
  std::uint64_t at(std::size_t k, std::int64_t v) const {
    std::uint64_t s = 0, c = 0;
    for (; k > 0; k -= k & (0 - k)) {
      s += t_[k].s;
      c += t_[k].c;
    }
    return s * static_cast<std::uint64_t>(v) + c;
  }

 private:
  struct Node {
    std::uint64_t s = 0, c = 0;
  };
  template <bool made>
  void add(std::size_t i, std::uint64_t s, std::uint64_t c) {
    if (!made) {
      t_[i].s += s;
      t_[i].c += c;
      return;
    }
    for (; i < t_.size(); i += i & (0 - i)) {
      t_[i].s += s;
      t_[i].c += c;
    }
  }
  std::vector<Node> t_;
};

std::uint64_t overlap(std::int64_t A, std::int64_t B, std::int64_t lo, std::int64_t hi) {
  lo = std::max(A, lo);
  hi = std::min(B, hi);
  return hi >= lo ? static_cast<std::uint64_t>(hi - lo + 1) : 0;
}

}  // namespace

SegmentEngine::StepBytes::StepBytes(const EventIndex& ix) {
  // Segments come in by first step (the index's order) and leave after their
  // last, sorted here; the two merged, a level a step where either changes.
  std::vector<std::pair<std::int64_t, std::uint64_t>> out;  // (past-last step, bytes)
  out.reserve(ix.ev.size());
  for (const EventIndex::Event& e : ix.ev) out.push_back({e.B + 1, e.z});
  radix_sort(out, [](const auto& x) { return ordered(x.first); });
  std::vector<std::uint64_t> level;
  std::uint64_t now = 0;
  for (std::size_t i = 0, j = 0; i < ix.ev.size() || j < out.size();) {
    const std::int64_t step =
        j == out.size() || (i < ix.ev.size() && ix.ev[i].A < out[j].first) ? ix.ev[i].A : out[j].first;
    for (; i < ix.ev.size() && ix.ev[i].A == step; ++i) now += ix.ev[i].z;
    for (; j < out.size() && out[j].first == step; ++j) now -= out[j].second;
    at_.push_back(step);
    level.push_back(now);
  }
  const std::size_t n = level.size();
  tree_.assign(2 * n, 0);
  std::copy(level.begin(), level.end(), tree_.begin() + static_cast<std::ptrdiff_t>(n));
  for (std::size_t i = n; i-- > 1;) tree_[i] = std::max(tree_[2 * i], tree_[2 * i + 1]);
}

std::size_t SegmentEngine::StepBytes::piece(std::int64_t step) const {
  const std::size_t k = static_cast<std::size_t>(std::upper_bound(at_.begin(), at_.end(), step) - at_.begin());
  return k == 0 ? at_.size() : k - 1;
}

std::uint64_t SegmentEngine::StepBytes::at(std::int64_t step) const {
  const std::size_t k = piece(step);
  return k == at_.size() ? 0 : tree_[at_.size() + k];
}

std::uint64_t SegmentEngine::StepBytes::max(std::int64_t lo, std::int64_t hi) const {
  const std::size_t n = at_.size();
  std::size_t a = piece(lo), b = piece(hi);
  if (b == n) return 0;
  if (a == n) a = 0;
  std::uint64_t m = 0;
  for (a += n, b += n + 1; a < b; a /= 2, b /= 2) {
    if (a & 1) m = std::max(m, tree_[a++]);
    if (b & 1) m = std::max(m, tree_[--b]);
  }
  return m;
}

std::uint64_t SegmentEngine::evaluate_points(Tally& t, const EventIndex& index, const StepBytes& bytes,
                                    std::vector<PointRead>& points, ReadObserver* obs) const {
  if (points.empty()) return 0;
  constexpr std::int64_t none = -1;
  // The segments as the index holds them (steps, gap, bytes, ranks); by_gap:
  // those with a successor, by their place in it.
  const std::vector<EventIndex::Event>& rs = index.ev;
  const std::size_t n = rs.size();
  std::vector<std::int64_t> coords;
  coords.reserve(4 * n);
  std::vector<std::uint32_t> by_gap;
  for (std::uint32_t i = 0; i < n; ++i) {
    const EventIndex::Event& r = rs[i];
    coords.push_back(r.A);
    coords.push_back(r.B + 1);
    if (r.G != none) {
      coords.push_back(r.A + r.G);
      coords.push_back(r.B + r.G + 1);
      by_gap.push_back(i);
    }
  }
  radix_sort(coords, [](std::int64_t x) { return ordered(x); });
  coords.erase(std::unique(coords.begin(), coords.end()), coords.end());
  const StepIndex coord(coords);

  // Is segment k "short" for a read of gap g and rank rq: does its successor
  // come sooner, (G, its rank) <= (g, rq)? Then its accesses in the window
  // count only while not yet re-read.
  auto is_short = [](const EventIndex::Event& r, std::int64_t g, std::uint64_t rq) {
    return r.G != none && (r.G < g || (r.G == g && r.rank_next <= rq));
  };
  // The ranks of each read and of its predecessor.
  std::vector<std::uint64_t> rq_of(points.size()), rp_of(points.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    const Segment& q = segs_[points[i].seg];
    rq_of[i] = rank_of(streams_[q.stream]);
    rp_of[i] = rank_of(streams_[q.pred]);
  }

  // The distances but for the order within a step. Every segment starts
  // "long" (its accesses in [T0 - g, T0] count); by g and rank, those that
  // become short move to the second sum (accesses in [T0 - G + 1, T0]).
  std::vector<std::uint64_t> dist(points.size());
  std::vector<std::uint32_t> order(points.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  {
    // Each segment's breakpoints by index: A, B + 1, A + G, B + G + 1.
    auto index_of = [&](std::int64_t v) { return coord.lower(v); };
    auto count_to = [&](std::int64_t v) { return coord.upper(v); };
    RampSum longs(coords.size()), shorts(coords.size());
    for (const EventIndex::Event& r : rs) longs.ramp<false>(index_of(r.A), r.A, index_of(r.B + 1), r.B, r.z, false);
    longs.make();
    // By (G, rank of the successor) and (g, rank): stable sorts, the second key first.
    radix_sort(by_gap, [&](std::uint32_t x) { return rs[x].rank_next; });
    radix_sort(by_gap, [&](std::uint32_t x) { return ordered(rs[x].G); });
    radix_sort(order, [&](std::uint32_t x) { return rq_of[x]; });
    radix_sort(order, [&](std::uint32_t x) { return ordered(points[x].g); });
    std::size_t moved = 0;
    for (const std::uint32_t i : order) {
      const PointRead& pt = points[i];
      while (moved < by_gap.size() && is_short(rs[by_gap[moved]], pt.g, rq_of[i])) {
        const EventIndex::Event& r = rs[by_gap[moved++]];
        const std::size_t ia = index_of(r.A), ib = index_of(r.B + 1);
        longs.ramp(ia, r.A, ib, r.B, r.z, true);
        shorts.ramp(ia, r.A, ib, r.B, r.z, false);
        shorts.ramp(index_of(r.A + r.G), r.A + r.G, index_of(r.B + r.G + 1), r.B + r.G, r.z, true);
      }
      const std::size_t k0 = count_to(pt.T0);
      dist[i] = streams_[segs_[pt.seg].stream].bytes + longs.at(k0, pt.T0) -
                longs.at(count_to(pt.T0 - pt.g - 1), pt.T0 - pt.g - 1) + shorts.at(k0, pt.T0);
    }
  }

  // The order within a step adds at most the bytes accessed at T0 (segments
  // whose successor reads at T0) and takes away at most those accessed at T0
  // and at T0 - g. Reads whose bounds settle them are counted so; the others
  // are corrected below.
  std::vector<std::uint64_t> lo(points.size()), hi(points.size());
  std::uint64_t reached = t.max_reuse_distance();
  for (std::size_t i = 0; i < points.size(); ++i) {
    const std::uint64_t z = streams_[segs_[points[i].seg].stream].bytes;
    const std::uint64_t at = bytes.at(points[i].T0), less = at + bytes.at(points[i].T0 - points[i].g);
    lo[i] = std::max(z, dist[i] > less ? dist[i] - less : 0);
    hi[i] = dist[i] > infinite - at ? infinite : dist[i] + at;
    reached = std::max(reached, lo[i]);
  }
  std::vector<std::uint32_t> open;
  std::uint64_t by_bounds = 0;  // reads settled
  for (std::uint32_t i = 0; i < points.size(); ++i) {
    const Stream& sq = streams_[segs_[points[i].seg].stream];
    const bool observed = obs != nullptr && sq.counts.observed;
    if (settled(t, lo[i], hi[i], reached) &&
        (!observed || hi[i] <= obs->indifferent_up_to(static_cast<std::uint64_t>(points[i].T0 - sq.phase), 1))) {
      const std::size_t k = t.bucket_of(hi[i]);
      t.read_in_bucket(k, sq.counts.read);
      if (sq.counts.writeback != 0) t.writeback_in_bucket(k, sq.counts.writeback);
      ++by_bounds;
    } else {
      open.push_back(i);
    }
  }
  if (open.empty()) return by_bounds;

  // Segments of each stream, in object order (link() adds them so).
  std::vector<std::uint32_t> first(streams_.size() + 1, 0);
  for (const Segment& g : segs_) ++first[g.stream + 1];
  for (std::size_t i = 1; i < first.size(); ++i) first[i] += first[i - 1];
  std::vector<std::uint32_t> of_stream(n), place(n);  // place: a segment's in the index
  {
    std::vector<std::uint32_t> at(first.begin(), first.end() - 1);
    for (std::uint32_t i = 0; i < n; ++i) of_stream[at[segs_[i].stream]++] = i;
  }
  for (std::uint32_t i = 0; i < n; ++i) place[rs[i].seg] = i;
  // What the order within a step changes (exact minus the approximation
  // above), for a segment r (its steps, gap, bytes and ranks) and a read at
  // T0, g steps after its predecessor, of ranks rq and rp (the
  // predecessor's); it is zero unless r accesses at step T0, at T0 - g, or at
  // T0 - G (its successor at T0).
  auto correction = [&](const EventIndex::Event& r, std::int64_t T0, std::int64_t g, std::uint64_t rq,
                        std::uint64_t rp) -> std::uint64_t {
    const std::uint64_t approx = is_short(r, g, rq) ? overlap(r.A, r.B, T0 - r.G + 1, T0) : overlap(r.A, r.B, T0 - g, T0);
    const std::int64_t alpha = rp < r.rank ? 0 : 1;
    const std::int64_t gamma = r.rank < rq ? 0 : 1;
    std::int64_t m = g - alpha;
    if (r.G != none) m = std::min(m, r.G - 1 + (rq < r.rank_next ? 1 : 0));
    return (overlap(r.A, r.B, T0 - m, T0 - gamma) - approx) * r.z;
  };

  // The corrections: the segments at T0 and those re-read at T0 (reads by
  // T0), then those at T0 - g not met yet (reads by T0 - g).
  std::vector<std::uint32_t> hits;
  std::vector<std::uint32_t> seen(n, ~0u);  // the last read whose correction took segment k
  std::sort(open.begin(), open.end(), [&](std::uint32_t x, std::uint32_t y) { return points[x].T0 < points[y].T0; });
  {
    EventIndex::Stabber stab(index);
    for (const std::uint32_t i : open) {
      const std::int64_t T0 = points[i].T0, g = points[i].g;
      const std::uint64_t rq = rq_of[i], rp = rp_of[i];
      stab.overlapping(T0, T0, hits);
      for (std::uint32_t h : hits) {
        const EventIndex::Event& ev = index.ev[h];
        const std::uint32_t s1 = ev.seg;
        if (seen[s1] != i) {
          seen[s1] = i;
          dist[i] += correction(ev, T0, g, rq, rp);
        }
        const Segment& g1 = segs_[s1];
        if (g1.pred == ~0u) continue;  // (a namespace of objects accessed once has none)
        const std::uint64_t x = g1.a + static_cast<std::uint64_t>(T0 - ev.A);  // the object it reads at T0
        const auto b = of_stream.begin() + first[g1.pred], e = of_stream.begin() + first[g1.pred + 1];
        const auto it = std::upper_bound(b, e, x, [&](std::uint64_t v, std::uint32_t k) { return v < segs_[k].a; });
        if (it != b && segs_[*(it - 1)].b > x && seen[*(it - 1)] != i) {
          seen[*(it - 1)] = i;
          dist[i] += correction(rs[place[*(it - 1)]], T0, g, rq, rp);
        }
      }
    }
  }
  std::sort(open.begin(), open.end(), [&](std::uint32_t x, std::uint32_t y) {
    return points[x].T0 - points[x].g < points[y].T0 - points[y].g;
  });
  {
    EventIndex::Stabber stab(index);
    for (const std::uint32_t i : open) {
      const PointRead& p = points[i];
      stab.overlapping(p.T0 - p.g, p.T0 - p.g, hits);
      for (std::uint32_t h : hits) {
        const EventIndex::Event& ev = index.ev[h];
        if ((ev.A <= p.T0 && p.T0 <= ev.B) || (ev.G >= 0 && ev.A <= p.T0 - ev.G && p.T0 - ev.G <= ev.B)) continue;  // met above
        dist[i] += correction(ev, p.T0, p.g, rq_of[i], rp_of[i]);
      }
    }
  }
  for (const std::uint32_t i : open) {
    const PointRead& pt = points[i];
    const Stream& sq = streams_[segs_[pt.seg].stream];
    t.reads(dist[i], 0, 1, sq.counts.read);
    if (sq.counts.writeback != 0) t.writebacks(dist[i], 0, 1, sq.counts.writeback);
    if (obs != nullptr && sq.counts.observed) obs->reads(static_cast<std::uint64_t>(pt.T0 - sq.phase), dist[i], 0, 1);
  }
  return by_bounds;
}

}  // namespace hbmscope::l2
