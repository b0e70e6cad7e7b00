// The secret a launched rank must have: DTRAIN_SECRET when set, and one message when none is.
#include "cluster/cluster_secret.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "base/error.h"

namespace dtrain {
namespace {

EnvLookup env_with_secret(std::optional<std::string> secret) {
  return [secret](std::string_view name) -> std::optional<std::string> {
    if (name == "DTRAIN_SECRET") return secret;
    return std::nullopt;
  };
}

TEST(RequiredClusterSecretTest, TakesDtrainSecretFromTheEnvironment) {
  EXPECT_EQ(required_cluster_secret("", env_with_secret("0123456789abcdef0123"), 2, "torchrun",
                                    "secret_file=PATH"),
            "0123456789abcdef0123");
}

TEST(RequiredClusterSecretTest, NoneNamesTheLauncherTheWorldAndTheWayToGiveOne) {
  try {
    required_cluster_secret("", env_with_secret(std::nullopt), 3, "torchrun (RANK, WORLD_SIZE)",
                            "secret_file=PATH");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no cluster secret: the 3 ranks torchrun (RANK, WORLD_SIZE) starts"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("DTRAIN_SECRET=$(openssl rand -hex 32)"), std::string::npos) << what;
    EXPECT_NE(what.find("or give secret_file=PATH"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace dtrain
