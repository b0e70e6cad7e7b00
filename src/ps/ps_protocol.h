// The messages between workers and parameter-server tasks: frame types (comm/frame_format.h,
// user types from 16) and their meta blocks. Every request is answered in order on its own
// connection; tensors ride after the meta, one frame per shard, so a large model streams through
// the ps shard by shard: the ps applies shard i and returns it while shard i+1 is still arriving.
//
//   request                          meta                                   tensors     reply
//   kHello                           fingerprint u64, worker i32            -           kHelloReply
//   kInit (chief)                    shard u32, step i64, slots u32         values,     kAck
//                                                                           slots...
//   kWaitReady                       timeout_ms u32                         -           kReady
//   kPull                            -                                      -           kValues per
//   shard held kPush                            PushMeta                               gradient
//   kPushReply kPullState (chief, checkpoints)  -                                      - kState per
//   shard held kWorkerDone                      worker i32, finished u8                - kDoneReply
//
// Any request may instead be answered by kError, whose meta is the message: the worker reports it
// and stops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "comm/frame_format.h"

namespace dtrain::ps_protocol {

inline constexpr uint16_t kHello = 16;
inline constexpr uint16_t kHelloReply = 17;
inline constexpr uint16_t kInit = 18;
inline constexpr uint16_t kAck = 19;
inline constexpr uint16_t kWaitReady = 20;
inline constexpr uint16_t kReady = 21;
inline constexpr uint16_t kPull = 22;
inline constexpr uint16_t kValues = 23;
inline constexpr uint16_t kPush = 24;
inline constexpr uint16_t kPushReply = 25;
inline constexpr uint16_t kPullState = 26;
inline constexpr uint16_t kState = 27;
inline constexpr uint16_t kWorkerDone = 28;
inline constexpr uint16_t kDoneReply = 29;
inline constexpr uint16_t kError = 30;

// Thrown by MetaReader when a meta block is shorter than its type's layout; the connection layer
// turns it into a FrameError naming the peer.
struct ShortMeta : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The unsigned integer with T's bytes: how a field of type T travels.
template <typename T>
using BitsOf =
    std::conditional_t<sizeof(T) == 1, uint8_t,
                       std::conditional_t<sizeof(T) == 2, uint16_t,
                                          std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;

// Appends little-endian fields to a meta block.
class MetaWriter {
 public:
  template <typename T>
  MetaWriter& put(T value) {
    BitsOf<T> bits;
    std::memcpy(&bits, &value, sizeof(T));
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    frame_format::store_le(std::span(bytes_).subspan(at), bits);
    return *this;
  }
  MetaWriter& put_string(std::string_view text) {
    const auto* begin = reinterpret_cast<const std::byte*>(text.data());
    bytes_.insert(bytes_.end(), begin, begin + text.size());
    return *this;
  }
  std::span<const std::byte> bytes() const { return bytes_; }
  void clear() { bytes_.clear(); }

 private:
  std::vector<std::byte> bytes_;
};

// Reads the fields MetaWriter wrote, in the same order.
class MetaReader {
 public:
  explicit MetaReader(std::span<const std::byte> meta) : meta_(meta) {}

  template <typename T>
  T get() {
    using U = BitsOf<T>;
    if (meta_.size() < sizeof(T)) throw ShortMeta("meta block too short for its frame type");
    const U bits = frame_format::load_le<U>(meta_.first(sizeof(T)));
    meta_ = meta_.subspan(sizeof(T));
    T value;
    std::memcpy(&value, &bits, sizeof(T));
    return value;
  }
  std::string rest_as_string() {
    std::string text(reinterpret_cast<const char*>(meta_.data()), meta_.size());
    meta_ = {};
    return text;
  }

 private:
  std::span<const std::byte> meta_;
};

// kPush: one shard's gradient.
struct PushMeta {
  uint32_t shard = 0;
  int32_t worker = 0;
  uint64_t sequence = 0;
  int64_t computed_at_step = 0;  // sync: the shard's step when its values were pulled
  float lr = 0;
  uint8_t want_values = 0;  // reply with the shard's values after the push (push-pull)
};

inline void write(MetaWriter& w, const PushMeta& m) {
  w.put(m.shard).put(m.worker).put(m.sequence).put(m.computed_at_step).put(m.lr).put(m.want_values);
}
inline PushMeta read_push(MetaReader& r) {
  PushMeta m;
  m.shard = r.get<uint32_t>();
  m.worker = r.get<int32_t>();
  m.sequence = r.get<uint64_t>();
  m.computed_at_step = r.get<int64_t>();
  m.lr = r.get<float>();
  m.want_values = r.get<uint8_t>();
  return m;
}

// kPushReply and kValues: a shard's step after the request, and whether training is over.
struct ShardReply {
  uint32_t shard = 0;
  uint8_t outcome = 0;  // kPushReply: PushResult::Outcome
  int64_t step = 0;
  uint8_t finished = 0;
};

inline void write(MetaWriter& w, const ShardReply& m) {
  w.put(m.shard).put(m.outcome).put(m.step).put(m.finished);
}
inline ShardReply read_shard_reply(MetaReader& r) {
  ShardReply m;
  m.shard = r.get<uint32_t>();
  m.outcome = r.get<uint8_t>();
  m.step = r.get<int64_t>();
  m.finished = r.get<uint8_t>();
  return m;
}

// kDoneReply: what the ps did over the whole run, summed over its shards.
struct DoneReply {
  int64_t step = 0;  // the step of its first shard
  int64_t applied = 0;
  int64_t stale_dropped = 0;
  int64_t duplicates = 0;
};

}  // namespace dtrain::ps_protocol
