// The messages between neighbours of a collective ring: frame types (comm/frame_format.h; the ps
// protocol has 16-30) and their meta blocks. Each connection carries data one way, left to right.
//
// clang-format off
//   from the left rank     meta                                         tensors   answer
//   kRingHello             ring size i32, rank i32, fingerprint u64     -         kRingWelcome or kRingRefused
//   kRingChunk             op u64, step u32, chunk u32                  the chunk -
//   kRingAbort             the reason, naming the rank at fault         -         -
//   kRingKeepalive         -                                            -         -
// clang-format on
//
// kRingRefused's meta is the reason. An abort travels right around the ring, each rank passing it
// on, because every rank blocked in a collective is waiting on its left neighbour. A rank that is
// itself waiting sends keepalives to its right, so that only the neighbour of a rank that has
// really stopped times out, and it names the right one.
#pragma once

#include <cstdint>

namespace dtrain::ring_protocol {

inline constexpr uint16_t kRingHello = 40;
inline constexpr uint16_t kRingWelcome = 41;
inline constexpr uint16_t kRingRefused = 42;
inline constexpr uint16_t kRingChunk = 43;
inline constexpr uint16_t kRingAbort = 44;
inline constexpr uint16_t kRingKeepalive = 45;

}  // namespace dtrain::ring_protocol
