#pragma once
// The enumeration's LRU for a tally of few capacities: the recency stack as a
// linked list with one boundary marker per capacity (Mattson et al., 1970:
// each capacity's boundary moves by about one entry an access), so an access
// costs O(capacities) pointer moves instead of StackL2's three Fenwick walks.
// Identical tallies to StackL2: the tally needs each distance only as its
// bucket between capacities, and exactly only where it may be the largest
// finite distance, which a further boundary at the largest distance so far
// finds (docs/l2-simulation.md, "One tally, two methods"). Internal to
// src/core.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "l2_stack.hpp"
#include "l2_tally.hpp"

namespace hbmscope::l2 {

class ListL2 {
 public:
  explicit ListL2(Tally& t) : tally(t), caps_(t.capacities()), mark_(caps_.size()), pending_(caps_.size() + 1, 0) {}

  Tally& tally;

  void reserve_objects(std::size_t n) {
    if (node_of_.size() < n) node_of_.resize(n, none);
    dirty_.reserve(n);
  }

  void read(std::uint32_t obj, std::uint64_t bytes, bool allocate = true) {
    const std::uint32_t n = obj == none || !allocate ? none : node_of_[obj];
    if (n != none && !nodes_[n].deep && nodes_[n].bytes == bytes) {  // the common case: its bucket is known
      const std::uint32_t b = nodes_[n].bucket;
      pending_[b] = checked_add(pending_[b], bytes, "L2 simulation bytes");
      if (dirty_.dirty(obj)) dirty_.note(obj, stand_in(b));
      raise(n, bytes, false);
      return;
    }
    const std::uint64_t d = allocate ? touch(obj, bytes, true) : infinite;
    tally.read(d, bytes);
    if (obj != none && d != infinite && dirty_.dirty(obj)) dirty_.note(obj, d);
  }

  void write(std::uint32_t obj, std::uint64_t bytes, bool allocate = true) {
    tally.write(bytes);
    if (allocate) touch(obj, bytes, false);
  }

  // As StackL2::visit: moved on top as a write is, its depth not asked for.
  void visit(std::uint32_t obj, std::uint64_t bytes) { touch(obj, bytes, false); }

  void write_dirty(std::uint32_t obj, std::uint64_t bytes) {
    dirty_.close(tally, obj);
    touch(obj, bytes, false);
    dirty_.start(obj, bytes);
  }

  // Adds the reads counted by bucket to the tally (with_lru calls it).
  void flush() {
    for (std::size_t k = 0; k < pending_.size(); ++k) {
      if (pending_[k] != 0) tally.read_in_bucket(k, pending_[k]);
      pending_[k] = 0;
    }
  }

  // As StackL2::forget: the entry stays (its bytes still count below it),
  // merged with untracked neighbours so the list holds at most two entries a
  // tracked object.
  void forget(std::uint32_t obj) {
    const std::uint32_t n = node_of_[obj];
    if (dirty_.dirty(obj) && n != none) dirty_.note(obj, depth(n));
    dirty_.close(tally, obj);
    if (n == none) return;
    node_of_[obj] = none;
    nodes_[n].obj = none;
    merge_untracked(n);
  }

 private:
  struct Node {
    std::uint32_t prev = none, next = none, obj = none, bucket = 0;
    std::uint64_t bytes = 0;
    bool deep = false;  // its depth exceeds max_: the largest finite distance so far
  };
  struct Marker {                 // the deepest entry whose depth is within a bound
    std::uint32_t node = none;    // none: not even the top one
    std::uint64_t depth = 0;      // that entry's depth (bytes from the top, itself included)
  };

  std::uint32_t bucket_of(std::uint64_t d) {
    if (d != last_bytes_) {
      last_bytes_ = d;
      last_bucket_ = static_cast<std::uint32_t>(std::lower_bound(caps_.begin(), caps_.end(), d) - caps_.begin());
    }
    return last_bucket_;
  }

