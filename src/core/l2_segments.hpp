#pragma once
// The segment engine (docs/model.md, "Segments: schedules not in lockstep"):
// the exact stack distances of a lockstep trace in which each CTA reads one
// object of a stream per step, computed per segment (a run of one stream's
// accesses whose objects all have the same predecessor and the same successor
// access) instead of per access. Kernels run one after another; in each, CTAs
// take the slots in launch order. Internal to src/core.
#include <cstdint>
#include <vector>

#include "l2_tally.hpp"

namespace hbmscope::l2 {

// Lexicographic (cta, sub) comparisons: the order of accesses in one step.
inline bool before(std::uint64_t c1, std::uint32_t s1, std::uint64_t c2, std::uint32_t s2) {
  return c1 < c2 || (c1 == c2 && s1 < s2);
}

enum class Op : std::uint8_t {
  read,   // a read
  write,  // a write of an output: allocates, and reaches DRAM whatever the L2
  alloc,  // a write of an intermediate: allocates; its write-back is counted by the caller
};

// What a read stream counts beside its footprint (`bytes`, what it takes in
// the L2): the bytes tallied as read at its distance, the dirty bytes written
// back below the same distance, whether its first accesses are tallied by the
// caller, and whether its distances are reported to an observer.
struct ReadCounts {
  std::uint64_t read = 0, writeback = 0;
  bool first_elsewhere = false, observed = false;
};

// Receives the distances of observed streams' reads: objects x0, x0 + 1, ...
// (count of them) at distances d0, d0 + step, ...
class ReadObserver {
 public:
  virtual ~ReadObserver() = default;
  virtual void reads(std::uint64_t x0, std::uint64_t d0, std::int64_t step, std::uint64_t count) = 0;
  // Objects x0, x0 + 1, ... (count of them) at distances d[0], d[1], ...
  virtual void reads_each(std::uint64_t x0, const std::uint64_t* d, std::uint64_t count) {
    for (std::uint64_t k = 0; k < count; ++k) reads(x0 + k, d[k], 0, 1);
  }
  // A distance at or below which reads of objects [x0, x0 + count) change
  // nothing (0: none), so the engine may leave them unevaluated.
  virtual std::uint64_t indifferent_up_to(std::uint64_t /*x0*/, std::uint64_t /*count*/) const { return 0; }
};

class SegmentEngine {
 public:
  static constexpr std::uint64_t unique = ~std::uint64_t{0};  // a namespace of objects accessed once

  // A kernel of `slots` slots whose CTAs, in launch order, take these many
  // steps each (at least 1); returns the index of its first CTA.
  std::uint64_t add_kernel(std::uint64_t slots, std::vector<std::uint64_t> lengths);

  // Room for this many streams, so that adding them copies nothing.
  void reserve_streams(std::uint64_t n) { streams_.reserve(n); }

  // CTA cta accesses objects x0, x0 + 1, ... of namespace ns at its local
  // steps k0, k0 + 1, ... (count of them), `bytes` each, at position `sub` in
  // its step. ns == unique: each access is of its own object (no reuse).
  void add_stream(std::uint64_t cta, std::uint32_t sub, std::uint64_t k0, std::uint64_t count, std::uint64_t ns,
                  std::uint64_t x0, std::uint64_t bytes, Op op, bool allocate = true);
  // A read stream whose reads count `counts` (read bytes, write-backs) beside
  // their footprint `bytes`.
  void add_reads(std::uint64_t cta, std::uint32_t sub, std::uint64_t k0, std::uint64_t count, std::uint64_t ns,
                 std::uint64_t x0, std::uint64_t bytes, ReadCounts counts);

  // Runs the schedule and the distances into t. Afterwards: the schedule.
  void run(Tally& t);
  // The same in two halves: the schedule (start() and length() hold after
  // it), then the distances, observed streams' reported to `obs`.
  void link();
  void evaluate(Tally& t, ReadObserver* obs = nullptr);
  std::uint64_t start(std::uint64_t cta) const { return start_[cta]; }
  std::uint64_t length(std::uint64_t cta) const { return len_[cta]; }
  std::uint64_t kernel_steps(std::size_t k) const { return kernels_[k].steps; }
  // Reads that the last evaluate() counted by their bounds alone.
  std::uint64_t settled_reads() const { return settled_; }

