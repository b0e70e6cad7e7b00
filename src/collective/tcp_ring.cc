// TcpRing: the progress loop that moves chunks on the calling thread, and failure propagation.
// Forming the ring is ring_formation.cc's; how the chunks travel, the connections'.
#include "collective/tcp_ring.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>

#include "base/error.h"
#include "base/log.h"
#include "collective/ring_protocol.h"
#include "comm/tcp_congestion.h"

namespace dtrain {

namespace proto = ring_protocol;

namespace {

// The connection moves tensors as float spans (comm/connection.h): a chunk's bytes cross it as the
// floats that overlay them, bit for bit, whatever their element type. Until it moves bytes, a
// chunk must therefore be whole float-aligned 4-byte words, which every float32 chunk is.
template <typename Byte>
auto as_words(std::span<Byte> bytes) {
  using Word = std::conditional_t<std::is_const_v<Byte>, const float, float>;
  if (bytes.size() % sizeof(float) != 0 ||
      reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) != 0) {
    throw UsageError(fmt::format(
        "a TCP ring chunk of {} bytes is not whole float-aligned 4-byte words", bytes.size()));
  }
  return std::span<Word>(reinterpret_cast<Word*>(bytes.data()), bytes.size() / sizeof(float));
}

}  // namespace

TcpRing::TcpRing(RingOptions options)
    : options_(std::move(options)),
      formation_(options_),
      stall_(
          options_.rank, options_.stall_warning_ms, options_.chief,
          [this](int rank) { return rank_name(rank); },
          [this](const std::string& line) {
            if (options_.wait_report) {
              options_.wait_report(line);
            } else {
              spdlog::warn("{}: {}", rank_name(rank()), line);
            }
          }) {
  if (options_.interrupt != nullptr) options_.interrupt->rearm();
}

TcpRing::~TcpRing() {
  // Leaving with frames still queued means leaving in the middle of a collective: the neighbours
  // must hear it now rather than after their timeout. A frame half on the wire cannot be finished
  // (its memory may be gone by now), so then closing the link is the message.
  if (!failure_ && size() > 1) {
    const std::string message =
        fmt::format("{} stopped in the middle of a collective", rank_name(rank()));
    for (const Side side : {Side::kLeft, Side::kRight}) {
      const RingLink& l = link(side);
      bool settled = false;
      try {
        settled = l.settled();
      } catch (const TransportError&) {
        // That neighbour's mailbox makes no sense: it hears of this in the abort all the same.
      }
      if (settled || l.head_started) continue;
      if (!failure_) failure_ = std::make_exception_ptr(CollectiveError(message));
      send_abort(side, message);
    }
  }
  formation_.close();
}

uint16_t TcpRing::port() const { return formation_.port(); }

std::string TcpRing::describe_link(Side side) const {
  return reads_memory(side)
             ? "shm (copied out of the sender's memory, announced through a shared mailbox)"
             : fmt::format("tcp (congestion control {})", connection(side).congestion_control());
}

int TcpRing::left_rank() const { return (rank() + size() - 1) % size(); }

int TcpRing::right_rank() const { return (rank() + 1) % size(); }

// ---- forming the ring --------------------------------------------------------------------------

void TcpRing::connect(const HostPort& right) {
  if (size() == 1) return;
  formation_.connect(right);
  for (const Side side : {Side::kLeft, Side::kRight})
    link(side).connection = formation_.connection(side);
}

Connection* TcpRing::reached(Side side) {
  Connection* formed = link(side).connection;
  return formed != nullptr ? formed : formation_.connection(side);
}

// ---- moving chunks -----------------------------------------------------------------------------

void TcpRing::send(Side to, ConstTypedSpan data, ChunkTag tag) {
  throw_if_failed();
  op_ = tag.op;
  RingLink& l = link(to);
  l.queue.push_back(RingLink::Outgoing{data, tag, RingLink::Kind::kChunk});
  // Start at once: the kernel takes what fits while the caller goes on with its next chunk.
  pump_sends(to);
}

void TcpRing::recv(Side from, TypedSpan into, ChunkTag tag) {
  throw_if_failed();
  op_ = tag.op;
  progress(Want::kChunk, from, into, tag);
}

