// Frames whose tensors go by reference: records and trailers, their order, the copy out of the
// peer's memory, acknowledgements and wake-ups, over a Connection's frame I/O.
#include "comm/memory_link.h"

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "base/error.h"
#include "comm/connection.h"
#include "comm/frame_format.h"
#include "comm/peer_memory.h"

namespace dtrain {

namespace ff = frame_format;

namespace {

constexpr size_t kRefBytes = 16;              // address u64, bytes u64
constexpr size_t kTrailerFixedBytes = 4 + 8;  // tensor count u32, records_before u64
constexpr size_t kMetaWord = 5;               // the record's first word of meta
// Flags in a record's first word, above its type and meta length.
constexpr uint64_t kLanded = uint64_t{1} << 32;   // its tensor was written into a landing
constexpr uint64_t kLanding = uint64_t{1} << 33;  // not a frame: a landing offered
constexpr uint64_t kMaxRefs = uint64_t{1} << 20;  // far beyond any frame's tensors
// A blocking call polls for this long before it sleeps: a peer on this host answers within it.
constexpr auto kSpin = std::chrono::microseconds(50);
// A sleeper looks again after this long whatever happens: a wake frame read by the connection's
// other thread (both may wait on the one socket) only delays it by this much.
constexpr int kSliceMs = 10;

}  // namespace

MemoryLink::MemoryLink(int32_t peer_pid, std::unique_ptr<SharedMailbox> mailbox, std::string peer)
    : peer_pid_(peer_pid), mailbox_(std::move(mailbox)), peer_(std::move(peer)) {}

void MemoryLink::insane(const std::string& what) const {
  throw FrameError(fmt::format("bad frame from {}: {}", peer_, what));
}

// ---- sending ----

MemoryLink::Outgoing MemoryLink::prepare(uint16_t type, uint64_t request_id,
                                         std::span<const std::byte> meta,
                                         std::span<const std::span<const float>> tensors) {
  if (tensors.size() == 1 && meta.size() <= kRecordMetaBytes) {
    record_ = {};
    record_.words[0] = type | static_cast<uint64_t>(meta.size()) << 16;
    record_.words[1] = request_id;
    record_.words[2] = frames_sent_;
    record_.words[3] = reinterpret_cast<uint64_t>(tensors[0].data());
    record_.words[4] = tensors[0].size_bytes();
    if (!meta.empty()) std::memcpy(&record_.words[kMetaWord], meta.data(), meta.size());
    record_needs_ack_ = true;
    if (const auto landing = use_landing(tensors[0].size_bytes())) {
      write_to_landing(*landing, tensors[0]);
      record_.words[0] |= kLanded;
      record_.words[3] = landing->address;
      record_needs_ack_ = false;
    }
    return {.as_record = true, .meta = {}};
  }
  send_meta_.assign(meta.begin(), meta.end());
  const auto put = [&](auto value) {
    const size_t at = send_meta_.size();
    send_meta_.resize(at + sizeof(value));
    ff::store_le(std::span(send_meta_).subspan(at), value);
  };
  for (const auto tensor : tensors) {
    put(reinterpret_cast<uint64_t>(tensor.data()));
    put(static_cast<uint64_t>(tensor.size_bytes()));
  }
  put(static_cast<uint32_t>(tensors.size()));
  put(records_posted_);
  ++frames_sent_;
  if (!tensors.empty()) ++by_reference_sent_;
  return {.as_record = false, .meta = send_meta_};
}

bool MemoryLink::try_post() {
  if (!mailbox_->try_post(record_)) return false;
  ++records_posted_;
  if (record_needs_ack_) ++by_reference_sent_;
  return true;
}

std::optional<MemoryLink::Ref> MemoryLink::use_landing(uint64_t bytes) {
  std::lock_guard lock(landings_mutex_);
  if (landings_.empty() || landings_.front().bytes != bytes) return std::nullopt;
  const Ref landing = landings_.front();
  landings_.pop_front();
  return landing;
}

void MemoryLink::write_to_landing(const Ref& landing, std::span<const float> tensor) {
  try {
    write_peer_memory(peer_pid_, landing.address, std::as_bytes(tensor), peer_);
  } catch (const PeerProcessGone&) {
    throw PeerProcessGone(fmt::format("{} closed the connection", peer_));
  } catch (const TransportError& error) {
    insane(fmt::format("it offered a landing at {:#x} of {} bytes outside its memory ({})",
                       landing.address, landing.bytes, error.what()));
  }
}

void MemoryLink::offer_landing(Connection& c, std::span<float> into) {
  if (into.empty()) return;
  {
    std::lock_guard lock(landings_mutex_);
    offered_.push_back({reinterpret_cast<uint64_t>(into.data()), into.size_bytes()});
  }
  std::unique_lock lock(c.write_mutex_);
  record_ = {};
  record_.words[0] = kLanding;
  record_.words[2] = frames_sent_;
  record_.words[3] = reinterpret_cast<uint64_t>(into.data());
  record_.words[4] = into.size_bytes();
  record_needs_ack_ = false;
  const auto began = std::chrono::steady_clock::now();
  const auto until = began + std::chrono::milliseconds(c.options_.io_timeout_ms);
  while (!try_post()) {
    wait(c, began, c.options_.io_timeout_ms < 0 ? std::nullopt : std::optional(until),
         "took no mailbox record", SharedMailbox::kForAcks);
  }
}

bool MemoryLink::sends_settled() {
  if (acknowledged_ < by_reference_sent_)
    acknowledged_ = mailbox_->acknowledged(by_reference_sent_);
  return acknowledged_ == by_reference_sent_;
}

void MemoryLink::send(Connection& c, uint16_t type, uint64_t request_id,
                      std::span<const std::byte> meta,
                      std::span<const std::span<const float>> tensors) {
  post(c, type, request_id, meta, tensors);
  if (!tensors.empty()) settle(c);
}

void MemoryLink::post(Connection& c, uint16_t type, uint64_t request_id,
                      std::span<const std::byte> meta,
                      std::span<const std::span<const float>> tensors) {
  {
    std::unique_lock lock(c.write_mutex_);
    const Outgoing out = prepare(type, request_id, meta, tensors);
    if (out.as_record) {
      // A full mailbox empties as the peer reads, without telling: look again now and then.
      const auto began = std::chrono::steady_clock::now();
      const auto until = began + std::chrono::milliseconds(c.options_.io_timeout_ms);
      while (!try_post()) {
        wait(c, began, c.options_.io_timeout_ms < 0 ? std::nullopt : std::optional(until),
             "took no mailbox record", SharedMailbox::kForAcks);
      }
      write_wake(c, SharedMailbox::kForRecords);
    } else {
      // The frame itself wakes a peer asleep on its socket. A wake frame after it would only be
      // left unread by a peer that has what it waited for and closes: its kernel then resets
      // the connection, which this side would take for a failure.
      c.wake_pending_ = false;
      c.writer_.write(type, request_id, out.meta, {}, c.io_deadline());
      write_wake(c, /*reason=*/0);  // one asked for while the frame was going out
    }
  }
}

void MemoryLink::settle(Connection& c) {
  if (sends_settled()) return;
  const auto began = std::chrono::steady_clock::now();
  const auto until = began + std::chrono::milliseconds(c.options_.io_timeout_ms);
  while (!sends_settled()) {
    c.check_state(Connection::State::kOpen, "send");  // the receiver may have found it closed
    wait(c, began, c.options_.io_timeout_ms < 0 ? std::nullopt : std::optional(until),
         "copied no tensor it was sent", SharedMailbox::kForAcks);
  }
}

void MemoryLink::start_send(Connection& c, uint16_t type, uint64_t request_id,
                            std::span<const std::byte> meta,
                            std::span<const std::span<const float>> tensors) {
  const Outgoing out = prepare(type, request_id, meta, tensors);
  if (out.as_record) {
    post_pending_ = true;
  } else {
    c.wake_pending_ = false;  // the frame itself wakes a peer asleep on its socket (see post)
    c.writer_.start(type, request_id, out.meta, {});
  }
}

bool MemoryLink::continue_send(Connection& c) {
  if (post_pending_) {
    if (!try_post()) return false;
    post_pending_ = false;
    c.bytes_moved_ += sizeof(SharedMailbox::Record);
    wake_peer(c, SharedMailbox::kForRecords);
    return true;
  }
  if (!c.writer_.busy()) return true;
  if (!c.pump_send()) return false;
  wake_peer(c, /*reason=*/0);  // one asked for while the frame was going out
  return true;
}

// ---- waking and waiting ----

void MemoryLink::wake_peer(Connection& c, unsigned reason) {
  if (!mailbox_->peer_sleeping(reason) && !c.wake_pending_.load()) return;
  c.wake_pending_ = true;
  std::unique_lock lock(c.write_mutex_, std::try_to_lock);
  if (lock.owns_lock() && !c.writer_.busy()) write_wake(c, reason);
}

void MemoryLink::write_wake(Connection& c, unsigned reason) {
  if (!mailbox_->peer_sleeping(reason) && !c.wake_pending_.load()) return;
  c.wake_pending_ = false;
  // Empty and tiny: the kernel takes it at once unless the peer has stopped reading altogether.
  c.writer_.write(ff::kTypeWake, 0, {}, {}, c.io_deadline());
}

bool MemoryLink::begin_wait(unsigned reasons) {
  {
    std::lock_guard lock(sleep_mutex_);
    for (unsigned k = 0; k < 2; ++k)
      if (reasons & (1u << k)) ++sleepers_[k];
    mailbox_->set_sleeping((sleepers_[0] > 0 ? SharedMailbox::kForRecords : 0) |
                           (sleepers_[1] > 0 ? SharedMailbox::kForAcks : 0));
  }
  // A record taken ahead waits for a socket frame, which wakes the sleeper by itself.
  return !mailbox_->has_news(reasons) && !(stashed_ && (reasons & SharedMailbox::kForRecords));
}

void MemoryLink::end_wait(unsigned reasons) {
  std::lock_guard lock(sleep_mutex_);
  for (unsigned k = 0; k < 2; ++k)
    if (reasons & (1u << k)) --sleepers_[k];
  mailbox_->set_sleeping((sleepers_[0] > 0 ? SharedMailbox::kForRecords : 0) |
                         (sleepers_[1] > 0 ? SharedMailbox::kForAcks : 0));
}

void MemoryLink::wait(Connection& c, std::chrono::steady_clock::time_point began,
                      std::optional<std::chrono::steady_clock::time_point> until, const char* what,
                      unsigned reasons) {
  const auto now = std::chrono::steady_clock::now();
  if (now - began < kSpin) {
    std::this_thread::yield();
    return;
  }
  if (until && now >= *until) {
    throw TransportError(fmt::format("timed out: {} {} within {} s", c.peer(), what,
                                     std::chrono::duration<double>(*until - began).count()));
  }
  if (kill(peer_pid_, 0) != 0 && errno == ESRCH) {
    throw PeerProcessGone(fmt::format("{} closed the connection", c.peer()));
  }
  if (begin_wait(reasons)) {
    wait_for(c.waitable(true, false), kSliceMs);
  }
  end_wait(reasons);
}

// ---- receiving ----

std::optional<IncomingFrame> MemoryLink::take_record() {
  for (;;) {
    if (!lookahead_) {
      SharedMailbox::Record record;
      if (!mailbox_->try_take(record)) return std::nullopt;
      lookahead_ = record;
    }
    const SharedMailbox::Record& record = *lookahead_;
    const uint64_t frames_before = record.words[2];
    if (frames_before > frames_delivered_) return std::nullopt;  // a socket frame comes first
    if (frames_before < frames_delivered_) {
      insane(fmt::format("its mailbox record {} says {} frames came before it, but {} did",
                         records_taken_, frames_before, frames_delivered_));
    }
    if ((record.words[0] & kLanding) == 0) return take_frame_record();
    // A landing for one of our later frames: kept for the sending side.
    const Ref landing{record.words[3], record.words[4]};
    if (landing.bytes == 0 || landing.address > UINT64_MAX - landing.bytes) {
      insane(fmt::format("its mailbox record {} offers a landing at {:#x} of {} bytes",
                         records_taken_, landing.address, landing.bytes));
    }
    {
      std::lock_guard lock(landings_mutex_);
      if (landings_.size() >= kMaxLandings) {
        insane(fmt::format("it offered more than {} landings unused", kMaxLandings));
      }
      landings_.push_back(landing);
    }
    lookahead_.reset();
    ++records_taken_;
  }
}

IncomingFrame MemoryLink::take_frame_record() {
  const SharedMailbox::Record& record = *lookahead_;
  if ((record.words[0] >> 32 & ~uint64_t{1}) != 0) {
    insane(fmt::format("its mailbox record {} has unknown flags {:#x}", records_taken_,
                       record.words[0] >> 32));
  }
  const size_t meta_len = (record.words[0] >> 16) & 0xffff;
  if (meta_len > kRecordMetaBytes) {
    insane(fmt::format("its mailbox record {} has a {}-byte meta block", records_taken_, meta_len));
  }
  record_meta_.resize(meta_len);
  if (meta_len > 0) std::memcpy(record_meta_.data(), &record.words[kMetaWord], meta_len);
  refs_.assign(1, Ref{record.words[3], record.words[4]});
  landed_ = (record.words[0] & kLanded) != 0;
  if (landed_) {
    // Written straight into the place we offered for it, the oldest still offered.
    std::lock_guard lock(landings_mutex_);
    if (offered_.empty() || offered_.front().address != record.words[3] ||
        offered_.front().bytes != record.words[4]) {
      insane(
          fmt::format("its mailbox record {} says it wrote {} bytes at {:#x}, which is not "
                      "the landing offered next",
                      records_taken_, record.words[4], record.words[3]));
    }
    offered_.pop_front();
  }
  const IncomingFrame frame{.type = static_cast<uint16_t>(record.words[0]),
                            .request_id = record.words[1],
                            .meta = record_meta_,
                            .tensor_bytes = record.words[4]};
  lookahead_.reset();
  ++records_taken_;
  if (frame.type < ff::kFirstUserType) {
    insane(fmt::format("its mailbox record {} has the reserved type {}", records_taken_ - 1,
                       frame.type));
  }
  return frame;
}

IncomingFrame MemoryLink::accept_frame(const IncomingFrame& wire) {
  const std::span<const std::byte> meta = wire.meta;
  if (wire.tensor_bytes > 0) {
    insane(fmt::format("frame type {} carries tensor bytes on a by-reference link", wire.type));
  }
  if (meta.size() < kTrailerFixedBytes) {
    insane(fmt::format("frame type {} has no by-reference trailer", wire.type));
  }
  const size_t fixed_at = meta.size() - kTrailerFixedBytes;
  const uint64_t count = ff::load_le<uint32_t>(meta.subspan(fixed_at));
  const uint64_t records_before = ff::load_le<uint64_t>(meta.subspan(fixed_at + 4));
  if (count > kMaxRefs || count * kRefBytes > fixed_at) {
    insane(fmt::format("frame type {} names {} tensors in a {}-byte meta block", wire.type, count,
                       meta.size()));
  }
  if (records_before < records_taken_ || records_before > records_taken_ + SharedMailbox::kSlots) {
    insane(fmt::format("frame type {} says {} mailbox records came before it, but {} did",
                       wire.type, records_before, records_taken_));
  }
  const size_t refs_at = fixed_at - count * kRefBytes;
  frame_refs_.clear();
  uint64_t tensor_bytes = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const auto ref = meta.subspan(refs_at + i * kRefBytes);
    frame_refs_.push_back({ff::load_le<uint64_t>(ref), ff::load_le<uint64_t>(ref.subspan(8))});
    if (frame_refs_.back().bytes > UINT64_MAX - tensor_bytes) insane("its tensor sizes overflow");
    tensor_bytes += frame_refs_.back().bytes;
  }
  frame_records_before_ = records_before;
  frame_tensor_bytes_ = tensor_bytes;
  return {.type = wire.type,
          .request_id = wire.request_id,
          .meta = meta.first(refs_at),
          .tensor_bytes = tensor_bytes};
}

