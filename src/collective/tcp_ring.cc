// TcpRing: forming the ring (hello, checks, refusal), the sender thread, and failure propagation.
#include "collective/tcp_ring.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include "base/cpu.h"
#include "base/error.h"
#include "base/log.h"
#include "collective/ring_protocol.h"

namespace dtrain {

namespace proto = ring_protocol;

namespace {

// A chunk reference in a mailbox record: the fields of kRingChunkRef's meta.
SharedMailbox::Record chunk_record(ChunkTag tag, std::span<const float> data) {
  return {{tag.op, uint64_t{tag.step} << 32 | tag.chunk, reinterpret_cast<uint64_t>(data.data()),
           data.size_bytes()}};
}

}  // namespace

int ring_spin_us(int ranks_here, Transport transport) {
  return ranks_here <= available_cores() || transport != Transport::kTcp ? 50 : 0;
}

TcpRing::TcpRing(TcpRingOptions options) : options_(std::move(options)) {
  if (options_.size < 1 || options_.rank < 0 || options_.rank >= options_.size) {
    throw std::invalid_argument(
        fmt::format("TcpRing: rank {} of a ring of {}", options_.rank, options_.size));
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

TcpRing::~TcpRing() {
  // Leaving with frames still queued means leaving in the middle of a collective: the neighbours
  // must hear it now rather than after their timeout. A frame half on the wire cannot be finished
  // (its memory may be gone by now), so then closing the link is the message.
  if (!failure_ && size() > 1) {
    const std::string message =
        fmt::format("{} stopped in the middle of a collective", rank_name(rank()));
    for (const Side side : {Side::kLeft, Side::kRight}) {
      const Link& l = link(side);
      if (l.settled() || l.head_started) continue;
      if (!failure_) failure_ = std::make_exception_ptr(CollectiveError(message));
      send_abort(side, message);
    }
  }
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  membership_.notify_all();
  if (server_) server_->stop();  // serve_left returns, closing the left link
  if (right_) right_->close();
}

uint16_t TcpRing::port() const { return server_ ? server_->port() : options_.port; }

std::string TcpRing::rank_name(int rank) const { return fmt::format("{}{}", options_.job, rank); }

int TcpRing::left_rank() const { return (rank() + size() - 1) % size(); }

int TcpRing::right_rank() const { return (rank() + 1) % size(); }

// ---- forming the ring --------------------------------------------------------------------------

void TcpRing::connect(const HostPort& right) {
  if (size() == 1) return;
  if (right_) throw std::logic_error("TcpRing::connect called twice");
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

void TcpRing::connect_by_reference(const MemoryOffer& right, const Challenge& mine,
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

void TcpRing::wait_for_left(SteadyClock::time_point deadline) {
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

void TcpRing::give_up_forming() {
  std::lock_guard lock(mutex_);
  if (final_refusal_.empty() || !left_failure_.empty()) return;
  left_failure_ = final_refusal_;
  membership_.notify_all();
}

std::string TcpRing::final_refusal() {
  std::lock_guard lock(mutex_);
  return left_failure_.empty() ? std::string() : final_refusal_;
}

std::string TcpRing::refusal_note() {
  std::lock_guard lock(mutex_);
  return last_refusal_.empty() ? std::string()
                               : fmt::format(" (this rank refused a peer: {})", last_refusal_);
}

void TcpRing::serve_left(Connection& connection) {
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

std::string TcpRing::accept_by_reference(Connection& connection, const Challenge& mine) {
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
std::unique_ptr<SharedMailbox> TcpRing::create_mailbox() const {
  try {
    return SharedMailbox::create(rank_name(right_rank()));
  } catch (const TransportError& error) {
    spdlog::info("ring: chunks to {} are announced in frames: {}", rank_name(right_rank()),
                 error.what());
    return nullptr;
  }
}

std::unique_ptr<SharedMailbox> TcpRing::attach_mailbox(const MemoryOffer& left, int32_t fd) const {
  try {
    return SharedMailbox::attach(left.pid, fd, rank_name(left_rank()));
  } catch (const TransportError& error) {
    spdlog::info("ring: chunks from {} are announced in frames: {}", rank_name(left_rank()),
                 error.what());
    return nullptr;
  }
}

std::string TcpRing::refusal_for(int ring_size, int peer_rank, uint64_t fingerprint,
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

std::string TcpRing::shm_failure(int peer_rank, std::string_view why) const {
  return fmt::format(
      "--transport shm: {} and {} cannot move chunks through memory: {}; run them with "
      "--transport tcp or auto",
      rank_name(rank()), rank_name(peer_rank), why);
}

// ---- moving chunks -----------------------------------------------------------------------------

void TcpRing::send(Side to, std::span<const float> data, ChunkTag tag) {
  throw_if_failed();
  Link& l = link(to);
  l.queue.push_back(Outgoing{data, tag, Kind::kChunk});
  if (l.by_reference) ++l.unread;
  // Start at once: the kernel takes what fits while the caller goes on with its next chunk.
  pump_sends(to);
}

void TcpRing::recv(Side from, std::span<float> into, ChunkTag tag) {
  throw_if_failed();
  progress(Want::kChunk, from, into, tag);
}

void TcpRing::wait_sent() {
  throw_if_failed();
  progress(Want::kSent, Side::kLeft, {}, {});
}

std::string TcpRing::lost_message(int peer, std::string_view what) const {
  return fmt::format("lost {}: {} (seen by {})", rank_name(peer), what, rank_name(rank()));
}

void TcpRing::progress(Want want, Side from, std::span<float> into, ChunkTag tag) {
  constexpr Side kSides[] = {Side::kLeft, Side::kRight};
  const auto timeout = std::chrono::milliseconds(options_.timeout_ms);
  const auto keepalive_every = timeout / 4;
  const auto spin = std::chrono::microseconds(options_.spin_us);
  const bool reading = want == Want::kChunk;
  auto now = SteadyClock::now();
  auto last_in = now;                                // a byte came from `from` (keepalives count)
  SteadyClock::time_point last_out[2] = {now, now};  // per side: a byte went out, or none waited
  auto last_progress = now;                          // any of them
  auto last_keepalive = now;                         // sent, or this wait began
  for (;;) {
    bool sent[2] = {pump_sends(Side::kLeft), pump_sends(Side::kRight)};
    // A neighbour that read our chunks has taken them as surely as a socket that accepted them.
    for (const Side side : kSides) {
      Link& l = link(side);
      if (!l.by_reference) continue;
      const uint64_t unread = l.unread;
      if (read_announcements(side) && side == from && reading) last_in = SteadyClock::now();
      if (l.unread != unread) sent[static_cast<int>(side)] = true;
      if (l.unread > 0 && !l.closed.empty()) fail_lost(side, l.closed);
    }
    bool moved = sent[0] || sent[1];
    bool done = false;
    if (reading) {
      const uint64_t before = connection(from).bytes_moved();
      done = pump_receive(from, into, tag);
      if (connection(from).bytes_moved() != before) {
        moved = true;
        last_in = SteadyClock::now();
      }
    } else {
      done = left_link_.settled() && right_link_.settled();
    }
    if (done) return;

    now = SteadyClock::now();
    for (const Side side : kSides) {
      if (sent[static_cast<int>(side)] || link(side).settled()) {
        last_out[static_cast<int>(side)] = now;
      }
    }
    if (moved) {
      last_progress = now;
      continue;
    }
    if (reading && now - last_in > timeout) {
      fail_lost(from, fmt::format("timed out: no data for {} s", timeout.count() / 1000.0));
    }
    for (const Side side : kSides) {
      if (now - last_out[static_cast<int>(side)] > timeout) {
        fail_lost(side,
                  fmt::format("timed out: it accepted no data for {} s", timeout.count() / 1000.0));
      }
    }
    // Tell the neighbours we are alive and waiting, so that they do not blame us.
    if (now - last_keepalive > keepalive_every) {
      for (const Side side : kSides) {
        if (link(side).idle()) link(side).queue.push_back(Outgoing{{}, {}, Kind::kKeepalive});
      }
      last_keepalive = now;
      continue;
    }
    if (now - last_progress < spin) {
      std::this_thread::yield();
      continue;
    }
    auto until = last_keepalive + keepalive_every;
    if (reading) until = std::min(until, last_in + timeout);
    for (const Side side : kSides) {
      if (!link(side).settled()) {
        until = std::min(until, last_out[static_cast<int>(side)] + timeout);
      }
    }
    wait_for_io(reading ? &from : nullptr, until);
  }
}

bool TcpRing::pump_sends(Side side) {
  Link& l = link(side);
  if (l.idle()) return false;
  if (l.mailbox) return pump_mailbox(side);
  Connection& to = connection(side);
  const uint64_t before = to.bytes_moved();
  try {
    while (!l.idle()) {
      if (!l.head_started) {
        const Outgoing& item = l.queue[l.head];
        l.send_meta.clear();
        if (item.kind == Kind::kKeepalive) {
          to.start_send(proto::kRingKeepalive, 0, {}, {});
        } else if (item.kind == Kind::kRead) {
          to.start_send(proto::kRingChunkRead, 0, {}, {});
        } else if (l.by_reference) {
          l.send_meta.put(item.tag.op).put(item.tag.step).put(item.tag.chunk);
          l.send_meta.put(reinterpret_cast<uint64_t>(item.data.data()))
              .put(static_cast<uint64_t>(item.data.size_bytes()));
          to.start_send(proto::kRingChunkRef, 0, l.send_meta.bytes(), {});
        } else {
          l.send_meta.put(item.tag.op).put(item.tag.step).put(item.tag.chunk);
          const std::span<const float> tensors[] = {item.data};
          to.start_send(proto::kRingChunk, 0, l.send_meta.bytes(), tensors);
        }
        l.head_started = true;
      }
      if (!to.continue_send()) break;
      l.head_started = false;
      ++l.head;
    }
  } catch (const CollectiveError&) {
    throw;
  } catch (const TransportError& error) {
    fail_lost(side, error.what());
  }
  if (l.idle()) {
    l.queue.clear();  // keeps its capacity: no allocation once the largest collective has run
    l.head = 0;
  }
  return to.bytes_moved() != before;
}

bool TcpRing::pump_mailbox(Side side) {
  Link& l = link(side);
  Connection& to = connection(side);
  const uint64_t before = to.bytes_moved();
  bool posted = false;
  const auto pump = [&] {
    while (!l.idle()) {
      const Outgoing& item = l.queue[l.head];
      if (item.kind == Kind::kKeepalive) {
        if (!l.head_started) to.start_send(proto::kRingKeepalive, 0, {}, {});
        l.head_started = true;
        if (!to.continue_send()) return;
        l.head_started = false;
      } else if (item.kind == Kind::kRead) {
        l.mailbox->acknowledge();
        posted = true;
      } else {
        if (!l.mailbox->try_post(chunk_record(item.tag, item.data))) return;
        posted = true;
      }
      ++l.head;
    }
  };
  try {
    pump();
    // A neighbour asleep in poll() does not see the mailbox: a frame wakes it.
    if (posted && l.mailbox->peer_sleeping()) {
      l.queue.push_back(Outgoing{{}, {}, Kind::kKeepalive});
      pump();
    }
  } catch (const CollectiveError&) {
    throw;
  } catch (const FrameError& error) {
    fail_corrupted(error);
  } catch (const TransportError& error) {
    fail_lost(side, error.what());
  }
  if (l.idle()) {
    l.queue.clear();
    l.head = 0;
  }
  return posted || to.bytes_moved() != before;
}

bool TcpRing::read_mailbox(Side side) {
  Link& l = link(side);
  bool news = false;
  try {
    SharedMailbox::Record record;
    while (l.mailbox->try_take(record)) {
      ChunkRef ref;
      ref.tag.op = record.words[0];
      ref.tag.step = static_cast<uint32_t>(record.words[1] >> 32);
      ref.tag.chunk = static_cast<uint32_t>(record.words[1]);
      ref.address = record.words[2];
      ref.bytes = record.words[3];
      l.refs.push_back(ref);
      news = true;
    }
    const uint64_t acknowledged = l.mailbox->acknowledged();  // at most what we posted
    if (acknowledged != l.acknowledged) {
      l.unread -= acknowledged - l.acknowledged;
      l.acknowledged = acknowledged;
      news = true;
    }
  } catch (const FrameError& error) {
    fail_corrupted(error);
  }
  return news;
}

void TcpRing::fail_corrupted(const FrameError& error) {
  // The neighbour is alive and waiting on us, as after a malformed frame: it must hear the abort
  // too, or it would wait out its timeout before it learnt why.
  fail(fmt::format("{} (seen by {})", error.what(), rank_name(rank())), std::nullopt);
}

bool TcpRing::read_header(Side side) {
  Link& l = link(side);
  Connection& conn = connection(side);
  if (!l.closed.empty()) return l.header_in;
  try {
    while (!l.header_in) {
      const std::optional<Connection::Incoming> in = conn.try_receive();
      if (!in) return false;
      if (in->type == proto::kRingKeepalive) continue;
      if (in->type == proto::kRingAbort) {
        l.abort_seen = true;
        fail(MetaReader(in->meta).rest_as_peer_text(), std::nullopt);  // names the culprit
      }
      if (in->type != proto::kRingChunk) {
        fail(fmt::format("{} sent frame type {} in the middle of a collective", conn.peer(),
                         in->type),
             std::nullopt);
      }
      try {
        MetaReader reader(in->meta);
        l.incoming_tag.op = reader.get<uint64_t>();
        l.incoming_tag.step = reader.get<uint32_t>();
        l.incoming_tag.chunk = reader.get<uint32_t>();
      } catch (const ShortMeta&) {
        fail(fmt::format("{} sent a malformed chunk header", conn.peer()), std::nullopt);
      }
      l.incoming_bytes = in->tensor_bytes;
      l.header_in = true;
    }
  } catch (const CollectiveError&) {
    throw;
  } catch (const TransportError& error) {
    lost_while_reading(side, error);
    return false;
  }
  return true;
}

void TcpRing::lost_while_reading(Side side, const TransportError& error) {
  if (!connection(side).closed_by_peer()) fail_lost(side, error.what());
  link(side).closed = error.what();
}

bool TcpRing::read_announcements(Side side) {
  Link& l = link(side);
  Connection& conn = connection(side);
  // Frames can wait while the mailbox brings news: what matters now is there, and a neighbour
  // that posts has neither stopped nor closed its connection.
  if (l.mailbox && read_mailbox(side)) return true;
  if (!l.closed.empty()) return false;
  const uint64_t before = conn.bytes_moved();
  try {
    while (const std::optional<Connection::Incoming> in = conn.try_receive()) {
      switch (in->type) {
        case proto::kRingKeepalive:
          continue;
        case proto::kRingAbort:
          l.abort_seen = true;
          fail(MetaReader(in->meta).rest_as_peer_text(), std::nullopt);  // names the culprit
        case proto::kRingChunkRead:
          if (l.unread == 0) {
            fail(fmt::format("{} said it read a chunk that was never sent to it", conn.peer()),
                 std::nullopt);
          }
          --l.unread;
          continue;
        case proto::kRingChunkRef:
          break;
        default:
          fail(fmt::format("{} sent frame type {} in the middle of a collective", conn.peer(),
                           in->type),
               std::nullopt);
      }
      ChunkRef ref;
      try {
        MetaReader reader(in->meta);
        ref.tag.op = reader.get<uint64_t>();
        ref.tag.step = reader.get<uint32_t>();
        ref.tag.chunk = reader.get<uint32_t>();
        ref.address = reader.get<uint64_t>();
        ref.bytes = reader.get<uint64_t>();
      } catch (const ShortMeta&) {
        fail(fmt::format("{} sent a malformed chunk reference", conn.peer()), std::nullopt);
      }
      l.refs.push_back(ref);
    }
  } catch (const CollectiveError&) {
    throw;
  } catch (const TransportError& error) {
    lost_while_reading(side, error);
  }
  return conn.bytes_moved() != before;
}

bool TcpRing::receive_by_reference(Side from, std::span<float> into, ChunkTag tag) {
  Link& l = link(from);
  read_announcements(from);
  if (l.ref_head == l.refs.size()) {
    if (!l.closed.empty()) fail_lost(from, l.closed);
    return false;
  }
  const ChunkRef ref = l.refs[l.ref_head++];
  if (l.ref_head == l.refs.size()) {
    l.refs.clear();  // keeps its capacity, as the send queues do
    l.ref_head = 0;
  }
  if (!(ref.tag == tag) || ref.bytes != into.size_bytes()) {
    fail_mismatch(from, ref.tag, ref.bytes, tag, into.size_bytes());
  }
  try {
    read_peer_memory(l.peer_pid, ref.address, std::as_writable_bytes(into),
                     connection(from).peer());
  } catch (const TransportError& error) {
    fail_lost(from, error.what());
  }
  l.queue.push_back(Outgoing{{}, {}, Kind::kRead});
  pump_sends(from);  // frees the neighbour's memory as early as the socket allows
  return true;
}

void TcpRing::fail_mismatch(Side from, ChunkTag got, uint64_t got_bytes, ChunkTag tag,
                            uint64_t bytes) {
  fail(fmt::format("{} sent {} ({} bytes) where {} expected {} ({} bytes): the ranks are not "
                   "running the same collectives; check that every worker was started with the "
                   "same flags",
                   connection(from).peer(), to_string(got), got_bytes, rank_name(rank()),
                   to_string(tag), bytes),
       std::nullopt);
}

bool TcpRing::pump_receive(Side from, std::span<float> into, ChunkTag tag) {
  if (link(from).by_reference) return receive_by_reference(from, into, tag);
  Link& l = link(from);
  if (!read_header(from)) {
    if (!l.closed.empty()) fail_lost(from, l.closed);
    return false;
  }
  if (!(l.incoming_tag == tag) || l.incoming_bytes != into.size_bytes()) {
    fail_mismatch(from, l.incoming_tag, l.incoming_bytes, tag, into.size_bytes());
  }
  try {
    if (!connection(from).try_receive_tensors(into)) return false;
  } catch (const TransportError& error) {
    fail_lost(from, error.what());
  }
  l.header_in = false;
  return true;
}

void TcpRing::wait_for_io(const Side* reading, SteadyClock::time_point until) {
  // A neighbour that posts to a mailbox wakes this rank only if it knows it sleeps; then looking
  // once more closes the window in which it posted without knowing.
  struct Sleeping {
    Link* links[2];
    explicit Sleeping(TcpRing& ring) : links{&ring.left_link_, &ring.right_link_} {
      for (Link* l : links)
        if (l->mailbox) l->mailbox->set_sleeping(true);
    }
    ~Sleeping() {
      for (Link* l : links)
        if (l->mailbox) l->mailbox->set_sleeping(false);
    }
    bool news() const {
      for (Link* l : links)
        if (l->mailbox && l->mailbox->has_news()) return true;
      return false;
    }
  } sleeping(*this);
  if (sleeping.news()) return;
  const auto left_ms =
      std::chrono::ceil<std::chrono::milliseconds>(until - SteadyClock::now()).count();
  const int timeout_ms = static_cast<int>(std::clamp<int64_t>(left_ms, 1, 1000));
  TcpStream::Wait waits[2];
  size_t count = 0;
  for (const Side side : {Side::kLeft, Side::kRight}) {
    // A link holding a chunk for a later step stays readable until that step: watching it would
    // turn this sleep into a spin.
    const bool read = link(side).closed.empty() &&
                      ((reading != nullptr && *reading == side) || !link(side).header_in);
    const bool write = !link(side).idle();
    if (read || write) waits[count++] = {&connection(side).stream(), read, write};
  }
  TcpStream::wait_any(std::span(waits, count), timeout_ms);
  // Frames from a neighbour we are not reading from are keepalives or an abort, or a chunk
  // arriving early; read their openings now so that an abort is acted on at once. A link moving
  // chunks by reference is not read here: progress() reads its announcements first thing, where
  // what they bring (a keepalive from the neighbour it waits on, a chunk read) counts against the
  // timeouts. Read here, they kept a live neighbour's keepalives from counting.
  for (const Side side : {Side::kLeft, Side::kRight}) {
    if (!link(side).by_reference && (reading == nullptr || *reading != side)) read_header(side);
  }
}

// ---- failure -----------------------------------------------------------------------------------

void TcpRing::abort(std::string_view reason) {
  if (failure_ || size() == 1) return;
  failure_ = std::make_exception_ptr(CollectiveError(std::string(reason)));
  for (const Side side : {Side::kLeft, Side::kRight}) send_abort(side, std::string(reason));
}

void TcpRing::fail_lost(Side side, std::string_view what) {
  fail(lost_message(rank_on(side), what), side);
}

void TcpRing::fail(const std::string& message, std::optional<Side> broken) {
  if (!failure_) {
    failure_ = std::make_exception_ptr(CollectiveError(message));
    for (const Side side : {Side::kLeft, Side::kRight}) {
      if (side != broken) send_abort(side, message);
    }
    for (const Side side : {Side::kLeft, Side::kRight}) {
      if (side != broken) drain(side);
    }
  }
  std::rethrow_exception(failure_);
}

void TcpRing::send_abort(Side side, const std::string& message) {
  Link& l = link(side);
  Connection* to = side == Side::kLeft ? left_ : right_.get();
  if (to == nullptr) return;
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(options_.timeout_ms);
  // Only what is already on the wire must be finished: a frame cannot be cut short.
  l.queue.resize(l.head_started ? l.head + 1 : l.head);
  MetaWriter meta;
  meta.put_string(message);
  try {
    while (!l.idle()) {
      const uint64_t before = to->bytes_moved();
      if (to->continue_send()) {
        l.head_started = false;
        ++l.head;
        continue;
      }
      if (to->bytes_moved() != before) continue;
      if (SteadyClock::now() > deadline) return;
      TcpStream::wait_either(nullptr, &to->stream(), 100);
    }
    to->start_send(proto::kRingAbort, 0, meta.bytes(), {});
    while (!to->continue_send()) {
      if (SteadyClock::now() > deadline) return;
      TcpStream::wait_either(nullptr, &to->stream(), 100);
    }
  } catch (const TransportError& error) {
    // That neighbour is gone as well; the rank beyond it hears of the failure from its own side.
    spdlog::debug("ring: could not pass the abort on to {}: {}", to->peer(), error.what());
  }
  l.queue.clear();
  l.head = 0;
  l.head_started = false;
}

void TcpRing::drain(Side side) {
  Link& l = link(side);
  Connection* from = side == Side::kLeft ? left_ : right_.get();
  if (from == nullptr || l.abort_seen) return;
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(options_.timeout_ms);
  std::vector<float> sink;
  try {
    for (;;) {
      const uint64_t before = from->bytes_moved();
      if (l.header_in) {
        sink.resize(l.incoming_bytes / sizeof(float));
        if (from->try_receive_tensors(sink)) l.header_in = false;
      } else if (const auto in = from->try_receive()) {
        if (in->type == proto::kRingAbort) return;  // it has stopped and knows why
        l.incoming_bytes = in->tensor_bytes;
        l.header_in = in->tensor_bytes > 0;
      }
      if (from->bytes_moved() != before) continue;
      if (SteadyClock::now() > deadline) return;
      TcpStream::wait_either(&from->stream(), nullptr, 100);
    }
  } catch (const TransportError&) {
    // That neighbour has gone too (or sent junk): nothing is waiting on us there any more.
  }
}

void TcpRing::throw_if_failed() const {
  if (failure_) std::rethrow_exception(failure_);
}

}  // namespace dtrain
