// The messages between workers and parameter-server tasks: frame types (comm/frame_format.h,
// user types from 16) and their meta blocks. Every request is answered in order on its own
// connection; tensors ride after the meta, one frame per shard, so a large model streams through
// the ps shard by shard: the ps applies shard i and returns it while shard i+1 is still arriving.
//
// clang-format off
//   request                          meta                                tensors         reply
//   kSettings                        timeout_ms u32, then JSON (text)    -               kSettingsReply
//     (said before kHello: what the job trains, ps/job_settings.h; a ps started without them takes
//      them from the chief's and refuses any other worker's that differ, kError naming the setting;
//      kSettingsReply: agreed u8, 0 when the ps has not heard the chief yet after waiting up to
//      timeout_ms (at most kMaxReadyWaitMs): ask again)
//   kHello                           fingerprint u64, worker i32         -               kHelloReply
//     (worker -1: a client that never pushes; else the worker its handshake's identity names)
//     (kHelloReply: ps i32, initialized u8, next_sequence u64, step i64 of its first shard,
//      instance u64, restored_step i64)
//     (instance: drawn at random when the ps process starts, so that a worker tells a restarted
//      ps from a cut connection; restored_step: the global step that process's shards started
//      from, the checkpoint's it restored or the chief's last kInit (a re-seed), -1 before either)
//   kInit (chief)                    shard u32, step i64, slots u32      values, slots   kAck
//   kWaitReady                       timeout_ms u32                      -               kReady
//   kPull                            -                                   -               kValues per shard held
//   kPush                            PushMeta, element type u8, codec u8 gradient        kPushReply
//   kPullState (chief, checkpoints)  -                                   -               kState per shard held
//   kWorkerDone                      worker i32, finished u8             -               kDoneReply
//     (finished 0: the worker stops before the end, for a signal; it is then as good as lost)
//     (kDoneReply: step i64, applied i64, stale i64, duplicates i64, rejected i64, the worker
//      count, then per worker ps0 paces: count u32, (seconds f64, steps u32) × count)
//   kCounters (chief, run log)       -                                   -               kCountersReply
//     (kCountersReply: as kDoneReply, so far)
//   kWorkerFailed                    worker i32, then why (text)         -               none
//     (the worker ends with an error; sent on any connection whose handshake proved it that
//      worker, hello or not, then the worker closes it: the ps gives up on it at once)
//   kClaimWorker (to ps0)            -                                   -               kClaimReply
//     (a worker joining a running async job asks for an identity: kClaimReply: worker i32, the
//      job's --workers i32, then the ps tasks' addresses (text, host:port,host:port); the
//      identity is held for it until it says hello as that worker, or --worker_timeout passes)
// clang-format on
//
// Any request may instead be answered by kError, whose meta is the message: the worker reports it
// and stops.
//
// How the tensors travel is the connection's business (comm/link_setup.h): by value over TCP, or,
// between a worker and a ps of one host, by reference, each side copying what it receives straight
// out of the other's memory. The protocol is the same either way.
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
#include "comm/meta_codec.h"
#include "ps/worker_count.h"
#include "tensor/element_type.h"

namespace dtrain::ps_protocol {

inline constexpr uint16_t kHello = 16;
inline constexpr uint16_t kHelloReply = 17;
inline constexpr uint16_t kInit = 18;
inline constexpr uint16_t kAck = 19;
inline constexpr uint16_t kWaitReady = 20;
// A ps answers a kWaitReady within this, whatever timeout it asks for.
inline constexpr uint32_t kMaxReadyWaitMs = 60'000;
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
inline constexpr uint16_t kCounters = 31;
inline constexpr uint16_t kCountersReply = 32;
inline constexpr uint16_t kWorkerFailed = 33;
inline constexpr uint16_t kClaimWorker = 34;
inline constexpr uint16_t kClaimReply = 35;
inline constexpr uint16_t kSettings = 36;
inline constexpr uint16_t kSettingsReply = 37;

// The types the table above gives tensors (ConnectionOptions::type_carries_tensors): any other
// that declares some is refused before it is handled. kPushReply carries the values a push asked
// for.
inline bool carries_tensors(uint16_t type) {
  return type == kInit || type == kValues || type == kPush || type == kPushReply || type == kState;
}

// What each task says it is in its connections' handshakes (ConnectionOptions::identity): a ps
// binds a worker's pushes and done report to the connection whose handshake proved this.
inline std::string worker_identity(int worker) { return "worker " + std::to_string(worker); }
inline std::string ps_identity(int ps) { return "ps " + std::to_string(ps); }

// The meta fields travel through comm/meta_codec.h.
using ::dtrain::MetaReader;
using ::dtrain::MetaWriter;
using ::dtrain::ShortMeta;

// kPush: one shard's gradient.
// Steps a peer may name (kInit's step, a push's computed_at_step): far beyond any run, and far
// enough from INT64_MAX that counting on from them cannot overflow.
inline constexpr int64_t kMaxStep = int64_t{1} << 62;

// A push's and a shard reply's tensors: their element type and codec (tensor/element_type.h), as
// the ring's chunks carry them, last in the meta. Only float32, not encoded, is pushed or pulled
// yet, so the writers below write that and the structs hold no field for it: a frame that says
// otherwise is one this build cannot read, and its reader refuses it as malformed (the callers
// turn ShortMeta into a FrameError naming the peer) before its tensors are read.
inline void write_float32_encoding(MetaWriter& w) {
  w.put(static_cast<uint8_t>(ElementType::kFloat32)).put(static_cast<uint8_t>(Codec::kNone));
}
inline void read_float32_encoding(MetaReader& r, std::string_view what) {
  const auto type = r.get<uint8_t>();
  const auto codec = r.get<uint8_t>();
  if (codec != static_cast<uint8_t>(Codec::kNone)) {
    throw ShortMeta(std::string(what) + " encoded by codec " + std::to_string(codec) +
                    ", which this build does not know");
  }
  if (type != static_cast<uint8_t>(ElementType::kFloat32)) {
    throw ShortMeta(std::string(what) + " of " + describe_element_type(type) +
                    " where this build reads float32");
  }
}

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
  write_float32_encoding(w);
}
inline PushMeta read_push(MetaReader& r) {
  PushMeta m;
  m.shard = r.get<uint32_t>();
  m.worker = r.get<int32_t>();
  m.sequence = r.get<uint64_t>();
  m.computed_at_step = r.get<int64_t>();
  m.lr = r.get<float>();
  m.want_values = r.get<uint8_t>();
  read_float32_encoding(r, "a push");
  return m;
}

