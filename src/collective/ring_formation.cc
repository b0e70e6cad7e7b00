// RingFormation: the hello and its checks, refusals, the by-reference negotiation and the shared
// mailbox's set-up; the server's thread runs the left neighbour's side.
#include "collective/ring_formation.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <utility>

#include "base/error.h"
#include "collective/ring_protocol.h"
#include "comm/connect.h"
#include "comm/meta_codec.h"

namespace dtrain {

namespace proto = ring_protocol;

RingFormation::RingFormation(RingOptions options) : options_(std::move(options)) {
  if (options_.size < 1 || options_.rank < 0 || options_.rank >= options_.size) {
    throw std::invalid_argument(
        fmt::format("RingFormation: rank {} of a ring of {}", options_.rank, options_.size));
  }
  if (options_.size == 1) return;
  ServerOptions server;
  server.bind_host = options_.bind_host;
  server.port = options_.port;
  server.secret = options_.secret;
  server.connection.authenticate_frames = options_.authenticate_frames;
  server.connection.type_carries_tensors = proto::carries_tensors;
  server.connection.identity = rank_name(options_.rank);
  // Bounds the blocking part: the left neighbour's hello. Chunks are read without blocking.
  server.connection.io_timeout_ms = options_.timeout_ms;
  server.connection.idle_timeout_ms = options_.timeout_ms;
  // The ring's own keepalives find a lost neighbour within timeout_ms; the kernel's must not
  // declare one lost sooner.
  server.connection.liveness_timeout_ms = options_.timeout_ms;
  server_ = std::make_unique<Server>(std::move(server),
                                     [this](Connection& connection) { serve_left(connection); });
}

RingFormation::~RingFormation() { close(); }

void RingFormation::close() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  membership_.notify_all();
  if (server_) server_->stop();  // serve_left returns, closing the left link
  if (right_) right_->close();
}

uint16_t RingFormation::port() const { return server_ ? server_->port() : options_.port; }

std::string RingFormation::rank_name(int rank) const {
  return fmt::format("{}{}", options_.job, rank);
}

Connection* RingFormation::connection(Side side) {
  if (side == Side::kRight) return right_.get();
  std::lock_guard lock(mutex_);
  return left_;
}

FormedLink RingFormation::take(Side side) {
  FormedLink& link = side == Side::kLeft ? left_link_ : right_link_;
  FormedLink taken = std::move(link);
  taken.connection = connection(side);
  return taken;
}

