// The messages between neighbours of a collective ring: frame types (comm/frame_format.h; the ps
// protocol has 16-30) and their meta blocks. Each connection carries frames both ways: the ring
// algorithms send chunks left to right, halving-doubling exchanges them with either neighbour.
//
// clang-format off
//   from the rank that connected  meta                                  tensors   answer
//   kRingHello             ring size i32, rank i32, fingerprint u64,    -         kRingWelcome or kRingRefused
//                          offers u8, then if 1 a memory offer
//   kRingWelcome           reads_you u8, then if 1 a memory offer,      -         kRingLinkMode if reads_you
//                          else why not
//   kRingLinkMode          reads_you u8, then if 0 the reason           -         -
//   either way
//   kRingChunk             op u64, step u32, chunk u32                  the chunk -
//   kRingChunkRef          op u64, step u32, chunk u32, address u64,    -         kRingChunkRead
//                          bytes u64
//   kRingChunkRead         -                                            -         -
//   kRingAbort             the reason, naming the rank at fault         -         -
//   kRingKeepalive         -                                            -         -
// clang-format on
//
// A memory offer (comm/peer_memory.h) is pid i32, cookie address u64, cookie 16 bytes. When each
// rank of a connection proved it can read the other's memory (the listening rank in kRingWelcome,
// the connecting one in kRingLinkMode), chunks go both ways as kRingChunkRef: the receiver copies
// the bytes out of the sender's memory, then answers kRingChunkRead, in the order the references
// came, after which the sender may reuse that memory. Otherwise they go as kRingChunk.
//
// kRingRefused's meta is the reason. A rank that stops sends an abort to both neighbours, and each
// rank passes it on to its other neighbour, because every rank blocked in a collective is waiting
// on a neighbour. A rank that is itself waiting sends keepalives to both neighbours, so that only
// the neighbours of a rank that has really stopped time out, and they name the right one.
#pragma once

#include <cstdint>

namespace dtrain::ring_protocol {

inline constexpr uint16_t kRingHello = 40;
inline constexpr uint16_t kRingWelcome = 41;
inline constexpr uint16_t kRingRefused = 42;
inline constexpr uint16_t kRingChunk = 43;
inline constexpr uint16_t kRingAbort = 44;
inline constexpr uint16_t kRingKeepalive = 45;
inline constexpr uint16_t kRingLinkMode = 46;
inline constexpr uint16_t kRingChunkRef = 47;
inline constexpr uint16_t kRingChunkRead = 48;

}  // namespace dtrain::ring_protocol
