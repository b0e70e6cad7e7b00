// Large buffers map memory of their own, so they can start on a huge-page boundary and return to
// the system when freed; malloc's own large mappings start just past a page boundary and leave
// the first and last partial huge page of each on small pages.
#include "tensor/aligned.h"

#include <sys/mman.h>

#include <cstdint>

namespace dtrain {
namespace {

std::size_t round_up(std::size_t bytes, std::size_t to) { return (bytes + to - 1) / to * to; }

// Maps `bytes` (a multiple of kHugePageBytes) at a kHugePageBytes boundary: maps one huge page
// more than needed and returns the ends that do not fit the boundary.
void* map_huge_aligned(std::size_t bytes) {
  const std::size_t mapped = bytes + kHugePageBytes;
  void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto begin = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = round_up(begin, kHugePageBytes);
  if (aligned > begin) munmap(raw, aligned - begin);
  const std::size_t tail = begin + mapped - (aligned + bytes);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  void* p = reinterpret_cast<void*>(aligned);
  // Advice only: a kernel without transparent huge pages, or with them off, keeps small pages and
  // the buffer works the same.
  madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

}  // namespace

void* allocate_aligned(std::size_t bytes, std::size_t alignment) {
  if (bytes >= kOwnMappingBytes) return map_huge_aligned(round_up(bytes, kHugePageBytes));
  return ::operator new (bytes, std::align_val_t{alignment});
}

void release_aligned(void* p, std::size_t bytes, std::size_t alignment) noexcept {
  if (p == nullptr) return;
  if (bytes >= kOwnMappingBytes) {
    munmap(p, round_up(bytes, kHugePageBytes));
    return;
  }
  ::operator delete (p, std::align_val_t{alignment});
}

}  // namespace dtrain
