// Meta blocks of frames (comm/frame_format.h): little-endian fixed-width fields written and read
// in the same order by both ends of a protocol. Shared by the ps and collective protocols.
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

#include "base/peer_text.h"
#include "comm/frame_format.h"

namespace dtrain {

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
  // The rest of the meta, a message from the peer, escaped for printing (base/peer_text.h): it
  // ends up in logs and on terminals.
  std::string rest_as_peer_text() {
    std::string text = peer_text(meta_);
    meta_ = {};
    return text;
  }

 private:
  std::span<const std::byte> meta_;
};

}  // namespace dtrain
