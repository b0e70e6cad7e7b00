// HostPort: the text form that errors, logs and TF_CONFIG show.
#include "comm/host_port.h"

#include <gtest/gtest.h>

namespace dtrain {
namespace {

TEST(HostPort, ToStringBracketsIpv6Only) {
  EXPECT_EQ(HostPort({"::1", 9001}).to_string(), "[::1]:9001");
  EXPECT_EQ(HostPort({"fe80::1%eth0", 2222}).to_string(), "[fe80::1%eth0]:2222");
  EXPECT_EQ(HostPort({"localhost", 9001}).to_string(), "localhost:9001");
  EXPECT_EQ(HostPort({"10.0.0.7", 80}).to_string(), "10.0.0.7:80");
}

}  // namespace
}  // namespace dtrain
