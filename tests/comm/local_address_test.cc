// local_address_toward: the loopback address toward this host, and an error naming a host that
// does not resolve.
#include "comm/local_address.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"

namespace dtrain {
namespace {

TEST(LocalAddressTest, LoopbackIsReachedFromLoopback) {
  EXPECT_EQ(local_address_toward("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(local_address_toward("127.0.0.5"), "127.0.0.1");
}

TEST(LocalAddressTest, AHostThatDoesNotResolveIsNamed) {
  try {
    local_address_toward("no-such-host.invalid");
    FAIL() << "no error";
  } catch (const TransportError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("no-such-host.invalid: does not resolve", 0), 0u)
        << e.what();
  }
}

}  // namespace
}  // namespace dtrain
