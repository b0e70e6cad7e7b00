// The messages between neighbours of a collective ring: frame types (comm/frame_format.h; the ps
// protocol has 16-36) and their meta blocks. Each connection carries frames both ways: the ring
// algorithms send chunks left to right, halving-doubling exchanges them with either neighbour.
//
// clang-format off
//   from the rank that connected  meta                                  tensors   answer
//   kRingHello             ring size i32, rank i32, fingerprint u64,    -         kRingWelcome or kRingRefused
//                          reads u8, then if 1 a challenge
//   kRingLinkMode          reads u8, then if 1 an offer and a mailbox   -         kRingLinkReady if reads
//                          fd i32 (-1: none), else why not
//   from the rank that listened
//   kRingWelcome           reads u8, then if 1 an offer and a           -         kRingLinkMode if reads
//                          challenge, else why not
//   kRingLinkReady         reads u8, mailbox u8, then if reads 0 why    -         -
//                          not
//   either way
//   kRingChunk             op u64, step u32, chunk u32                  the chunk -
//   kRingChunkRef          op u64, step u32, chunk u32, address u64,    -         kRingChunkRead
//                          bytes u64
//   kRingChunkRead         -                                            -         -
//   kRingAbort             the reason, naming the rank at fault         -         -
//   kRingKeepalive         -                                            -         -
// clang-format on
//
// A challenge is 16 random bytes; an offer (comm/peer_memory.h) is the pid i32 and address u64
// where the rank now holds the challenge it was sent. Each rank reads its own challenge out of the
// other's memory there (the connecting rank before kRingLinkMode, the listening one before
// kRingLinkReady). When both succeed, chunks go both ways as kRingChunkRef: the receiver copies
// the bytes out of the sender's memory, then answers kRingChunkRead, in the order the references
// came, after which the sender may reuse that memory. Otherwise they go as kRingChunk.
//
// The connecting rank of a by-reference link also offers a mailbox (comm/shared_mailbox.h), the
// descriptor number of a page it created; mailbox 1 in kRingLinkReady says the listening rank has
// mapped it. Then neither kRingChunkRef nor kRingChunkRead crosses the connection: each is a record
// in the mailbox (a reference: op, step << 32 | chunk, address, bytes; a read: the acknowledged
// count), and a rank that posts one to a neighbour asleep in poll() sends it a kRingKeepalive to
// wake it.
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
inline constexpr uint16_t kRingLinkReady = 49;

// Only a chunk carries tensors (ConnectionOptions::type_carries_tensors).
inline bool carries_tensors(uint16_t type) { return type == kRingChunk; }

}  // namespace dtrain::ring_protocol
