// The link step: right after the handshake, the two ends of a connection choose once whether its
// payloads travel by value (TCP) or by reference (comm/memory_link.h), each proving by a challenge
// read back out of the other's memory (comm/peer_memory.h) that it can reach it, and share a
// mailbox page (comm/shared_mailbox.h) for the announcements. Its frames are reserved types
// (comm/frame_format.h) sent after the proof of the secret, so they are authenticated like every
// later frame. The client leads:
//
//   client -> LINK_OFFER   wants u8 (0 under --transport tcp), then if 1 challenge_c
//   server -> LINK_ANSWER  only if wants, or to refuse: verdict u8 — kProve: offer_s (where it
//                          holds challenge_c) | challenge_s; kByValue: why; kRefused: the message
//   client    reads challenge_c back at offer_s, creates the mailbox
//   client -> LINK_PROOF   verdict u8 — kProve: offer_c (where it holds challenge_s) | mailbox fd
//                          i32; kByValue: why; kRefused: the message
//   server    reads challenge_s back at offer_c, maps the mailbox (pidfd_getfd)
//   server -> LINK_READY   verdict u8 — kProve: by reference from now on; kByValue: why; kRefused
//
// Under kShm an end that cannot have a by-reference link refuses the connection: it tells the
// other end why, naming both tasks and the flag, and throws LinkRefused with the same reason. A
// client that does not want memory does not wait for an answer: a refusal then reaches it as the
// first frame it receives (Connection::receive throws it).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "comm/memory_link.h"
#include "comm/transport.h"

namespace dtrain {

class Connection;

// "--transport shm: worker0 and ps0 cannot move payloads through memory: <why>; run them with
// --transport tcp or auto".
std::string shm_failure(std::string_view self, std::string_view peer, std::string_view why);

// Run by Connection, which is open and not yet used. Null: payloads travel by value. Throw
// LinkRefused as above, TransportError / FrameError for a connection that fails meanwhile.
class LinkSetup {
 public:
  static std::unique_ptr<MemoryLink> run_as_client(Connection& connection);
  // Whether a LINK_OFFER's meta asks for memory; if it does, answer() is the server's side.
  static bool wants_memory(std::span<const std::byte> offer);
  static std::unique_ptr<MemoryLink> answer(Connection& connection,
                                            std::span<const std::byte> offer);
  // A server whose client sent the first frame of its protocol after an offer without memory, or
  // with no offer at all (a tool that does not speak the link step), keeps the link by value;
  // under kShm it refuses the client, in place of its first answer.
  static void no_offer(Connection& connection);
  // A LINK_ANSWER where the client expected its protocol's first reply: the server's refusal.
  [[noreturn]] static void refused(Connection& connection, std::span<const std::byte> answer);
};

}  // namespace dtrain