void RingFormation::connect(const HostPort& right) {
  if (size() == 1) return;
  if (right_) throw std::logic_error("RingFormation::connect called twice");
  const auto deadline =
      SteadyClock::now() + std::chrono::milliseconds(std::max(options_.timeout_ms, 0));
  ConnectionOptions options;
  options.task_name = rank_name(right_rank());
  options.io_timeout_ms = options_.timeout_ms;
  options.idle_timeout_ms = options_.timeout_ms;
  options.liveness_timeout_ms = options_.timeout_ms;
  options.connect_timeout_ms = options_.timeout_ms;
  options.authenticate_frames = options_.authenticate_frames;
  options.type_carries_tensors = proto::carries_tensors;
  options.identity = rank_name(options_.rank);
  options.stop = options_.stop;
  options.wait_report = options_.wait_report;
  options.wait_report_interval_ms = options_.wait_report_interval_ms;
  options.abandon_wait = [this] { return final_refusal(); };
  try {
    right_ = dtrain::connect(right.host, right.port, options_.secret, options);
  } catch (const AuthError&) {
    throw;
  } catch (const TransportError& error) {
    if (std::string refused = final_refusal(); !refused.empty()) throw CollectiveError(refused);
    throw CollectiveError(fmt::format("{} did not join the ring: {}{}", rank_name(right_rank()),
                                      error.what(), refusal_note()));
  }
  // Our challenge for the right neighbour, if we would read its memory.
  const std::optional<Challenge> mine =
      options_.transport == Transport::kTcp ? std::nullopt : std::optional(new_challenge());
  MetaWriter hello;
  hello.put(static_cast<int32_t>(size()))
      .put(static_cast<int32_t>(rank()))
      .put(options_.fingerprint)
      .put(static_cast<uint8_t>(mine ? 1 : 0));
  if (mine) put_challenge(hello, *mine);
  Connection::Incoming answer;
  try {
    right_->send(proto::kRingHello, 0, hello.bytes(), {});
    answer = right_->receive();
  } catch (const TransportError&) {
    // A right neighbour this rank refused as its left one (a ring of two) gives up and closes:
    // the refusal is the cause, the closed connection only its echo.
    std::string refused;
    {
      std::lock_guard lock(mutex_);
      refused = final_refusal_;
    }
    if (!refused.empty()) throw CollectiveError(refused);
    throw;
  }
  if (answer.type == proto::kRingRefused) {
    throw CollectiveError(fmt::format("{} refused {}: {}", right_->peer(), rank_name(rank()),
                                      MetaReader(answer.meta).rest_as_peer_text()));
  }
  if (answer.type != proto::kRingWelcome) {
    throw FrameError(
        fmt::format("{} answered the ring hello with frame type {}", right_->peer(), answer.type));
  }
  try {
    MetaReader welcome(answer.meta);
    if (welcome.get<uint8_t>() == 1 && mine) {
      const MemoryOffer right = get_offer(welcome);  // the fields in order
      const Challenge theirs = get_challenge(welcome);
      connect_by_reference(right, *mine, theirs);
    } else if (options_.transport == Transport::kShm) {
      throw CollectiveError(shm_failure(right_rank(), welcome.rest_as_peer_text()));
    }
  } catch (const ShortMeta&) {
    throw FrameError(
        fmt::format("{} sent a malformed ring welcome or link answer", right_->peer()));
  }
  wait_for_left(deadline);
}

void RingFormation::connect_by_reference(const MemoryOffer& right, const Challenge& mine,
                                         const Challenge& theirs) {
  const std::string why = check_memory_offer(right, mine);
  std::optional<MemoryProof> proof;  // holds its challenge until it has answered
  std::unique_ptr<SharedMailbox> mailbox;
  MetaWriter mode;
  if (why.empty()) {
    // We have just read the right neighbour's memory: it is on this host, and reads ours next.
    proof.emplace(theirs, /*verifier_shares_host=*/true);
    mailbox = create_mailbox();
    mode.put(static_cast<uint8_t>(1));
    put_offer(mode, proof->offer());
    mode.put(mailbox ? mailbox->fd() : int32_t{-1});
  } else {
    mode.put(static_cast<uint8_t>(0)).put_string(why);
  }
  right_->send(proto::kRingLinkMode, 0, mode.bytes(), {});
  std::string failure = why;
  if (why.empty()) {
    const Connection::Incoming ready = right_->receive();
    if (ready.type != proto::kRingLinkReady) {
      throw FrameError(
          fmt::format("{} answered the link mode with frame type {}", right_->peer(), ready.type));
    }
    MetaReader answer(ready.meta);
    const bool reads = answer.get<uint8_t>() == 1;
    const bool shared = answer.get<uint8_t>() == 1;
    if (shared && (!reads || !mailbox)) {
      throw FrameError(
          fmt::format("{} says it shares a mailbox that was never offered to it", right_->peer()));
    }
    if (reads) {
      right_link_.by_reference = true;
      right_link_.peer_pid = right.pid;
      if (shared) right_link_.mailbox = std::move(mailbox);
      return;
    }
    failure = answer.rest_as_peer_text();
  }
  if (options_.transport == Transport::kShm) {
    throw CollectiveError(shm_failure(right_rank(), failure));
  }
}