void TcpRing::wait_sent() {
  throw_if_failed();
  progress(Want::kSent, Side::kLeft, {}, {});
}

std::string TcpRing::lost_message(int peer, std::string_view what) const {
  return fmt::format("lost {}: {} (seen by {})", rank_name(peer), what, rank_name(rank()));
}

void TcpRing::progress(Want want, Side from, TypedSpan into, ChunkTag tag) {
  constexpr Side kSides[] = {Side::kLeft, Side::kRight};
  const auto timeout = std::chrono::milliseconds(options_.timeout_ms);
  // A rank that waits must not look stalled to its neighbours (collective/ring_stall.h).
  const auto keepalive_every =
      stall_.enabled() ? std::min(timeout / 4, stall_.keepalive_every()) : timeout / 4;
  const auto spin = std::chrono::microseconds(options_.spin_us);
  const bool reading = want == Want::kChunk;
  auto now = SteadyClock::now();
  auto last_in = now;                                // a byte came from `from` (keepalives count)
  SteadyClock::time_point last_out[2] = {now, now};  // per side: a byte went out, or none waited
  auto last_progress = now;                          // any of them
  auto last_keepalive = now;                         // sent, or this wait began
  // Per side: when a frame or a byte last came from that neighbour in this wait (or it began),
  // and how many frames had come then.
  SteadyClock::time_point heard[2] = {now, now};
  uint64_t frames[2] = {link(Side::kLeft).frames_in, link(Side::kRight).frames_in};
  stall_.begin(now, op_, note_);
  for (;;) {
    if (options_.interrupt != nullptr && options_.interrupt->raised() > options_.view)
      interrupted();
    bool sent[2] = {pump_sends(Side::kLeft), pump_sends(Side::kRight)};
    // A neighbour that read our chunks (by reference) has taken them as surely as a socket that
    // accepted them.
    bool settled[2];
    for (const Side side : kSides) {
      const uint64_t acknowledged = connection(side).payloads_acknowledged();
      settled[static_cast<int>(side)] = this->settled(side);
      if (connection(side).payloads_acknowledged() != acknowledged) {
        sent[static_cast<int>(side)] = true;
      }
      if (!settled[static_cast<int>(side)] && !link(side).closed.empty()) {
        fail_lost(side, link(side).closed);
      }
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
      done = settled[0] && settled[1];
    }
    if (done) {
      if (stall_.reported()) stall_.end(SteadyClock::now());
      return;
    }

    now = SteadyClock::now();
    for (const Side side : kSides) {
      const int i = static_cast<int>(side);
      if (link(side).frames_in != frames[i]) {
        frames[i] = link(side).frames_in;
        heard[i] = now;
      }
    }
    if (reading && last_in > heard[static_cast<int>(from)]) heard[static_cast<int>(from)] = last_in;
    if (now >= stall_.next_report()) {
      report_stall(now, reading ? &from : nullptr, settled, heard, tag);
    }
    for (const Side side : kSides) {
      if (sent[static_cast<int>(side)] || settled[static_cast<int>(side)]) {
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
    auto until = std::min(last_keepalive + keepalive_every, stall_.next_report());
    if (reading) until = std::min(until, last_in + timeout);
    for (const Side side : kSides) {
      if (!settled[static_cast<int>(side)]) {
        until = std::min(until, last_out[static_cast<int>(side)] + timeout);
      }
    }
    wait_for_io(reading ? &from : nullptr, until);
  }
}

bool TcpRing::pump_sends(Side side) {
  RingLink& l = link(side);
  if (l.idle()) return false;
  Connection& to = connection(side);
  const uint64_t before = to.bytes_moved();
  try {
    while (!l.idle()) {
      if (!l.head_started) {
        const RingLink::Outgoing& item = l.queue[l.head];
        l.send_meta.clear();
        if (item.kind == RingLink::Kind::kKeepalive) {
          to.start_send(proto::kRingKeepalive, 0, {}, {});
        } else if (item.kind == RingLink::Kind::kStall) {
          stall_.notice().write(l.send_meta);  // the newest: what was learnt while it queued
          l.stall_queued = false;
          to.start_send(proto::kRingStall, 0, l.send_meta.bytes(), {});
        } else {
          l.send_meta.put(item.tag.op).put(item.tag.step).put(item.tag.chunk);
          l.send_meta.put(static_cast<uint8_t>(item.data.type()))
              .put(static_cast<uint8_t>(Codec::kNone));
          const std::span<const float> tensors[] = {as_words(item.data.bytes())};
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
    fail_link(side, error);
  }
  if (l.idle()) {
    l.queue.clear();  // keeps its capacity: no allocation once the largest collective has run
    l.head = 0;
  }
  return to.bytes_moved() != before;
}

bool TcpRing::settled(Side side) {
  try {
    return link(side).settled();
  } catch (const TransportError& error) {
    fail_link(side, error);
  }
}

void TcpRing::fail_link(Side side, const TransportError& error) {
  // A neighbour that sent nonsense is alive and waiting on us, as after a malformed frame: it must
  // hear the abort too (if its connection still takes one), or it would wait out its timeout
  // before it learnt why.
  if (dynamic_cast<const FrameError*>(&error) != nullptr) {
    fail(fmt::format("{} (seen by {})", error.what(), rank_name(rank())), std::nullopt);
  }
  fail_lost(side, error.what());
}

bool TcpRing::read_header(Side side) {
  RingLink& l = link(side);
  Connection& conn = connection(side);
  if (!l.closed.empty()) return l.header_in;
  try {
    while (!l.header_in) {
      const std::optional<Connection::Incoming> in = conn.try_receive();
      if (!in) return false;
      ++l.frames_in;
      if (in->type == proto::kRingKeepalive) continue;
      if (in->type == proto::kRingStall) {
        take_stall_notice(in->meta);
        continue;
      }
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
        l.incoming_type = reader.get<uint8_t>();
        l.incoming_codec = reader.get<uint8_t>();
      } catch (const ShortMeta&) {
        fail(fmt::format("{} sent a malformed chunk header", conn.peer()), std::nullopt);
      }
      l.incoming_bytes = in->tensor_bytes;
      l.header_in = true;
    }
  } catch (const CollectiveError&) {
    throw;
  } catch (const FrameError& error) {
    fail_link(side, error);
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

void TcpRing::fail_mismatch(Side from, ChunkTag got, uint64_t got_bytes, ChunkTag tag,
                            uint64_t bytes) {
  fail(fmt::format("{} sent {} ({} bytes) where {} expected {} ({} bytes): the ranks are not "
                   "running the same collectives; check that every worker was started with the "
                   "same flags",
                   connection(from).peer(), to_string(got), got_bytes, rank_name(rank()),
                   to_string(tag), bytes),
       std::nullopt);
}

void TcpRing::fail_encoding(Side from, ChunkTag tag, TypedSpan into) {
  const RingLink& l = link(from);
  const std::string expected = to_string(into.type());
  const std::string got =
      l.incoming_codec != static_cast<uint8_t>(Codec::kNone)
          ? fmt::format("encoded by codec {}, which this build does not know", l.incoming_codec)
          : "as " + describe_element_type(l.incoming_type);
  fail(fmt::format("{} sent {} {} where {} expected {}: the ranks do not encode their gradients "
                   "alike; check that every worker runs the same dtrain build and flags",
                   connection(from).peer(), to_string(tag), got, rank_name(rank()), expected),
       std::nullopt);
}

bool TcpRing::pump_receive(Side from, TypedSpan into, ChunkTag tag) {
  RingLink& l = link(from);
  if (!read_header(from)) {
    if (!l.closed.empty()) fail_lost(from, l.closed);
    return false;
  }
  if (!(l.incoming_tag == tag)) {
    fail_mismatch(from, l.incoming_tag, l.incoming_bytes, tag, into.size_bytes());
  }
  // The type before the length: a chunk of another type has another length too, and its type is
  // the news.
  if (l.incoming_type != static_cast<uint8_t>(into.type()) ||
      l.incoming_codec != static_cast<uint8_t>(Codec::kNone)) {
    fail_encoding(from, tag, into);
  }
  if (l.incoming_bytes != into.size_bytes()) {
    fail_mismatch(from, l.incoming_tag, l.incoming_bytes, tag, into.size_bytes());
  }
  try {
    if (!connection(from).try_receive_tensors(as_words(into.bytes()))) return false;
  } catch (const TransportError& error) {
    fail_link(from, error);
  }
  l.header_in = false;
  return true;
}

void TcpRing::wait_for_io(const Side* reading, SteadyClock::time_point until) {
  // A neighbour that posts to a mailbox wakes this rank only if it knows it sleeps; then looking
  // once more closes the window in which it posted without knowing.
  struct Sleeping {
    Connection* connections[2];
    bool news = false;
    explicit Sleeping(TcpRing& ring)
        : connections{&ring.connection(Side::kLeft), &ring.connection(Side::kRight)} {
      for (Connection* c : connections) news = !c->begin_wait() || news;
    }
    ~Sleeping() {
      for (Connection* c : connections) c->end_wait();
    }
  } sleeping(*this);
  if (sleeping.news) return;
  const auto left_ms =
      std::chrono::ceil<std::chrono::milliseconds>(until - SteadyClock::now()).count();
  const int timeout_ms = static_cast<int>(std::clamp<int64_t>(left_ms, 1, 1000));
  Waitable waits[3];
  size_t count = 0;
  for (const Side side : {Side::kLeft, Side::kRight}) {
    // A link holding a chunk for a later step stays readable until that step: watching it would
    // turn this sleep into a spin.
    const bool read = link(side).closed.empty() &&
                      ((reading != nullptr && *reading == side) || !link(side).header_in);
    const bool write = !link(side).idle();
    if (read || write) waits[count++] = connection(side).waitable(read, write);
  }
  if (options_.interrupt != nullptr)
    waits[count++] = {.fd = options_.interrupt->fd(), .read = true};
  wait_any(std::span(waits, count), timeout_ms);
  // Frames from a neighbour we are not reading from are keepalives or an abort, or a chunk
  // arriving early; read their openings now so that an abort is acted on at once. The one we read
  // from is read by progress(), where what it brings counts against the timeouts.
  for (const Side side : {Side::kLeft, Side::kRight}) {
    if (reading == nullptr || *reading != side) read_header(side);
  }
}

// ---- stalls
// --------------------------------------------------------------------------------------

void TcpRing::report_stall(SteadyClock::time_point now, const Side* from, const bool settled[2],
                           const SteadyClock::time_point heard[2], ChunkTag tag) {
  Side side = Side::kLeft;
  std::string what;
  if (from != nullptr) {
    side = *from;
    what = fmt::format("chunk {} of its step {}", tag.chunk, tag.step);
  } else {
    side = settled[static_cast<int>(Side::kLeft)] ? Side::kRight : Side::kLeft;
    what = "to take this rank's chunks";
  }
  const auto quiet =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - heard[static_cast<int>(side)]);
  if (stall_.report(now, rank_on(side), quiet, what)) send_stall_notices();
}

void TcpRing::take_stall_notice(std::span<const std::byte> meta) {
  // A notice that makes no sense is dropped: it is advice, and the chunks are checked anyway.
  const std::optional<StallNotice> notice = StallNotice::read(meta, size());
  if (notice && stall_.take(*notice)) send_stall_notices();
}

void TcpRing::send_stall_notices() {
  for (const Side side : {Side::kLeft, Side::kRight}) {
    RingLink& l = link(side);
    if (rank_on(side) == stall_.notice().culprit || l.stall_queued || !l.closed.empty()) continue;
    l.queue.push_back(RingLink::Outgoing{{}, {}, RingLink::Kind::kStall});
    l.stall_queued = true;
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

// The membership moved on: the neighbours are re-forming too (or gone), so nobody is told and
// nothing is drained; the ring is over for this rank.
void TcpRing::interrupted() {
  if (!failure_) failure_ = std::make_exception_ptr(CollectiveError(options_.interrupt->why()));
  std::rethrow_exception(failure_);
}

void TcpRing::throw_if_failed() const {
  if (failure_) std::rethrow_exception(failure_);
}

}  // namespace dtrain
