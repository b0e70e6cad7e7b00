#include "comm/peer_memory.h"

#include <fmt/format.h>
#include <openssl/rand.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "base/error.h"

namespace dtrain {
namespace {

void allow_peer_reads() {
  static const bool once = [] {
#ifdef PR_SET_PTRACER
    // EINVAL where Yama is absent: then nothing needs lifting.
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
    return true;
  }();
  (void)once;
}

}  // namespace

std::string_view transport_name(Transport transport) {
  switch (transport) {
    case Transport::kTcp:
      return "tcp";
    case Transport::kShm:
      return "shm";
    case Transport::kAuto:
      break;
  }
  return "auto";
}

Transport parse_transport(std::string_view name) {
  for (const Transport t : {Transport::kAuto, Transport::kTcp, Transport::kShm}) {
    if (name == transport_name(t)) return t;
  }
  throw std::invalid_argument(
      fmt::format("--transport {}: choose auto, tcp or shm", std::string(name)));
}

Challenge new_challenge() {
  Challenge challenge;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(challenge.data()), kChallengeBytes) != 1) {
    throw Error("could not draw a random challenge for the shared-memory transport");
  }
  return challenge;
}

MemoryProof::MemoryProof(const Challenge& challenge)
    : held_(std::make_unique<Challenge>(challenge)) {
  allow_peer_reads();
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
  return {};
}

void read_peer_memory(int32_t pid, uint64_t address, std::span<std::byte> into,
                      std::string_view peer) {
  size_t done = 0;
  while (done < into.size()) {
    iovec local{into.data() + done, into.size() - done};
    iovec remote{reinterpret_cast<void*>(address + done), into.size() - done};
    const ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      throw TransportError(fmt::format("could not read {} bytes from the memory of {}: {}",
                                       into.size(), peer,
                                       got < 0 ? std::strerror(errno) : "nothing was read"));
    }
    done += static_cast<size_t>(got);
  }
}

}  // namespace dtrain