void RingFormation::wait_for_left(SteadyClock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (membership_.wait_until(lock, deadline,
                             [&] { return left_ != nullptr || !left_failure_.empty(); })) {
    if (left_ != nullptr) return;
    throw CollectiveError(left_failure_);
  }
  lock.unlock();
  throw CollectiveError(fmt::format("{} did not join the ring within {} s{}",
                                    rank_name(left_rank()), options_.timeout_ms / 1000.0,
                                    refusal_note()));
}

void RingFormation::give_up_forming() {
  std::lock_guard lock(mutex_);
  if (final_refusal_.empty() || !left_failure_.empty()) return;
  left_failure_ = final_refusal_;
  membership_.notify_all();
}

std::string RingFormation::final_refusal() {
  std::lock_guard lock(mutex_);
  return left_failure_.empty() ? std::string() : final_refusal_;
}

std::string RingFormation::refusal_note() {
  std::lock_guard lock(mutex_);
  return last_refusal_.empty() ? std::string()
                               : fmt::format(" (this rank refused a peer: {})", last_refusal_);
}

void RingFormation::serve_left(Connection& connection) {
  const Connection::Incoming hello = connection.receive();
  if (hello.type != proto::kRingHello) {
    throw FrameError(fmt::format("{} sent frame type {} where a ring hello was expected",
                                 connection.peer(), hello.type));
  }
  MetaReader reader(hello.meta);
  const auto ring_size = reader.get<int32_t>();
  const auto peer_rank = reader.get<int32_t>();
  const auto fingerprint = reader.get<uint64_t>();
  const bool left_reads = reader.get<uint8_t>() == 1;
  const std::optional<Challenge> theirs =
      left_reads ? std::optional(get_challenge(reader)) : std::nullopt;
  std::string refusal = refusal_for(ring_size, peer_rank, fingerprint, connection.peer());
  const bool final = !refusal.empty();
  if (refusal.empty() && !left_reads && options_.transport == Transport::kShm) {
    refusal = shm_failure(
        left_rank(), fmt::format("{} was started with --transport tcp", rank_name(left_rank())));
  }
  {
    std::lock_guard lock(mutex_);
    if (refusal.empty() && (left_ != nullptr || closing_)) {
      refusal = fmt::format("{} already has its left neighbour", rank_name(rank()));
    }
    if (!refusal.empty()) last_refusal_ = refusal;
    // Known at once, so that the echo of this refusal (the peer giving up and closing) is
    // explained by it; acted on once the peer has been told (give_up_forming).
    if (final && final_refusal_.empty()) {
      final_refusal_ = fmt::format("{} refused its left neighbour: {}", rank_name(rank()), refusal);
    }
  }
  if (!refusal.empty()) {
    spdlog::warn("ring: refused {}: {}", connection.peer(), refusal);
    MetaWriter reason;
    reason.put_string(refusal);
    // Sent before this rank gives up on the ring, so that the refused peer reads why rather than
    // a closed connection when this process exits.
    try {
      connection.send(proto::kRingRefused, 0, reason.bytes(), {});
    } catch (...) {
      if (final) give_up_forming();
      throw;
    }
    if (final) give_up_forming();
    return;
  }
  connection.set_task_name(rank_name(left_rank()));
  const bool offer_memory = left_reads && options_.transport != Transport::kTcp;
  std::optional<MemoryProof> proof;  // holds the left neighbour's challenge until it has read it
  std::optional<Challenge> mine;
  MetaWriter welcome;
  if (offer_memory) {
    proof.emplace(*theirs, peer_shares_host(connection.stream()));
    mine = new_challenge();
    welcome.put(static_cast<uint8_t>(1));
    put_offer(welcome, proof->offer());
    put_challenge(welcome, *mine);
  } else {
    welcome.put(static_cast<uint8_t>(0))
        .put_string(fmt::format("{} was started with --transport tcp",
                                rank_name(left_reads ? rank() : left_rank())));
  }
  connection.send(proto::kRingWelcome, 0, welcome.bytes(), {});
  if (offer_memory) {
    const std::string failure = accept_by_reference(connection, *mine);
    if (!failure.empty() && options_.transport == Transport::kShm) {
      std::lock_guard lock(mutex_);
      left_failure_ = shm_failure(left_rank(), failure);
      membership_.notify_all();
      return;
    }
  }
  std::unique_lock lock(mutex_);
  left_ = &connection;
  membership_.notify_all();
  // The connection lives as long as this handler: hold it open until the ring is destroyed.
  membership_.wait(lock, [&] { return closing_; });
}

