// Moving a payload between two processes of one host with a single copy: the receiver reads it
// straight out of the sender's memory (process_vm_readv, Linux's cross-memory attach, the
// single-copy path of Open MPI's shared-memory transport). What crosses the authenticated TCP
// connection is then only where the payload lies, never the payload itself.
//
// Two peers find out whether this works between them by proof, not by comparing host names: each
// sends the other a random challenge, and the other answers with its pid and the address where it
// now holds it; each then reads the other's memory there. A match means the same kernel lets one
// read the other; anything else (another host, another pid namespace, a kernel or seccomp policy
// that forbids it) falls back to TCP, or is an error naming the reason under --transport shm.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace dtrain {

// How payloads travel between co-located tasks: kAuto reads a peer's memory where the proof above
// holds and uses TCP elsewhere; kTcp always uses TCP; kShm requires the single copy and refuses a
// peer with which it does not work.
enum class Transport { kAuto, kTcp, kShm };

std::string_view transport_name(Transport transport);  // "auto", "tcp", "shm"
// Throws std::invalid_argument naming the value and the choices.
Transport parse_transport(std::string_view name);

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

// The prover's side: holds a verifier's challenge in this process's memory, where the verifier
// reads it, until destroyed. Also allows any process of this user to read this process's memory
// where the Yama security module restricts that to ancestors (what Open MPI does for the same
// reason); without Yama the kernel's same-user rule applies unchanged.
class MemoryProof {
 public:
  explicit MemoryProof(const Challenge& challenge);
  MemoryOffer offer() const;

 private:
  std::unique_ptr<Challenge> held_;  // on the heap: its address must not move
};

// "" when process offer.pid holds `challenge` (which this process drew) at offer.address;
// otherwise why not, e.g. "process 4711 cannot be read from here (Operation not permitted)".
std::string check_memory_offer(const MemoryOffer& offer, const Challenge& challenge);

// Copies into.size() bytes from `address` in process `pid`. Throws TransportError naming `peer`
// and the system's reason (a process that has exited: "No such process"); a short read is an
// error too.
void read_peer_memory(int32_t pid, uint64_t address, std::span<std::byte> into,
                      std::string_view peer);

}  // namespace dtrain
