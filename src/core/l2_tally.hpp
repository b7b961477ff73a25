#pragma once
// What both evaluations of the L2 simulation produce (docs/model.md, "How it
// is evaluated"): for every read, its stack distance in bytes, kept only as
// the bytes that miss at each capacity asked for; the writes; and the largest
// finite distance. The enumeration (l2_stack.hpp) adds one access at a time,
// the closed forms and the segment engine add runs of accesses whose
// distances are an arithmetic progression. Internal to src/core.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "hbmscope/checked.hpp"
#include "hbmscope/error.hpp"
#include "hbmscope/l2_sim.hpp"

namespace hbmscope::l2 {

inline constexpr std::uint64_t infinite = std::numeric_limits<std::uint64_t>::max();

class Tally {
 public:
  explicit Tally(const std::vector<std::uint64_t>& capacities) : caps_(capacities) {
    std::sort(caps_.begin(), caps_.end());
    caps_.erase(std::unique(caps_.begin(), caps_.end()), caps_.end());
    read_add_.assign(caps_.size() + 1, 0);
    wb_add_.assign(caps_.size() + 1, 0);
  }

  // One read of `bytes` at stack distance d (infinite: a first access, or one
  // that bypasses the L2). It misses at every capacity below d.
  void read(std::uint64_t d, std::uint64_t bytes) { reads(d, 0, 1, bytes); }

  // `count` reads of `bytes` each, at distances d0, d0 + step, ... (all finite
  // unless d0 is infinite, then step must be 0).
  void reads(std::uint64_t d0, std::int64_t step, std::uint64_t count, std::uint64_t bytes) {
    if (count == 0) return;
    const std::uint64_t total = mul(count, bytes);
    request_ = add(request_, total);
    if (d0 == infinite) {
      read_add_.back() = add(read_add_.back(), total);
      first_reads_ = add(first_reads_, total);
      return;
    }
    spread(read_add_, d0, step, count, bytes);
  }

  // Reads of `bytes` in all whose distances lie in bucket k: (caps[k-1],
  // caps[k]] (k = capacities().size(): beyond all), none larger than the
  // largest finite distance added otherwise.
  void read_in_bucket(std::size_t k, std::uint64_t bytes) {
    request_ = add(request_, bytes);
    read_add_[k] = add(read_add_[k], bytes);
  }

  // Write-backs of `bytes` in all whose distances lie in bucket k (as
  // read_in_bucket).
  void writeback_in_bucket(std::size_t k, std::uint64_t bytes) { wb_add_[k] = add(wb_add_[k], bytes); }

  // The bucket of distance d: 0 at most the smallest capacity, ...,
  // capacities().size() above the largest.
  std::size_t bucket_of(std::uint64_t d) const { return bucket(d); }

  // A finite distance that reads counted by bucket reach (their largest,
  // found apart).
  void reached(std::uint64_t d) { max_reuse_ = std::max(max_reuse_, d); }

  // A write that reaches DRAM whatever the capacity (outputs: write-back
  // stores reach DRAM once, when evicted or later).
  void write(std::uint64_t bytes) { writes_ = add(writes_, bytes); }

  // Another tally's counts (its capacities are these), `times` over, added
  // to these.
  void merge(const Tally& o, std::uint64_t times = 1) {
    if (o.caps_ != caps_) throw Error("internal: tallies of different capacities merged");
    if (times == 0) return;
    for (std::size_t k = 0; k < read_add_.size(); ++k) {
      read_add_[k] = add(read_add_[k], mul(times, o.read_add_[k]));
      wb_add_[k] = add(wb_add_[k], mul(times, o.wb_add_[k]));
    }
    request_ = add(request_, mul(times, o.request_));
    first_reads_ = add(first_reads_, mul(times, o.first_reads_));
    writes_ = add(writes_, mul(times, o.writes_));
    max_reuse_ = std::max(max_reuse_, o.max_reuse_);
  }

