#pragma once
// The enumeration: every access of a simulated stream through an LRU of
// tiles, evaluated at every capacity at once by stack distances (docs/model.md,
// "How it is evaluated"). It stays as the reference the closed forms and the
// segment engine are tested against, and as `--l2-method enumeration`.
// Internal to src/core.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "hbmscope/error.hpp"
#include "hbmscope/l2_sim.hpp"
#include "l2_tally.hpp"

namespace hbmscope::l2 {

inline constexpr std::uint32_t none = 0xffffffffu;

// An LRU's dirty intermediates (write_dirty ... forget): per object its dirty
// bytes and the largest stack distance of its accesses since that write; a
// closed period goes to the tally's write-backs.
// Its arrays are made at the first dirty write: the forward and decode
// streams have none.
class DirtyIntermediates {
 public:
  void reserve(std::size_t n) { objects_ = std::max(objects_, n); }
  bool dirty(std::uint32_t obj) const { return obj < bytes_.size() && bytes_[obj] != 0; }
  void note(std::uint32_t obj, std::uint64_t d) { max_[obj] = std::max(max_[obj], d); }
  void start(std::uint32_t obj, std::uint64_t bytes) {
    if (bytes_.size() < objects_) {
      bytes_.resize(objects_, 0);
      max_.resize(objects_, 0);
    }
    bytes_[obj] = bytes;
    max_[obj] = 0;
  }
  void close(Tally& t, std::uint32_t obj) {
    if (!dirty(obj)) return;
    t.writebacks(max_[obj], 0, 1, bytes_[obj]);
    bytes_[obj] = 0;
    max_[obj] = 0;
  }

 private:
  std::size_t objects_ = 0;
  std::vector<std::uint64_t> bytes_, max_;
};

// An LRU over objects of real byte sizes. The recency stack is a Fenwick tree
// over access times, compacted when it fills, so one access costs
// O(log(live objects)).
class StackL2 {
 public:
  explicit StackL2(Tally& t) : tally(t) { reset_tree(4096); }

  Tally& tally;

  // Objects are dense ids [0, n); an id may be reused after forget().
  void reserve_objects(std::size_t n) {
    if (obj_pos_.size() < n) {
      obj_pos_.resize(n, none);
      obj_size_.resize(n, 0);
    }
    dirty_.reserve(n);
  }

  // A read of `bytes` of object obj (or none: an object read once).
  void read(std::uint32_t obj, std::uint64_t bytes, bool allocate = true) {
    const std::uint64_t d = allocate ? touch(obj, bytes) : infinite;
    tally.read(d, bytes);
    if (obj != none && d != infinite && dirty_.dirty(obj)) dirty_.note(obj, d);
  }

  // A full-tile write of an output: allocates (write-back) without fetching;
  // its bytes reach DRAM once, when evicted or at the end.
  void write(std::uint32_t obj, std::uint64_t bytes, bool allocate = true) {
    tally.write(bytes);
    if (allocate) touch(obj, bytes);
  }

  // An access counted elsewhere (another part of the trace's): it takes its
  // place on top of the stack, and nothing is tallied.
  void visit(std::uint32_t obj, std::uint64_t bytes) { touch(obj, bytes); }

  // A write of `bytes` of an intermediate (read again later, dead at its
  // forget): its dirty bytes reach DRAM only if it is evicted before the next
  // write or its death, i.e. where the L2 is smaller than the largest stack
  // distance of its accesses in between (and of its death, below).
  void write_dirty(std::uint32_t obj, std::uint64_t bytes) {
    dirty_.close(tally, obj);
    touch(obj, bytes);
    dirty_.start(obj, bytes);
  }

  // The object will not be accessed again: its position need not be kept (its
  // bytes still count in the distances of older objects). A dirty
  // intermediate dies here: its last period ends with a look at where it
  // stands in the stack (evicted since its last access: written back); dead
  // data still in the L2 is never written back.
  void forget(std::uint32_t obj) {
    if (dirty_.dirty(obj) && obj_pos_[obj] != none) dirty_.note(obj, obj_size_[obj] + (total_ - prefix(obj_pos_[obj])));
    dirty_.close(tally, obj);
    const std::uint32_t p = obj_pos_[obj];
    if (p == none) return;
    owner_[p] = none;
    obj_pos_[obj] = none;
  }

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
    if (obj != none) {
      obj_pos_[obj] = t;
      if (obj < obj_size_.size()) obj_size_[obj] = bytes;
    }
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

  std::vector<std::uint32_t> obj_pos_;
  std::vector<std::uint64_t> obj_size_;
  DirtyIntermediates dirty_;
  std::vector<std::uint64_t> tree_, weight_;
  std::vector<std::uint32_t> owner_;
  std::size_t size_ = 0;
  std::uint32_t next_ = 0;
  std::uint64_t total_ = 0;
};

// Counts of resident CTAs per head, and how many heads have at least one (the
// enumerations' heads per wave).
struct Occupancy {
  std::vector<std::uint32_t> count;
  std::uint64_t distinct = 0;
  explicit Occupancy(std::size_t n) : count(n, 0) {}
  void enter(std::size_t k) { distinct += count[k]++ == 0; }
  void leave(std::size_t k) { distinct -= --count[k] == 0; }
};

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
  void write_dirty(std::uint32_t obj, std::uint64_t bytes) { f({L2Access::Kind::write_dirty, obj, bytes, true}); }
  void forget(std::uint32_t obj) { f({L2Access::Kind::forget, obj, 0, true}); }
};

}  // namespace hbmscope::l2