std::string RingFormation::accept_by_reference(Connection& connection, const Challenge& mine) {
  const Connection::Incoming mode = connection.receive();
  if (mode.type != proto::kRingLinkMode) {
    throw FrameError(fmt::format("{} sent frame type {} where a link mode was expected",
                                 connection.peer(), mode.type));
  }
  MetaReader answer(mode.meta);
  if (answer.get<uint8_t>() == 0) return answer.rest_as_peer_text();  // it cannot read us
  const MemoryOffer left = get_offer(answer);
  const auto mailbox_fd = answer.get<int32_t>();
  const std::string why = check_memory_offer(left, mine);
  std::unique_ptr<SharedMailbox> mailbox;
  if (why.empty() && mailbox_fd >= 0) mailbox = attach_mailbox(left, mailbox_fd);
  MetaWriter ready;
  ready.put(static_cast<uint8_t>(why.empty() ? 1 : 0))
      .put(static_cast<uint8_t>(mailbox ? 1 : 0))
      .put_string(why);
  connection.send(proto::kRingLinkReady, 0, ready.bytes(), {});
  if (why.empty()) {
    left_link_.by_reference = true;
    left_link_.peer_pid = left.pid;
    left_link_.mailbox = std::move(mailbox);
  }
  return why;
}

// A link without a mailbox still moves chunks through memory, announcing them in frames: the
// mailbox saves latency, it is not what makes the link work, so failing to share one is no error.
std::unique_ptr<SharedMailbox> RingFormation::create_mailbox() const {
  try {
    return SharedMailbox::create(rank_name(right_rank()));
  } catch (const TransportError& error) {
    spdlog::info("ring: chunks to {} are announced in frames: {}", rank_name(right_rank()),
                 error.what());
    return nullptr;
  }
}

std::unique_ptr<SharedMailbox> RingFormation::attach_mailbox(const MemoryOffer& left,
                                                             int32_t fd) const {
  try {
    return SharedMailbox::attach(left.pid, fd, rank_name(left_rank()));
  } catch (const TransportError& error) {
    spdlog::info("ring: chunks from {} are announced in frames: {}", rank_name(left_rank()),
                 error.what());
    return nullptr;
  }
}

std::string RingFormation::refusal_for(int ring_size, int peer_rank, uint64_t fingerprint,
                                       std::string_view peer) const {
  if (ring_size != size()) {
    return fmt::format(
        "{} runs a ring of {} ranks but {} was started with {}: every worker needs the same "
        "worker list",
        peer, ring_size, rank_name(rank()), size());
  }
  if (peer_rank != left_rank()) {
    return fmt::format(
        "{} says it is {} but {}'s left neighbour is {}: the workers are listed in another order "
        "than those tasks were started with",
        peer, rank_name(peer_rank), rank_name(rank()), rank_name(left_rank()));
  }
  if (fingerprint != options_.fingerprint) {
    return fmt::format(
        "{} ({}) runs another model or configuration (fingerprint {:016x}, {} has {:016x}): check "
        "--model and the flags that shape the parameters",
        peer, rank_name(peer_rank), fingerprint, rank_name(rank()), options_.fingerprint);
  }
  return {};
}

std::string RingFormation::shm_failure(int peer_rank, std::string_view why) const {
  return fmt::format(
      "--transport shm: {} and {} cannot move chunks through memory: {}; run them with "
      "--transport tcp or auto",
      rank_name(rank()), rank_name(peer_rank), why);
}

}  // namespace dtrain