void MemoryLink::frame_delivered() {
  ++frames_delivered_;
  refs_.swap(frame_refs_);
  landed_ = false;
}

IncomingFrame MemoryLink::deliver(Connection& c, const IncomingFrame& frame) {
  c.received(frame);
  c.check_tensors_allowed();
  c.bytes_moved_ += sizeof(SharedMailbox::Record);
  // Empty tensors are never read, so they are acknowledged at once. (Only "all acknowledged" is
  // ever asked of the count, so this may overtake an earlier frame's.)
  if (frame.tensor_bytes == 0 && !refs_.empty() && !landed_) acknowledge(c);
  return frame;
}

IncomingFrame MemoryLink::deliver_stashed(Connection& c) {
  if (!in_order()) {
    // Its records were posted before it was written, so they are in the mailbox by now: frames
    // come first, and landings are kept until it is in order.
    if (const auto record = take_record()) return deliver(c, *record);
  }
  if (!in_order()) insane("a frame came before the mailbox records it says were sent before it");
  const IncomingFrame frame = *std::exchange(stashed_, std::nullopt);
  frame_delivered();
  return deliver(c, frame);
}

std::optional<IncomingFrame> MemoryLink::try_receive(Connection& c) {
  if (stashed_) return deliver_stashed(c);
  if (const auto record = take_record()) return deliver(c, *record);
  for (;;) {
    const std::optional<IncomingFrame> wire =
        c.try_receive_frame(c.options_.max_payload_bytes, /*handshake=*/false);
    if (!wire) return std::nullopt;
    if (wire->type == ff::kTypeWake) continue;
    if (wire->type < ff::kFirstUserType) {
      insane(fmt::format("link frame type {} on a by-reference link", wire->type));
    }
    stashed_ = accept_frame(*wire);
    return deliver_stashed(c);
  }
}