  // Schedules one kernel: start steps (from 0) of CTAs of these lengths (at
  // least 1, below 2^30; n below 2^32) on `slots` slots (and, where `by_end`
  // is given, the CTAs by last step, then id, and where `ends` is given too,
  // their last steps in that order); returns the steps until the last
  // finishes. `len` may be `start` (each length is read before its start is
  // written). `longest`, where the caller knows it (0: found from len), saves
  // a pass over the lengths.
  static std::uint64_t schedule(std::uint64_t slots, const std::uint64_t* len, std::uint64_t n, std::uint64_t* start,
                                std::uint32_t* by_end = nullptr, std::uint64_t* ends = nullptr,
                                std::uint64_t longest = 0);

  // A run's slope changes go in a dense array of its steps below this many
  // steps (where not sparse), else are sorted; tests set 0 to hold the sort
  // to the array.
  static std::size_t& dense_steps_most() {
    static thread_local std::size_t steps = std::size_t{1} << 22;
    return steps;
  }

 private:
  struct Kernel {
    std::uint64_t slots = 1, first = 0, count = 0, offset = 0, steps = 0;
  };
  struct Stream {
    std::uint64_t cta, k0, count, ns, x0, bytes;
    std::int64_t phase = 0;  // object x accessed at step phase + x (after scheduling)
    std::uint32_t sub;
    Op op;
    bool allocate;
    ReadCounts counts;  // (read: bytes, no write-back, by default)
  };
  struct Segment {
    std::uint32_t stream;
    std::uint64_t a, b;  // objects [a, b)
    std::uint32_t pred = ~0u, succ = ~0u;  // streams
  };
  // Segments by first step; a Stabber finds those overlapping [lo, hi] in
  // O(found) when lo does not decrease from one call to the next.
  struct EventIndex {
    struct Event {           // what the distances need of a segment, in one place
      std::int64_t A, B;     // first and last step
      std::int64_t G;        // steps to its successor stream's accesses; -1: none
      std::uint64_t z;       // bytes of one access
      std::uint64_t rank, rank_next;  // order in a step (rank_of) of it and of its successor
      std::uint32_t seg;
    };
    explicit EventIndex(const SegmentEngine& e);
    class Stabber {
     public:
      explicit Stabber(const EventIndex& ix) : ix_(ix) {}
      void overlapping(std::int64_t lo, std::int64_t hi, std::vector<std::uint32_t>& hits);  // indices into ev

     private:
      const EventIndex& ix_;
      std::vector<std::uint32_t> active_;
      std::size_t next_ = 0;
    };
    std::vector<Event> ev;  // by A
  };
  // A segment of one read (seg), at step T0, g steps after its predecessor.
  struct PointRead {
    std::uint32_t seg;
    std::int64_t T0, g;
  };
  // The bytes the segments access at each step (constant between their
  // first and past-last steps), and the largest over a range of steps: what
  // bounds a read's distance before it is evaluated (l2_segment_points.cpp).
  class StepBytes {
   public:
    explicit StepBytes(const EventIndex& ix);
    std::uint64_t at(std::int64_t step) const;
    std::uint64_t max(std::int64_t lo, std::int64_t hi) const;  // over steps [lo, hi]

   private:
    std::size_t piece(std::int64_t step) const;  // the piece holding step (at_.size(): before the first)
    std::vector<std::int64_t> at_;               // pieces' first steps
    std::vector<std::uint64_t> tree_;            // a max tree over the pieces' bytes, leaves from n
  };
  // Where reads whose distances lie in [lo, hi] need no evaluation: the
  // bounds fall in one bucket of the tally and below `reached`, a distance
  // some read is known to reach (so the largest distance is another's).
  static bool settled(const Tally& t, std::uint64_t lo, std::uint64_t hi, std::uint64_t reached) {
    return hi < reached && t.bucket_of(lo) == t.bucket_of(hi);
  }
  static std::uint64_t rank_of(const Stream& s) { return (s.cta << 2) | s.sub; }  // the order in a step
  // The single reads, together: a sweep over g with Fenwick trees over steps
  // (docs/l2-simulation.md, "Single reads"), in l2_segment_points.cpp.
  // Returns how many its bounds settled.
  std::uint64_t evaluate_points(Tally& t, const EventIndex& index, const StepBytes& bytes, std::vector<PointRead>& points,
                       ReadObserver* obs) const;

  std::vector<Kernel> kernels_;
  std::vector<std::uint64_t> len_, start_;
  std::vector<Stream> streams_;
  std::vector<Segment> segs_;
  bool linked_ = false;
  std::uint64_t settled_ = 0;
};

}  // namespace hbmscope::l2
