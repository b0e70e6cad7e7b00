// Cache-line aligned float storage. BLAS kernels and vector loops run measurably faster on 64-byte
// aligned rows, and one arena per purpose keeps parameters contiguous.
//
// Buffers of 1 MiB and more (parameter and gradient arenas, a ps's shard, activations of a large
// batch) are also laid on transparent huge pages where the kernel offers them. A pass over such a
// buffer then takes one TLB entry per 2 MiB instead of per 4 KiB, and, what matters most, a
// co-located peer that copies it with process_vm_readv (comm/peer_memory.h) pins 512 times fewer
// pages: an all-reduce between two processes of one host runs 20% faster at 1 MiB, 25-35% at
// 16 MiB and 55-65% at 64 MiB. Rounding up to whole huge pages costs under 2 MiB a buffer, at most
// half of its mapping.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace dtrain {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;
// From this size on an allocation is its own mapping: whole huge pages, aligned to them, advised
// for them.
inline constexpr std::size_t kOwnMappingBytes = std::size_t{1} << 20;

// Storage for an AlignedAllocator: `alignment` (a power of two, at most kHugePageBytes) holds for
// every size. Throws std::bad_alloc. release_aligned() must get the same bytes and alignment.
void* allocate_aligned(std::size_t bytes, std::size_t alignment);
void release_aligned(void* p, std::size_t bytes, std::size_t alignment) noexcept;

template <typename T, std::size_t kAlignment = 64>
struct AlignedAllocator {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = AlignedAllocator<U, kAlignment>;
  };
  AlignedAllocator() noexcept = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U, kAlignment>&) noexcept {}

  T* allocate(std::size_t n) {
    return static_cast<T*>(allocate_aligned(n * sizeof(T), kAlignment));
  }
  void deallocate(T* p, std::size_t n) noexcept { release_aligned(p, n * sizeof(T), kAlignment); }

  template <typename U>
  bool operator==(const AlignedAllocator<U, kAlignment>&) const noexcept {
    return true;
  }
};

using FloatBuffer = std::vector<float, AlignedAllocator<float>>;

}  // namespace dtrain