IncomingFrame MemoryLink::receive(Connection& c) {
  const int idle_ms = c.options_.idle_timeout_ms;
  const auto began = std::chrono::steady_clock::now();
  const auto until = began + std::chrono::milliseconds(idle_ms);
  for (;;) {
    if (const auto frame = try_receive(c)) return *frame;
    wait(c, began, idle_ms < 0 ? std::nullopt : std::optional(until), "sent nothing",
         SharedMailbox::kForRecords);
  }
}

void MemoryLink::receive_tensors(Connection& c, std::span<const std::span<float>> into) {
  if (c.tensor_bytes_ == 0) return;  // acknowledged when it was delivered
  if (landed_) {
    // Already here; read elsewhere, it is copied from where it landed.
    const auto* landed = reinterpret_cast<const std::byte*>(refs_.front().address);
    for (const auto tensor : into) {
      if (static_cast<const void*>(tensor.data()) != landed && !tensor.empty())
        std::memmove(tensor.data(), landed, tensor.size_bytes());
      landed += tensor.size_bytes();
    }
    c.bytes_moved_ += c.tensor_bytes_;
    refs_.clear();
    return;
  }
  try {
    read_tensors(into);
  } catch (const PeerProcessGone&) {
    // Its connection is closing too: the loss reads as it would over TCP.
    throw PeerProcessGone(fmt::format("{} closed the connection", c.peer()));
  }
  c.bytes_moved_ += c.tensor_bytes_;
  acknowledge(c);
}

