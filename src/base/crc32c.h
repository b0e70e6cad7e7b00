// CRC-32C (Castagnoli, the iSCSI polynomial 0x1EDC6F41): the checksum of every dtrain frame, of
// TFRecord records and of a run's final parameters. Not a cryptographic check: it catches
// corruption, not tampering (comm/auth.h covers who may talk).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace dtrain {

// The standard CRC-32C of `data` (crc32c("123456789") == 0xE3069283), continuing from `crc`, the
// CRC of the bytes before it: crc32c(b, crc32c(a)) == crc32c(a followed by b). Start with 0.
// Any length; thread-safe.
uint32_t crc32c(std::span<const std::byte> data, uint32_t crc = 0);

}  // namespace dtrain
