// TcpRing: the progress loop that moves chunks on the calling thread (by value or by reference),
// and failure propagation. Forming the ring is ring_formation.cc's.
#include "collective/tcp_ring.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <utility>

#include "base/error.h"
#include "base/log.h"
#include "collective/ring_protocol.h"

namespace dtrain {

namespace proto = ring_protocol;

TcpRing::TcpRing(RingOptions options) : options_(std::move(options)), formation_(options_) {}

TcpRing::~TcpRing() {
  // Leaving with frames still queued means leaving in the middle of a collective: the neighbours
  // must hear it now rather than after their timeout. A frame half on the wire cannot be finished
  // (its memory may be gone by now), so then closing the link is the message.
  if (!failure_ && size() > 1) {
    const std::string message =
        fmt::format("{} stopped in the middle of a collective", rank_name(rank()));
    for (const Side side : {Side::kLeft, Side::kRight}) {
      const RingLink& l = link(side);
      if (l.settled() || l.head_started) continue;
      if (!failure_) failure_ = std::make_exception_ptr(CollectiveError(message));
      send_abort(side, message);
    }
  }
  formation_.close();
}

uint16_t TcpRing::port() const { return formation_.port(); }

std::string TcpRing::describe_link(Side side) const {
  if (!reads_memory(side)) return "tcp";
  return shares_mailbox(side)
             ? "shm (copied out of the sender's memory, announced through a shared mailbox)"
             : "shm (copied out of the sender's memory, announced in frames)";
}

int TcpRing::left_rank() const { return (rank() + size() - 1) % size(); }

int TcpRing::right_rank() const { return (rank() + 1) % size(); }

// ---- forming the ring --------------------------------------------------------------------------

void TcpRing::connect(const HostPort& right) {
  if (size() == 1) return;
  formation_.connect(right);
  for (const Side side : {Side::kLeft, Side::kRight}) {
    FormedLink formed = formation_.take(side);
    RingLink& l = link(side);
    l.connection = formed.connection;
    l.by_reference = formed.by_reference;
    l.peer_pid = formed.peer_pid;
    l.mailbox = std::move(formed.mailbox);
  }
}

Connection* TcpRing::reached(Side side) {
  Connection* formed = link(side).connection;
  return formed != nullptr ? formed : formation_.connection(side);
}

// ---- moving chunks -----------------------------------------------------------------------------

void TcpRing::send(Side to, std::span<const float> data, ChunkTag tag) {
  throw_if_failed();
  RingLink& l = link(to);
  l.queue.push_back(RingLink::Outgoing{data, tag, RingLink::Kind::kChunk});
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
      RingLink& l = link(side);
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
        if (link(side).idle())
          link(side).queue.push_back(RingLink::Outgoing{{}, {}, RingLink::Kind::kKeepalive});
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
  RingLink& l = link(side);
  if (l.idle()) return false;
  if (l.mailbox) return pump_mailbox(side);
  Connection& to = connection(side);
  const uint64_t before = to.bytes_moved();
  try {
    while (!l.idle()) {
      if (!l.head_started) {
        const RingLink::Outgoing& item = l.queue[l.head];
        l.send_meta.clear();
        if (item.kind == RingLink::Kind::kKeepalive) {
          to.start_send(proto::kRingKeepalive, 0, {}, {});
        } else if (item.kind == RingLink::Kind::kRead) {
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
  RingLink& l = link(side);
  Connection& to = connection(side);
  const uint64_t before = to.bytes_moved();
  bool posted = false;
  const auto pump = [&] {
    while (!l.idle()) {
      const RingLink::Outgoing& item = l.queue[l.head];
      if (item.kind == RingLink::Kind::kKeepalive) {
        if (!l.head_started) to.start_send(proto::kRingKeepalive, 0, {}, {});
        l.head_started = true;
        if (!to.continue_send()) return;
        l.head_started = false;
      } else if (item.kind == RingLink::Kind::kRead) {
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
      l.queue.push_back(RingLink::Outgoing{{}, {}, RingLink::Kind::kKeepalive});
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
  RingLink& l = link(side);
  bool news = false;
  try {
    SharedMailbox::Record record;
    while (l.mailbox->try_take(record)) {
      l.refs.push_back(chunk_ref(record));
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
  RingLink& l = link(side);
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
  RingLink& l = link(side);
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
      RingLink::ChunkRef ref;
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
  RingLink& l = link(from);
  read_announcements(from);
  if (l.ref_head == l.refs.size()) {
    if (!l.closed.empty()) fail_lost(from, l.closed);
    return false;
  }
  const RingLink::ChunkRef ref = l.refs[l.ref_head++];
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
  l.queue.push_back(RingLink::Outgoing{{}, {}, RingLink::Kind::kRead});
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
  RingLink& l = link(from);
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
    RingLink* links[2];
    explicit Sleeping(TcpRing& ring) : links{&ring.left_link_, &ring.right_link_} {
      for (RingLink* l : links)
        if (l->mailbox) l->mailbox->set_sleeping(true);
    }
    ~Sleeping() {
      for (RingLink* l : links)
        if (l->mailbox) l->mailbox->set_sleeping(false);
    }
    bool news() const {
      for (RingLink* l : links)
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
  if (Connection* to = reached(side)) link(side).send_abort(*to, message, options_.timeout_ms);
}

void TcpRing::drain(Side side) {
  Connection* from = reached(side);
  if (from != nullptr && !link(side).abort_seen) link(side).drain(*from, options_.timeout_ms);
}

void TcpRing::throw_if_failed() const {
  if (failure_) std::rethrow_exception(failure_);
}

}  // namespace dtrain
