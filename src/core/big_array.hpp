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

namespace hbmscope::l2 {

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
  // a steady 0.45 s in 4 KiB pages: docs/l2-backward-progress.md.)
  static constexpr std::size_t mapped = std::size_t{1} << 20;
  T* allocate(std::size_t n) {
    if (n < mapped / sizeof(T)) return std::allocator<T>::allocate(n);
    void* p = ::mmap(nullptr, n * sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n < mapped / sizeof(T)) return std::allocator<T>::deallocate(p, n);
    ::munmap(p, n * sizeof(T));
  }
#endif
};
template <class T>
using Array = std::vector<T, NoInit<T>>;

}  // namespace hbmscope::l2
