// The messages between neighbours of a collective ring: frame types (comm/frame_format.h; the ps
// protocol has 16-36) and their meta blocks. Each connection carries frames both ways: the ring
// algorithms send chunks left to right, halving-doubling exchanges them with either neighbour.
//
// clang-format off
//   from the rank that connected  meta                                  tensors   answer
//   kRingHello             ring size i32, rank i32, fingerprint u64     -         kRingWelcome or kRingRefused
//   from the rank that listened
//   kRingWelcome           -                                            -         -
//   either way
//   kRingChunk             op u64, step u32, chunk u32,                 the chunk -
//                          element type u8, codec u8
//   kRingAbort             the reason, naming the rank at fault         -         -
//   kRingKeepalive         -                                            -         -
//   kRingStall             op u64, culprit i32, silent ms u32,          -         -
//                          count u32, waiting ranks i32 × count
// clang-format on
//
// How a chunk's floats travel, by value over TCP or by reference between ranks of one host
// (--transport), is the connection's business (comm/link_setup.h, comm/memory_link.h), chosen
// right after the handshake and before the hello.
//
// A chunk's element type and codec are tensor/element_type.h's wire values; a receiver refuses a
// chunk of another type or codec than it expects, naming both. The codec is 0 (none) until one
// lands: carried from now on so that it lands without another frame version.
//
// kRingRefused's meta is the reason. A rank that stops sends an abort to both neighbours, and each
// rank passes it on to its other neighbour, because every rank blocked in a collective is waiting
// on a neighbour. A rank that is itself waiting sends keepalives to both neighbours, so that only
// the neighbours of a rank that has really stopped time out, and they name the right one. A wait
// past --stall_warning sends kRingStall notices, naming the rank that has gone silent, to the
// neighbours that are not it, and each waiting rank passes on what is new to it
// (collective/ring_stall.h).
#pragma once

#include <cstdint>

namespace dtrain::ring_protocol {

inline constexpr uint16_t kRingHello = 40;
inline constexpr uint16_t kRingWelcome = 41;
inline constexpr uint16_t kRingRefused = 42;
inline constexpr uint16_t kRingChunk = 43;
inline constexpr uint16_t kRingAbort = 44;
inline constexpr uint16_t kRingKeepalive = 45;
inline constexpr uint16_t kRingStall = 46;

// Only a chunk carries tensors (ConnectionOptions::type_carries_tensors).
inline bool carries_tensors(uint16_t type) { return type == kRingChunk; }

}  // namespace dtrain::ring_protocol