  // Dirty bytes of an intermediate that are written back only where the L2 is
  // smaller than d (the largest stack distance of the accesses while dirty):
  // `count` of them at distances d0, d0 + step, ...
  void writebacks(std::uint64_t d0, std::int64_t step, std::uint64_t count, std::uint64_t bytes) {
    if (count == 0) return;
    if (d0 == infinite) {
      wb_add_.back() = add(wb_add_.back(), mul(count, bytes));
      return;
    }
    spread(wb_add_, d0, step, count, bytes);
  }

  // Reads of one size in many runs (one segment's pieces): counted per
  // bucket, with the last bucket's bounds at hand, and added at once.
  class Batch {
   public:
    explicit Batch(const Tally& t) : t_(t), n_(t.caps_.size() + 1, 0) {}
    // `count` reads at finite distances d0, d0 + step, ...
    void reads(std::uint64_t d0, std::int64_t step, std::uint64_t count) {
      if (count == 0) return;
      const std::uint64_t last = step >= 0 ? d0 + static_cast<std::uint64_t>(step) * (count - 1)
                                           : d0 - static_cast<std::uint64_t>(-step) * (count - 1);
      const std::uint64_t lo = std::min(d0, last), hi = std::max(d0, last);
      max_ = std::max(max_, hi);
      total_ += count;
      if (lo > below_ && hi <= top_) {  // all in the bucket of the last run
        n_[k_] += count;
        return;
      }
      const std::size_t k0 = t_.bucket(lo), k1 = t_.bucket(hi);
      if (k0 == k1) {
        k_ = k0;
        below_ = k0 == 0 ? 0 : t_.caps_[k0 - 1];
        top_ = k0 < t_.caps_.size() ? t_.caps_[k0] : infinite;
        n_[k0] += count;
        return;
      }
      std::uint64_t under = 0;
      for (std::size_t k = k0; k <= k1; ++k) {
        const std::uint64_t le = k < t_.caps_.size() ? count_le(d0, step, count, t_.caps_[k]) : count;
        n_[k] += le - under;
        under = le;
      }
    }
    // Reads already counted against a tally of one capacity: `le` at most
    // it, `gt` above it, the largest at distance `top`.
    void counted(std::uint64_t le, std::uint64_t gt, std::uint64_t top) {
      n_[0] += le;
      n_[1] += gt;
      total_ += le + gt;
      if (le + gt > 0) max_ = std::max(max_, top);
    }
    // Another batch's reads added to these (the same tally's).
    void merge(const Batch& o) {
      for (std::size_t k = 0; k < n_.size(); ++k) n_[k] += o.n_[k];
      total_ += o.total_;
      max_ = std::max(max_, o.max_);
    }
    bool empty() const { return total_ == 0; }
    void clear() {
      std::fill(n_.begin(), n_.end(), 0);
      total_ = 0;
      max_ = 0;
    }
    // Adds them to t, `bytes` each (and `writeback` dirty bytes each written
    // back below the same distance), and starts again.
    void flush(Tally& t, std::uint64_t bytes, std::uint64_t writeback = 0) {
      if (total_ == 0) return;
      t.request_ = add(t.request_, mul(total_, bytes));
      for (std::size_t k = 0; k < n_.size(); ++k)
        if (n_[k] != 0) {
          t.read_add_[k] = add(t.read_add_[k], mul(n_[k], bytes));
          if (writeback != 0) t.wb_add_[k] = add(t.wb_add_[k], mul(n_[k], writeback));
        }
      t.max_reuse_ = std::max(t.max_reuse_, max_);
      clear();
    }

   private:
    const Tally& t_;
    std::vector<std::uint64_t> n_;
    std::uint64_t total_ = 0, max_ = 0;
    std::size_t k_ = 0;
    std::uint64_t below_ = infinite, top_ = 0;  // the last bucket: (below_, top_]
  };

