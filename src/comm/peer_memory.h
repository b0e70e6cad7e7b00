// Moving a payload between two processes of one host with a single copy: one of them copies it
// straight out of or into the other's memory (process_vm_readv / process_vm_writev, Linux's
// cross-memory attach, the single-copy path of Open MPI's shared-memory transport). What crosses
// the authenticated TCP connection is then only where the payload lies, never the payload itself.
//
// Two peers find out whether this works between them by proof, not by comparing host names: the
// one that will copy (both ends of an all-reduce link; a ps, which copies out of and into its
// workers) sends the other a random challenge, and the other answers with its pid and the address
// where it now holds it; the verifier then reads the other's memory there. A match means the same
// kernel lets one reach the other; anything else (another host, another pid namespace, a kernel
// or seccomp policy that forbids it) falls back to TCP, or is an error naming the reason under
// --transport shm.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/error.h"
#include "comm/meta_codec.h"
#include "comm/tcp_stream.h"
#include "comm/transport.h"

namespace dtrain {

inline constexpr size_t kChallengeBytes = 16;
using Challenge = std::array<std::byte, kChallengeBytes>;

// Fresh random bytes that a verifier sends a peer and then looks for in the peer's memory. The
// verifier draws them, so a peer cannot point at bytes some other process happens to hold.
Challenge new_challenge();

// Where a peer says it holds our challenge.
struct MemoryOffer {
  int32_t pid = 0;
  uint64_t address = 0;
};

// How a challenge (16 bytes) and an offer (pid i32, address u64) travel in meta blocks
// (comm/link_setup.h).
inline void put_challenge(MetaWriter& meta, const Challenge& challenge) {
  for (const std::byte b : challenge) meta.put(b);
}
inline Challenge get_challenge(MetaReader& meta) {
  Challenge challenge;
  for (std::byte& b : challenge) b = meta.get<std::byte>();
  return challenge;
}
inline void put_offer(MetaWriter& meta, const MemoryOffer& offer) {
  meta.put(offer.pid).put(offer.address);
}
inline MemoryOffer get_offer(MetaReader& meta) {
  MemoryOffer offer;
  offer.pid = meta.get<int32_t>();
  offer.address = meta.get<uint64_t>();
  return offer;
}

// Whether the peer at the other end of `stream` connects from an address of this host (loopback,
// or one this network namespace holds): the only peers that could read this process's memory.
bool peer_shares_host(const TcpStream& stream);
// The test behind it: whether an address (port ignored) is one this host could bind.
bool is_address_of_this_host(const sockaddr* address, socklen_t length);

// The prover's side: holds a verifier's challenge in this process's memory, where the verifier
// reads it, until destroyed. Where the verifier shares this host, also allows any process of this
// user to read this process's memory where the Yama security module restricts that to ancestors
// (what Open MPI does for the same reason), once per process, saying so in the log; without Yama
// the kernel's same-user rule applies unchanged. A task whose verifiers are all elsewhere keeps
// Yama's restriction, which only processes of its own host could have used.
class MemoryProof {
 public:
  MemoryProof(const Challenge& challenge, bool verifier_shares_host);
  MemoryOffer offer() const;

 private:
  std::unique_ptr<Challenge> held_;  // on the heap: its address must not move
};

// "" when process offer.pid holds `challenge` (which this process drew) at offer.address and
// runs as this process's user; otherwise why not, e.g. "process 4711 cannot be read from here
// (Operation not permitted)". The user is checked because the kernel's own rule is weaker for a
// privileged verifier: a task running as root could otherwise be pointed by a peer at the memory
// of any process that happens to hold the challenge.
std::string check_memory_offer(const MemoryOffer& offer, const Challenge& challenge);

// What read_peer_memory and write_peer_memory throw when process `pid` no longer exists: it has
// exited (or been killed), so its connections are closing too.
class PeerProcessGone : public TransportError {
 public:
  explicit PeerProcessGone(const std::string& what) : TransportError(what) {}
};

// Copies into.size() bytes from `address` in process `pid`. Throws TransportError naming `peer`
// and the system's reason (PeerProcessGone for a process that has exited: "No such process"); a
// short read is an error too.
void read_peer_memory(int32_t pid, uint64_t address, std::span<std::byte> into,
                      std::string_view peer);
// Copies `from` to `address` in process `pid`, with read_peer_memory's errors. The kernel's
// permission check is the same for both directions, so a peer whose memory can be read (which
// check_memory_offer proves) can be written too.
void write_peer_memory(int32_t pid, uint64_t address, std::span<const std::byte> from,
                       std::string_view peer);

}  // namespace dtrain