// kPushReply and kValues: a shard's step after the request, whether training is over, and
// whether the ps task is stopping (it was asked to by a signal: its workers stop too).
// A job that counts its workers (ps/worker_count.h) adds how many changes of them there were, so
// that a worker asks for the newest (kCounters) when that number moves. The meta block must fit a
// memory link's record (MemoryLink::kRecordMetaBytes, 24 bytes; this one is 21): a reply too large
// for one goes over the socket, and the landing the worker offered for its values is never used.
struct ShardReply {
  uint32_t shard = 0;
  uint8_t outcome = 0;  // kPushReply: PushResult::Outcome
  int64_t step = 0;
  uint8_t finished = 0;
  uint8_t halting = 0;
  uint32_t worker_changes = 0;
};

inline constexpr size_t kShardReplyMetaBytes = 21;

inline void write(MetaWriter& w, const ShardReply& m) {
  w.put(m.shard).put(m.outcome).put(m.step).put(m.finished).put(m.halting).put(m.worker_changes);
  write_float32_encoding(w);
}
inline ShardReply read_shard_reply(MetaReader& r) {
  ShardReply m;
  m.shard = r.get<uint32_t>();
  m.outcome = r.get<uint8_t>();
  m.step = r.get<int64_t>();
  m.finished = r.get<uint8_t>();
  m.halting = r.get<uint8_t>();
  m.worker_changes = r.get<uint32_t>();
  read_float32_encoding(r, "a shard reply");
  return m;
}

// kDoneReply and kCountersReply: what the ps did over the whole run (or so far), summed over its
// shards.
struct DoneReply {
  int64_t step = 0;  // the step of its first shard
  int64_t applied = 0;
  int64_t stale_dropped = 0;
  int64_t duplicates = 0;
  int64_t rejected = 0;  // gradients with a NaN or an infinity
  WorkerCount workers;   // ps0's: who is in the job, where it counts them
  // ps0's: each worker's time between its pushes so far, by worker (ps/worker_pace.h); the others
  // send none.
  struct WorkerSteps {
    double seconds = 0;
    uint32_t steps = 0;
  };
  std::vector<WorkerSteps> worker_steps;
};

// More than any job's workers: a longer list in a counters reply is malformed.
inline constexpr uint32_t kMaxPaceWorkers = 1u << 16;

inline void write(MetaWriter& w, const DoneReply& m) {
  w.put(m.step).put(m.applied).put(m.stale_dropped).put(m.duplicates).put(m.rejected);
  w.put(m.workers.changes)
      .put(m.workers.left)
      .put(m.workers.workers)
      .put(m.workers.worker)
      .put(m.workers.joined)
      .put(m.workers.step);
  w.put(static_cast<uint32_t>(m.worker_steps.size()));
  for (const DoneReply::WorkerSteps& steps : m.worker_steps) w.put(steps.seconds).put(steps.steps);
}
inline DoneReply read_done_reply(MetaReader& r) {
  DoneReply m;
  m.step = r.get<int64_t>();
  m.applied = r.get<int64_t>();
  m.stale_dropped = r.get<int64_t>();
  m.duplicates = r.get<int64_t>();
  m.rejected = r.get<int64_t>();
  m.workers.changes = r.get<uint32_t>();
  m.workers.left = r.get<uint32_t>();
  m.workers.workers = r.get<int32_t>();
  m.workers.worker = r.get<int32_t>();
  m.workers.joined = r.get<uint8_t>();
  m.workers.step = r.get<int64_t>();
  const auto paced = r.get<uint32_t>();
  if (paced > kMaxPaceWorkers) throw ShortMeta("a counters reply for more workers than a job has");
  for (uint32_t i = 0; i < paced; ++i) {
    DoneReply::WorkerSteps steps;
    steps.seconds = r.get<double>();
    steps.steps = r.get<uint32_t>();
    m.worker_steps.push_back(steps);
  }
  return m;
}

}  // namespace dtrain::ps_protocol