  std::uint64_t dram_reads(std::uint64_t capacity) const { return above(read_add_, capacity); }
  std::uint64_t dram_writes(std::uint64_t capacity) const { return add(writes_, above(wb_add_, capacity)); }
  std::uint64_t requested() const { return request_; }
  std::uint64_t first_access_reads() const { return first_reads_; }
  std::uint64_t writes_always() const { return writes_; }
  std::uint64_t max_reuse_distance() const { return max_reuse_; }
  const std::vector<std::uint64_t>& capacities() const { return caps_; }

 private:
  static std::uint64_t add(std::uint64_t a, std::uint64_t b) { return checked_add(a, b, "L2 simulation bytes"); }
  static std::uint64_t mul(std::uint64_t a, std::uint64_t b) { return checked_mul(a, b, "L2 simulation bytes"); }

  std::size_t bucket(std::uint64_t d) const {
    return static_cast<std::size_t>(std::lower_bound(caps_.begin(), caps_.end(), d) - caps_.begin());
  }

  // Bytes that miss at `capacity`: everything in the buckets above it.
  std::uint64_t above(const std::vector<std::uint64_t>& v, std::uint64_t capacity) const {
    const std::size_t m = bucket(capacity);
    std::uint64_t r = 0;
    for (std::size_t k = m + 1; k < v.size(); ++k) r = add(r, v[k]);
    return r;
  }

  // How many of d0 + t*step, t in [0, count), are <= c.
  static std::uint64_t count_le(std::uint64_t d0, std::int64_t step, std::uint64_t count, std::uint64_t c) {
    if (step == 0) return d0 <= c ? count : 0;
    if (step > 0) {
      if (d0 > c) return 0;
      const std::uint64_t t = (c - d0) / static_cast<std::uint64_t>(step) + 1;
      return std::min(count, t);
    }
    const std::uint64_t s = static_cast<std::uint64_t>(-step);
    if (d0 <= c) return count;
    const std::uint64_t t0 = (d0 - c + s - 1) / s;  // first t with d <= c
    return t0 >= count ? 0 : count - t0;
  }

  // Adds `count` items of `bytes` at distances d0 + t*step to the buckets
  // (bucket k holds distances in (caps[k-1], caps[k]]), and the largest
  // distance to max_reuse_.
  void spread(std::vector<std::uint64_t>& v, std::uint64_t d0, std::int64_t step, std::uint64_t count,
              std::uint64_t bytes) {
    const std::uint64_t last = step >= 0 ? d0 + static_cast<std::uint64_t>(step) * (count - 1)
                                         : d0 - static_cast<std::uint64_t>(-step) * (count - 1);
    const std::uint64_t lo = std::min(d0, last), hi = std::max(d0, last);
    max_reuse_ = std::max(max_reuse_, hi);
    const std::size_t k0 = bucket(lo), k1 = bucket(hi);
    std::uint64_t below = 0;  // items at distances <= caps[k - 1]
    for (std::size_t k = k0; k <= k1; ++k) {
      const std::uint64_t le = k < caps_.size() ? count_le(d0, step, count, caps_[k]) : count;
      v[k] = add(v[k], mul(le - below, bytes));
      below = le;
    }
  }

  std::vector<std::uint64_t> caps_;
  std::vector<std::uint64_t> read_add_;  // [k]: read bytes that miss at caps_[0..k-1]
  std::vector<std::uint64_t> wb_add_;    // [k]: write-back bytes at caps_[0..k-1]
  std::uint64_t request_ = 0, writes_ = 0, first_reads_ = 0, max_reuse_ = 0;
};

// The result at one capacity, and the curve at every capacity of the tally.
L2SimResult result_at(const Tally& t, std::uint64_t capacity);
std::vector<std::uint64_t> curve(const Tally& t, const std::vector<std::uint64_t>& capacities);

}  // namespace hbmscope::l2