  // A distance in `bucket` no larger than the largest distance so far.
  std::uint64_t stand_in(std::uint32_t bucket) const {
    return bucket == caps_.size() ? max_ : std::min(caps_[bucket], max_);
  }

  // Node n's depth as the tally needs it. Beyond the largest distance so far:
  // exact (walked from that boundary, which then moves to n). Within it: the
  // stand-in of its bucket, so the buckets and the largest distance come out
  // as the exact ones would.
  std::uint64_t depth(std::uint32_t n) {
    Node& x = nodes_[n];
    if (!x.deep) return stand_in(x.bucket);
    std::uint64_t d = max_mark_.depth;
    for (std::uint32_t m = max_mark_.node == none ? head_ : nodes_[max_mark_.node].next;; m = nodes_[m].next) {
      d += nodes_[m].bytes;
      nodes_[m].deep = false;
      if (m == n) break;
    }
    max_ = d;
    max_mark_ = {n, d};
    return d;
  }

  // Moves obj to the top (pushes it if it has no entry); returns its depth as
  // depth() gives it when reading; infinite for a write or a first access.
  std::uint64_t touch(std::uint32_t obj, std::uint64_t bytes, bool reading) {
    const std::uint32_t n = obj == none ? none : node_of_[obj];
    if (n == none) {
      push(obj, bytes);
      return infinite;
    }
    Node& x = nodes_[n];
    if (x.bytes != bytes) throw Error("L2 simulation: an object's size changed between accesses");
    const bool was_deep = x.deep;
    const std::uint64_t d = reading ? depth(n) : infinite;
    raise(n, bytes, was_deep && !reading);
    return d;
  }

  // Moves entry n (`bytes` large) to the top. shift_max: n lies beyond the
  // largest distance so far (and was not read: that boundary moves up).
  void raise(std::uint32_t n, std::uint64_t bytes, bool shift_max) {
    if (n == head_) return;
    Node& x = nodes_[n];
    const std::uint32_t b = x.bucket, p = x.prev;
    unlink(n);
    link_top(n);
    x.bucket = bucket_of(bytes);
    // Entries above n's old place are `bytes` deeper: boundaries that n was
    // beyond move up; those that n was within and marked n move to p.
    for (std::uint32_t k = 0; k < mark_.size(); ++k) {
      if (k < b) shift(mark_[k], caps_[k], n, bytes, [&](Node& e) { ++e.bucket; });
      else if (mark_[k].node == n) mark_[k].node = p;
    }
    if (shift_max) {
      x.deep = bytes > max_;
      shift(max_mark_, max_, n, bytes, [](Node& e) { e.deep = true; });
    } else if (max_mark_.node == n) {
      max_mark_.node = p;
    }
  }

  void push(std::uint32_t obj, std::uint64_t bytes) {
    std::uint32_t n;
    if (free_.empty()) {
      n = static_cast<std::uint32_t>(nodes_.size());
      if (n == none) throw Error("L2 simulation: too many live objects");
      nodes_.emplace_back();
    } else {
      n = free_.back();
      free_.pop_back();
    }
    nodes_[n] = Node{none, none, obj, bucket_of(bytes), bytes, bytes > max_};
    link_top(n);
    if (obj != none) node_of_[obj] = n;
    for (std::uint32_t k = 0; k < mark_.size(); ++k) shift(mark_[k], caps_[k], n, bytes, [](Node& e) { ++e.bucket; });
    shift(max_mark_, max_, n, bytes, [](Node& e) { e.deep = true; });
    if (obj == none) merge_untracked(n);
  }

