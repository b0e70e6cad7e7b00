// The ps protocol's meta blocks that name their tensors' element type: written and read alike, and
// a frame of a type this build does not read refused before its tensors are.
#include "ps/ps_protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "comm/memory_link.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
namespace proto = ps_protocol;

TEST(PsProtocol, APushRoundTripsWithItsElementType) {
  proto::MetaWriter w;
  proto::write(w, proto::PushMeta{.shard = 2, .worker = 1, .sequence = 9, .lr = 0.5f});
  proto::MetaReader r(w.bytes());
  const proto::PushMeta m = proto::read_push(r);
  EXPECT_EQ(m.shard, 2u);
  EXPECT_EQ(m.sequence, 9u);
  EXPECT_EQ(m.lr, 0.5f);
  // The element type and codec close the block: float32, none.
  const auto bytes = w.bytes();
  EXPECT_EQ(bytes[bytes.size() - 2], std::byte{static_cast<uint8_t>(ElementType::kFloat32)});
  EXPECT_EQ(bytes.back(), std::byte{0});
}

TEST(PsProtocol, APushOfAnotherElementTypeOrACodecIsRefusedNamingIt) {
  proto::MetaWriter push;
  proto::write(push, proto::PushMeta{});
  std::vector<std::byte> bf16(push.bytes().begin(), push.bytes().end());
  bf16[bf16.size() - 2] = std::byte{static_cast<uint8_t>(ElementType::kBFloat16)};
  proto::MetaReader r(bf16);
  EXPECT_THAT([&] { proto::read_push(r); },
              ::testing::ThrowsMessage<ShortMeta>(
                  HasSubstr("a push of bfloat16 where this build reads float32")));
  proto::MetaWriter encoded;
  proto::write(encoded, proto::ShardReply{});
  std::vector<std::byte> bytes(encoded.bytes().begin(), encoded.bytes().end());
  bytes.back() = std::byte{3};  // the codec, last
  proto::MetaReader reply(bytes);
  EXPECT_THAT([&] { proto::read_shard_reply(reply); },
              ::testing::ThrowsMessage<ShortMeta>(
                  HasSubstr("a shard reply encoded by codec 3, which this build does not know")));
}

// A shard's values land where the worker offered only if their reply fits a mailbox record.
TEST(PsProtocol, AShardReplyFitsAMemoryLinksRecord) {
  proto::MetaWriter w;
  proto::write(w, proto::ShardReply{.shard = 1, .step = 5});
  EXPECT_EQ(w.bytes().size(), proto::kShardReplyMetaBytes);
  EXPECT_LE(w.bytes().size(), MemoryLink::kRecordMetaBytes);
  proto::MetaReader r(w.bytes());
  EXPECT_EQ(proto::read_shard_reply(r).step, 5);
}

}  // namespace
}  // namespace dtrain
