// Forming a RankGroup: listen, exchange addresses, connect to the right neighbour.
#include "collective/rank_group.h"

#include <fmt/format.h>

#include "base/error.h"

namespace dtrain {

RankGroup::RankGroup(const RankGroupOptions& options, const HostPort& listen_at,
                     const AddressExchange& exchange) {
  const int n = options.world_size;
  if (n < 1 || options.rank < 0 || options.rank >= n) {
    throw UsageError(
        fmt::format("rank {} is not a rank of a world of {} (0..{})", options.rank, n, n - 1));
  }
  RingOptions ring;
  ring.size = n;
  ring.rank = options.rank;
  ring.bind_host = listen_at.host;
  ring.port = listen_at.port;
  ring.secret = options.secret;
  ring.authenticate_frames = options.authenticate_frames;
  ring.tcp_congestion = options.tcp_congestion;
  ring.timeout_ms = options.timeout_ms;
  ring.job = options.job;
  ring.transport = options.transport;
  ring.spin_us = ring_spin_us(options.ranks_on_host, options.transport);
  ring_ = std::make_unique<TcpRing>(ring);  // a ring of one listens for no one
  if (n > 1) {
    const std::vector<HostPort> ranks = exchange({listen_at.host, ring_->port()});
    if (static_cast<int>(ranks.size()) != n) {
      throw UsageError(
          fmt::format("the exchange of addresses named {} ranks, but rank {} is in a world of {}",
                      ranks.size(), options.rank, n));
    }
    ring_->connect(ranks[static_cast<size_t>((options.rank + 1) % n)]);
  }
  communicator_ = std::make_unique<Communicator>(*ring_, options.collective);
}

RankGroup::~RankGroup() = default;

std::string RankGroup::describe() const {
  if (size() == 1) return "rank 0 of 1: no links";
  return fmt::format("rank {} of {}; to {} (left): {}; to {} (right): {}", rank(), size(),
                     ring_->rank_name((rank() + size() - 1) % size()),
                     ring_->describe_link(Side::kLeft), ring_->rank_name((rank() + 1) % size()),
                     ring_->describe_link(Side::kRight));
}

void RankGroup::abort(std::string_view reason) { ring_->abort(reason); }

}  // namespace dtrain
