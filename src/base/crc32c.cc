// CRC-32C through ISA-L, which picks a carry-less-multiply kernel at run time.
#include "base/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <climits>

namespace dtrain {

uint32_t crc32c(std::span<const std::byte> data, uint32_t crc) {
  // crc32_iscsi works on the raw register: no initial or final inversion. The standard CRC-32C
  // starts the register at ~0 and inverts the result, so a finished CRC resumes as ~crc.
  uint32_t reg = ~crc;
  // ISA-L takes the length as int.
  constexpr size_t kMaxChunkBytes = size_t{1} << 30;
  static_assert(kMaxChunkBytes <= INT_MAX);
  while (!data.empty()) {
    const size_t n = std::min(data.size(), kMaxChunkBytes);
    // crc32_iscsi only reads the buffer; its signature lacks the const.
    auto* bytes = const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>(data.data()));
    reg = crc32_iscsi(bytes, static_cast<int>(n), reg);
    data = data.subspan(n);
  }
  return ~reg;
}

}  // namespace dtrain
