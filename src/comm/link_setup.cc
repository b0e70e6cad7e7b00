// The link step, both sides, the words of its refusals, and where Connection meets it: the reserved
// frames after the handshake.
#include "comm/link_setup.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "base/log.h"
#include "comm/connection.h"
#include "comm/meta_codec.h"
#include "comm/peer_memory.h"
#include "comm/shared_mailbox.h"

namespace dtrain {

namespace ff = frame_format;

namespace {

enum Verdict : uint8_t { kByValue = 0, kProve = 1, kRefused = 2 };

// How the messages name a task: its handshake identity without spaces ("worker 1", "worker1" alike
// become "worker1"), as the flags and logs name tasks.
std::string compact(std::string_view identity) {
  std::string name(identity);
  name.erase(std::remove(name.begin(), name.end(), ' '), name.end());
  return name;
}

}  // namespace

std::string shm_failure(std::string_view self, std::string_view peer, std::string_view why) {
  return fmt::format(
      "--transport shm: {} and {} cannot move payloads through memory: {}; run them with "
      "--transport tcp or auto",
      self, peer, why);
}

// The step's view of its connection: names for the messages and the frames it sends and reads.
class LinkStep {
 public:
  explicit LinkStep(Connection& connection) : c_(connection) {}

  Transport transport() const { return c_.options_.transport; }
  std::string self() const {
    return c_.options_.identity.empty() ? std::string("this task") : compact(c_.options_.identity);
  }
  std::string peer() const {
    if (!c_.options_.task_name.empty()) return c_.options_.task_name;
    if (!c_.peer_params_.identity.empty()) return compact(c_.peer_params_.identity);
    return c_.peer();
  }
  std::string failure(std::string_view why) const { return shm_failure(self(), peer(), why); }

  void send(uint16_t type, const MetaWriter& meta) { c_.send_link_frame(type, meta.bytes()); }
  // The next link frame, which must be of `type`; its meta copied out.
  std::vector<std::byte> receive(uint16_t type) {
    const Connection::Incoming in = c_.receive_link_frame();
    if (in.type != type) {
      throw FrameError(fmt::format("bad frame from {}: type {} in the link step, where {} was due",
                                   c_.peer(), in.type, type));
    }
    return {in.meta.begin(), in.meta.end()};
  }
  // Tells the peer why we refuse it, and throws that.
  [[noreturn]] void refuse(uint16_t type, std::string_view why) {
    const std::string message = failure(why);
    MetaWriter meta;
    meta.put(uint8_t{kRefused})
        .put_string(fmt::format("{} refused {}: {}", self(), peer(), message));
    send(type, meta);
    throw LinkRefused(message);
  }
  // The peer's verdict other than kProve: a refusal is thrown, a reason to stay on TCP returned
  // (and thrown as our own refusal under kShm).
  std::string not_proved(uint8_t verdict, MetaReader& meta) const {
    std::string why = meta.rest_as_peer_text();
    if (verdict == kRefused) throw LinkRefused(why);
    if (verdict != kByValue) {
      throw FrameError(fmt::format("bad frame from {}: link verdict {}", c_.peer(), verdict));
    }
    if (transport() == Transport::kShm) throw LinkRefused(failure(why));
    spdlog::debug("payloads to {} travel over TCP: {}", peer(), why);
    c_.why_by_value_ = why;
    return why;
  }
  void note_by_value(std::string_view why) { c_.why_by_value_ = why; }
  std::unique_ptr<MemoryLink> link(int32_t pid, std::unique_ptr<SharedMailbox> mailbox) const {
    return std::make_unique<MemoryLink>(pid, std::move(mailbox), c_.peer());
  }
  bool peer_shares_host() const { return dtrain::peer_shares_host(*c_.stream_); }

