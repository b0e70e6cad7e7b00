#include "comm/peer_memory.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "base/log.h"

namespace dtrain {
namespace {

// Process-wide by nature (Yama keeps one exception per process), hence done once per process,
// however many peers ask.
void allow_peer_reads() {
  static const bool once = [] {
#ifdef PR_SET_PTRACER
    // EINVAL where Yama is absent: then nothing needs lifting.
    const bool lifted = prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) == 0;
    spdlog::info("peer memory: a task on this host reads this one's memory; {}",
                 lifted
                     ? "Yama's ptrace restriction lifted for this user's processes (PR_SET_PTRACER)"
                     : "no Yama restriction to lift");
#endif
    return true;
  }();
  (void)once;
}

// "" when every user id of process `pid` (real, effective, saved, file system) is this process's
// effective one; otherwise what differs. From /proc/<pid>/status, which says so whatever the
// process's dumpable flag (the owner of /proc/<pid> itself turns to root when that is off).
std::string other_user(int32_t pid) {
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(status, line)) {
    if (!line.starts_with("Uid:")) continue;
    std::istringstream ids(line.substr(4));
    const uid_t own = geteuid();
    for (uid_t id; ids >> id;) {
      if (id != own)
        return fmt::format("runs as another user (uid {}, this task as uid {})", id, own);
    }
    return {};
  }
  return "cannot be looked up in /proc";
}

}  // namespace

Challenge new_challenge() {
  Challenge challenge;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(challenge.data()), kChallengeBytes) != 1) {
    throw Error("could not draw a random challenge for the shared-memory transport");
  }
  return challenge;
}

bool is_address_of_this_host(const sockaddr* address, socklen_t length) {
  sockaddr_storage local{};
  if (length > sizeof local) return false;
  std::memcpy(&local, address, length);
  if (local.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&local)->sin_port = 0;
  } else if (local.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&local)->sin6_port = 0;
  } else {
    return false;
  }
  // The kernel binds only addresses of this host (loopback's whole range included), which is the
  // question exactly; a host set to bind any address (ip_nonlocal_bind) answers yes, and then the
  // restriction is lifted where it need not be, as before this test.
  const int fd = ::socket(local.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&local), length) == 0;
  ::close(fd);
  return bound;
}

bool peer_shares_host(const TcpStream& stream) {
  sockaddr_storage peer{};
  socklen_t length = sizeof peer;
  if (::getpeername(stream.native_handle(), reinterpret_cast<sockaddr*>(&peer), &length) != 0) {
    return false;  // a connection already gone will not be read through either
  }
  return is_address_of_this_host(reinterpret_cast<const sockaddr*>(&peer), length);
}

MemoryProof::MemoryProof(const Challenge& challenge, bool verifier_shares_host)
    : held_(std::make_unique<Challenge>(challenge)) {
  if (verifier_shares_host) allow_peer_reads();
}

MemoryOffer MemoryProof::offer() const {
  return {.pid = static_cast<int32_t>(getpid()),
          .address = reinterpret_cast<uint64_t>(held_->data())};
}

std::string check_memory_offer(const MemoryOffer& offer, const Challenge& challenge) {
  Challenge seen{};
  iovec local{seen.data(), seen.size()};
  iovec remote{reinterpret_cast<void*>(offer.address), seen.size()};
  const ssize_t got = process_vm_readv(offer.pid, &local, 1, &remote, 1, 0);
  if (got < 0) {
    return fmt::format("process {} cannot be read from here ({})", offer.pid, std::strerror(errno));
  }
  if (got != static_cast<ssize_t>(seen.size()) || seen != challenge) {
    return fmt::format("process {} here is another process (another host or pid namespace)",
                       offer.pid);
  }
  if (const std::string owner = other_user(offer.pid); !owner.empty()) {
    return fmt::format("process {} {}", offer.pid, owner);
  }
  return {};
}

namespace {

// The loop both directions share: process_vm_readv / process_vm_writev may copy less than asked
// (a page boundary, a signal), so it goes on from where the last call stopped. `verb` and
// `preposition` word the error: "read", "from" or "write", "into".
template <typename Copy>
void copy_peer_memory(int32_t pid, uint64_t address, std::byte* local_bytes, size_t bytes,
                      std::string_view peer, const char* verb, const char* preposition,
                      Copy&& copy) {
  size_t done = 0;
  while (done < bytes) {
    iovec local{local_bytes + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(address + done), bytes - done};
    const ssize_t moved = copy(pid, &local, 1UL, &remote, 1UL, 0UL);
    const int error = moved < 0 ? errno : 0;
    if (error == EINTR) continue;
    if (moved > 0) {
      done += static_cast<size_t>(moved);
      continue;
    }
    const std::string message =
        fmt::format("could not {} {} bytes {} the memory of {}: {}", verb, bytes, preposition, peer,
                    error != 0 ? std::strerror(error) : "nothing was copied");
    if (error == ESRCH) throw PeerProcessGone(message);
    throw TransportError(message);
  }
}

}  // namespace

void read_peer_memory(int32_t pid, uint64_t address, std::span<std::byte> into,
                      std::string_view peer) {
  copy_peer_memory(pid, address, into.data(), into.size(), peer, "read", "from", process_vm_readv);
}

void write_peer_memory(int32_t pid, uint64_t address, std::span<const std::byte> from,
                       std::string_view peer) {
  // process_vm_writev only reads the local side; its iovec has no const.
  copy_peer_memory(pid, address, const_cast<std::byte*>(from.data()), from.size(), peer, "write",
                   "into", process_vm_writev);
}

}  // namespace dtrain