  // n, `bytes` large, now lies on top of every entry: a boundary at `bound`
  // moves up past the entries it pushed beyond (`cross` marks each; n's own
  // marks are set already).
  template <class Cross>
  void shift(Marker& m, std::uint64_t bound, std::uint32_t n, std::uint64_t bytes, Cross cross) {
    if (m.node == none) {
      if (bytes <= bound) m = {n, bytes};
      return;
    }
    m.depth += bytes;
    while (m.node != none && m.depth > bound) {
      Node& e = nodes_[m.node];
      if (m.node != n) cross(e);
      m.depth -= e.bytes;
      m.node = e.prev;
    }
  }

  // Untracked entries next to each other become one (its depth is the lower
  // one's, so no bucket changes; a boundary on the upper one moves up).
  void merge_untracked(std::uint32_t n) {
    const std::uint32_t below = nodes_[n].next;
    if (below != none && nodes_[below].obj == none) {
      absorb(n, below);
      n = below;
    }
    const std::uint32_t above = nodes_[n].prev;
    if (above != none && nodes_[above].obj == none) absorb(above, n);
  }

  void absorb(std::uint32_t upper, std::uint32_t lower) {
    const Node& u = nodes_[upper];
    nodes_[lower].bytes += u.bytes;
    for (Marker& m : mark_) drop_mark(m, upper);
    drop_mark(max_mark_, upper);
    unlink(upper);
    free_.push_back(upper);
  }

  void drop_mark(Marker& m, std::uint32_t n) {
    if (m.node != n) return;
    m.depth -= nodes_[n].bytes;
    m.node = nodes_[n].prev;
  }

  void unlink(std::uint32_t n) {
    Node& x = nodes_[n];
    (x.prev == none ? head_ : nodes_[x.prev].next) = x.next;
    if (x.next != none) nodes_[x.next].prev = x.prev;
    x.prev = x.next = none;
  }

  void link_top(std::uint32_t n) {
    nodes_[n].prev = none;
    nodes_[n].next = head_;
    if (head_ != none) nodes_[head_].prev = n;
    head_ = n;
  }

  std::vector<std::uint64_t> caps_;
  std::vector<Marker> mark_;
  Marker max_mark_;
  std::uint64_t max_ = 0;
  std::vector<Node> nodes_;
  std::vector<std::uint32_t> free_, node_of_;
  std::uint32_t head_ = none;
  DirtyIntermediates dirty_;
  std::vector<std::uint64_t> pending_;       // read bytes by bucket, not yet in the tally
  std::uint64_t last_bytes_ = infinite;      // bucket_of's last answer
  std::uint32_t last_bucket_ = 0;
};

// Which LRU an enumeration runs: the list for tallies of at most
// list_lru_max_capacities capacities (a report row has one), the Fenwick tree
// for curves over many. Tests force either to hold them against each other.
enum class LruKind { automatic, fenwick, list };
inline constexpr std::size_t list_lru_max_capacities = 16;

inline LruKind& forced_lru() {
  static thread_local LruKind kind = LruKind::automatic;
  return kind;
}

inline bool list_lru_for(std::size_t capacities) {
  const LruKind k = forced_lru();
  return k == LruKind::list || (k == LruKind::automatic && capacities <= list_lru_max_capacities);
}

// Work units (about a nanosecond on one busy core) of one enumerated access
// through the LRU that a tally of `capacities` gets (measured: bench/, "L2
// runs"; the list about 11-14 ns an access on an idle core, the Fenwick tree
// 40-50 ns). The budget counts a report row's: one capacity.
inline std::uint64_t enumeration_units(std::size_t capacities = 1) {
  return capacities <= list_lru_max_capacities ? 10 : 30;
}

// Calls f with the LRU for tally t.
template <class F>
decltype(auto) with_lru(Tally& t, F&& f) {
  if (list_lru_for(t.capacities().size())) {
    ListL2 l2(t);
    if constexpr (std::is_void_v<decltype(f(l2))>) {
      f(l2);
      l2.flush();
      return;
    } else {
      auto r = f(l2);
      l2.flush();
      return r;
    }
  }
  StackL2 l2(t);
  return f(l2);
}

}  // namespace hbmscope::l2