 private:
  Connection& c_;
};

std::unique_ptr<MemoryLink> LinkSetup::run_as_client(Connection& connection) {
  LinkStep step(connection);
  const bool wants = step.transport() != Transport::kTcp;
  const std::optional<Challenge> mine = wants ? std::optional(new_challenge()) : std::nullopt;
  MetaWriter offer;
  offer.put(static_cast<uint8_t>(wants));
  if (mine) put_challenge(offer, *mine);
  step.send(ff::kTypeLinkOffer, offer);
  if (!wants) return nullptr;
  try {
    const std::vector<std::byte> answer_meta = step.receive(ff::kTypeLinkAnswer);
    MetaReader answer(answer_meta);
    if (const auto verdict = answer.get<uint8_t>(); verdict != kProve) {
      step.not_proved(verdict, answer);
      return nullptr;
    }
    const MemoryOffer server = get_offer(answer);
    const Challenge theirs = get_challenge(answer);
    std::string why = check_memory_offer(server, *mine);
    std::unique_ptr<SharedMailbox> mailbox;
    if (why.empty()) {
      try {
        mailbox = SharedMailbox::create(step.peer());
      } catch (const TransportError& error) {
        why = error.what();
      }
    }
    if (!why.empty()) {
      if (step.transport() == Transport::kShm) step.refuse(ff::kTypeLinkProof, why);
      step.note_by_value(why);
      MetaWriter proof;
      proof.put(uint8_t{kByValue}).put_string(why);
      step.send(ff::kTypeLinkProof, proof);
    } else {
      // We have just read the server's memory, so it reads ours next; Yama's restriction is
      // lifted for it only if its address is one of this host's, as on the server's side (a
      // task in another network namespace of this machine is a host apart for that rule).
      const MemoryProof held(theirs, step.peer_shares_host());
      MetaWriter proof;
      proof.put(uint8_t{kProve});
      put_offer(proof, held.offer());
      proof.put(mailbox->fd());
      step.send(ff::kTypeLinkProof, proof);
      const std::vector<std::byte> ready_meta = step.receive(ff::kTypeLinkReady);
      MetaReader ready(ready_meta);
      if (const auto verdict = ready.get<uint8_t>(); verdict != kProve) {
        step.not_proved(verdict, ready);
        return nullptr;
      }
      return step.link(server.pid, std::move(mailbox));
    }
    const std::vector<std::byte> ready_meta = step.receive(ff::kTypeLinkReady);
    MetaReader ready(ready_meta);
    if (const auto verdict = ready.get<uint8_t>(); verdict != kByValue) {
      step.not_proved(verdict, ready);
    }
    return nullptr;
  } catch (const ShortMeta&) {
    throw FrameError(fmt::format("bad frame from {}: a malformed link answer", connection.peer()));
  }
}

std::unique_ptr<MemoryLink> LinkSetup::answer(Connection& connection,
                                              std::span<const std::byte> offer_meta) {
  LinkStep step(connection);
  try {
    MetaReader offer(offer_meta);
    offer.get<uint8_t>();  // wants memory: take_link_frames asked
    const Challenge theirs = get_challenge(offer);
    if (step.transport() == Transport::kTcp) {
      MetaWriter answer;
      answer.put(uint8_t{kByValue})
          .put_string(fmt::format("{} was started with --transport tcp", step.self()));
      step.send(ff::kTypeLinkAnswer, answer);
      return nullptr;
    }
    const Challenge mine = new_challenge();
    std::optional<MemoryProof> held;  // holds the client's challenge until it has read it
    held.emplace(theirs, step.peer_shares_host());
    MetaWriter answer;
    answer.put(uint8_t{kProve});
    put_offer(answer, held->offer());
    put_challenge(answer, mine);
    step.send(ff::kTypeLinkAnswer, answer);
    const std::vector<std::byte> proof_meta = step.receive(ff::kTypeLinkProof);
    held.reset();
    MetaReader proof(proof_meta);
    std::string why;
    const auto verdict = proof.get<uint8_t>();
    MemoryOffer client;
    std::unique_ptr<SharedMailbox> mailbox;
    if (verdict == kProve) {
      client = get_offer(proof);
      const auto fd = proof.get<int32_t>();
      why = check_memory_offer(client, mine);
      if (why.empty()) {
        try {
          mailbox = SharedMailbox::attach(client.pid, fd, step.peer());
        } catch (const TransportError& error) {
          why = error.what();
        }
      }
    } else {
      why = proof.rest_as_peer_text();
      if (verdict == kRefused) throw LinkRefused(why);
    }
    if (!why.empty() && step.transport() == Transport::kShm) step.refuse(ff::kTypeLinkReady, why);
    MetaWriter ready;
    ready.put(static_cast<uint8_t>(why.empty() ? kProve : kByValue)).put_string(why);
    step.send(ff::kTypeLinkReady, ready);
    if (!why.empty()) {
      spdlog::debug("payloads from {} travel over TCP: {}", step.peer(), why);
      return nullptr;
    }
    return step.link(client.pid, std::move(mailbox));
  } catch (const ShortMeta&) {
    throw FrameError(fmt::format("bad frame from {}: a malformed link offer", connection.peer()));
  }
}

bool LinkSetup::wants_memory(std::span<const std::byte> offer) {
  return !offer.empty() && offer[0] != std::byte{0};
}

void LinkSetup::no_offer(Connection& connection) {
  LinkStep step(connection);
  if (step.transport() != Transport::kShm) return;
  step.refuse(ff::kTypeLinkAnswer, fmt::format("{} was started with --transport tcp", step.peer()));
}

void LinkSetup::refused(Connection& connection, std::span<const std::byte> answer_meta) {
  MetaReader answer(answer_meta);
  try {
    const auto verdict = answer.get<uint8_t>();
    if (verdict == kRefused) throw LinkRefused(answer.rest_as_peer_text());
  } catch (const ShortMeta&) {
  }
  throw FrameError(fmt::format("bad frame from {}: a link answer to an offer it was not made",
                               connection.peer()));
}

// ---- Connection's side ----

bool Connection::take_link_frames(const Incoming& in) {
  try {
    if (in.type >= ff::kFirstUserType) {
      // The protocol's first frame ends the link step: without one (a tool that does not speak
      // it), or without memory. A refusal waits for it, so that the client is not sending while
      // the connection closes (its frame would reset the connection and lose the refusal).
      if (link_step_ != LinkState::kDone) {
        if (server_side_) LinkSetup::no_offer(*this);
        link_step_ = LinkState::kDone;
      }
      return true;
    }
    if (in.tensor_bytes > 0) {
      throw FrameError(
          fmt::format("bad frame from {}: link frame type {} carries tensors", peer(), in.type));
    }
    if (in.type == ff::kTypeWake) return false;
    if (in.type == ff::kTypeLinkOffer && server_side_ && link_step_ == LinkState::kAwaited) {
      const std::vector<std::byte> offer(in.meta.begin(), in.meta.end());
      link_step_ = LinkSetup::wants_memory(offer) ? LinkState::kDone : LinkState::kOffered;
      if (link_step_ == LinkState::kDone) link_ = LinkSetup::answer(*this, offer);
      return false;
    }
    if (in.type == ff::kTypeLinkAnswer && !server_side_) LinkSetup::refused(*this, in.meta);
  } catch (const LinkRefused&) {
    fail(std::current_exception());
  }
  throw FrameError(
      fmt::format("bad frame from {}: link frame type {} out of its place", peer(), in.type));
}

void Connection::send_link_frame(uint16_t type, std::span<const std::byte> meta) {
  writer_.write(type, 0, meta, {}, io_deadline());
}

Connection::Incoming Connection::receive_link_frame() {
  return receive_frame(io_deadline(), io_deadline(), options_.max_payload_bytes,
                       /*handshake=*/false);
}

}  // namespace dtrain