void MemoryLink::discard_tensors(Connection& c) {
  if (landed_) {
    refs_.clear();
  } else if (c.tensor_bytes_ > 0) {
    acknowledge(c);
  }
}

void MemoryLink::read_tensors(std::span<const std::span<float>> into) {
  size_t ref = 0;
  uint64_t ref_done = 0;
  for (const auto tensor : into) {
    std::span<std::byte> bytes = std::as_writable_bytes(tensor);
    while (!bytes.empty()) {
      while (ref < refs_.size() && ref_done == refs_[ref].bytes) {
        ++ref;
        ref_done = 0;
      }
      const Ref& r = refs_.at(ref);  // the sizes add up: Connection checked them
      if (r.address > UINT64_MAX - r.bytes) {
        insane(fmt::format("a tensor reference at {:#x} of {} bytes wraps around", r.address,
                           r.bytes));
      }
      const uint64_t n = std::min<uint64_t>(bytes.size(), r.bytes - ref_done);
      try {
        read_peer_memory(peer_pid_, r.address + ref_done, bytes.first(n), peer_);
      } catch (const PeerProcessGone&) {
        throw;
      } catch (const TransportError& error) {
        insane(fmt::format("a tensor reference at {:#x} of {} bytes is not in its memory ({})",
                           r.address, r.bytes, error.what()));
      }
      ref_done += n;
      bytes = bytes.subspan(n);
    }
  }
}

void MemoryLink::acknowledge(Connection& c) {
  refs_.clear();
  mailbox_->acknowledge();
  wake_peer(c, SharedMailbox::kForAcks);
}

}  // namespace dtrain
