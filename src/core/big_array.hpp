#pragma once
// Large per-CTA arrays (the chains', the masked backward's): resized without
// zeroing, and from 1 MiB up mapped with their pages in one call. Internal to
// src/core.
#include <cstddef>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

namespace hbmscope::l2 {

#ifdef MAP_POPULATE
// While one lives (on its thread), large arrays freed are held for the next
// ones to take rather than unmapped: the kernel zeroes every page of a fresh
// mapping, and a simulation that frees one phase's arrays and maps the next
// one's spent about a fifth of its time there
// (docs/l2-backward-progress-2026-12-05-06.md).
// A taken mapping is trimmed to the size asked for; what it holds at its end
// is unmapped. Every mapping is `mapping(bytes)`: its pages and 64 KiB more,
// so that an array of n + 1 values (prefix sums) takes one of n.
class ArrayPool {
 public:
  ArrayPool() : outer_(current()) { current() = this; }
  ~ArrayPool() {
    for (const Held& h : held_) ::munmap(h.p, h.bytes);
    current() = outer_;
  }
  ArrayPool(const ArrayPool&) = delete;
  ArrayPool& operator=(const ArrayPool&) = delete;

  static std::size_t mapping(std::size_t bytes) { return pages(bytes) + slack; }
  // The smallest held mapping of at least `bytes`, trimmed to mapping(bytes); null where none.
  static void* take(std::size_t bytes) {
    ArrayPool* pool = current();
    if (pool == nullptr) return nullptr;
    const std::size_t want = mapping(bytes);
    std::size_t best = pool->held_.size();
    for (std::size_t k = 0; k < pool->held_.size(); ++k)
      if (pool->held_[k].bytes >= want && (best == pool->held_.size() || pool->held_[k].bytes < pool->held_[best].bytes))
        best = k;
    if (best == pool->held_.size()) return nullptr;
    const Held h = pool->held_[best];
    pool->held_.erase(pool->held_.begin() + static_cast<std::ptrdiff_t>(best));
    if (h.bytes > want) ::munmap(static_cast<char*>(h.p) + want, h.bytes - want);
    return h.p;
  }
  // Holds a mapping of `bytes`; false where no pool lives (the caller unmaps it).
  static bool give(void* p, std::size_t bytes) noexcept {
    ArrayPool* pool = current();
    if (pool == nullptr) return false;
    try {
      pool->held_.push_back({p, mapping(bytes)});
    } catch (...) {
      return false;
    }
    return true;
  }

 private:
  static constexpr std::size_t slack = std::size_t{1} << 16;
  struct Held {
    void* p;
    std::size_t bytes;
  };
  static std::size_t pages(std::size_t bytes) {
    static const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    return (bytes + page - 1) / page * page;
  }
  static ArrayPool*& current() {
    thread_local ArrayPool* pool = nullptr;
    return pool;
  }
  ArrayPool* outer_;
  std::vector<Held> held_;
};
#else
struct ArrayPool {
  static std::size_t mapping(std::size_t bytes) { return bytes; }
};
#endif

// Per-CTA arrays that every CTA writes before any reads: resized without
// zeroing (an allocator whose default construction leaves trivial values as
// they are).
template <class T>
struct NoInit : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = NoInit<U>;
  };
  NoInit() = default;
  template <class U>
  NoInit(const NoInit<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
#ifdef MAP_POPULATE
  // Large arrays mapped with their pages in one call: every page is written
  // anyway, and a fault a page costs more than the array's own writes. (Not
  // in huge pages: on a machine whose memory is fragmented the kernel then
  // compacts it, and the same run spent 0.2 to 1.5 s of kernel time against
  // a steady 0.45 s in 4 KiB pages: docs/l2-backward-progress-2026-12-05-06.md;
  // measured again in docs/l2-backward-progress.md, eighth session.)
  static constexpr std::size_t mapped = std::size_t{1} << 20;
  T* allocate(std::size_t n) {
    if (n < mapped / sizeof(T)) return std::allocator<T>::allocate(n);
    if (void* p = ArrayPool::take(n * sizeof(T))) return static_cast<T*>(p);
    void* p = ::mmap(nullptr, ArrayPool::mapping(n * sizeof(T)), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n < mapped / sizeof(T)) return std::allocator<T>::deallocate(p, n);
    if (!ArrayPool::give(p, n * sizeof(T))) ::munmap(p, ArrayPool::mapping(n * sizeof(T)));
  }
#endif
};
template <class T>
using Array = std::vector<T, NoInit<T>>;

}  // namespace hbmscope::l2
