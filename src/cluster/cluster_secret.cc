// The cluster secret every task of a cluster shares (DESIGN.md §4): read from a file or the
// environment, and checked before anything is sent with it.
#include "cluster/cluster_secret.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "comm/auth.h"

namespace dtrain {
namespace {

// Below this a secret can be guessed offline from one recorded handshake.
constexpr size_t kMinSecretBytes = 16;

std::string checked_secret(std::string secret, const std::string& source) {
  if (!secret.empty() && secret.size() < kMinSecretBytes) {
    throw UsageError(fmt::format(
        "{}: the cluster secret is {} byte{}; it needs at least {} (make one with `openssl rand "
        "-hex 32`)",
        source, secret.size(), secret.size() == 1 ? "" : "s", kMinSecretBytes));
  }
  return secret;
}

// Whoever can read the secret can join the cluster and forge its frames, and whoever can write it
// can swap it; ssh refuses a private key on the same grounds. The link, if it is one, is followed:
// Kubernetes mounts a Secret as a link to the file, whose mode is the one that counts.
void refuse_if_others_may_access(const std::string& secret_file) {
  std::error_code ec;
  const std::filesystem::perms mode = std::filesystem::status(secret_file, ec).permissions();
  if (ec) {
    throw UsageError(
        fmt::format("--secret_file {}: cannot be read: {}", secret_file, ec.message()));
  }
  using std::filesystem::perms;
  if ((mode & (perms::group_all | perms::others_all)) == perms::none) return;
  throw UsageError(
      fmt::format("--secret_file {}: may be read or written by others (mode {:o}): chmod 600 {}",
                  secret_file, static_cast<unsigned>(mode & perms::mask), secret_file));
}

}  // namespace

std::string cluster_secret(const std::string& secret_file, const EnvLookup& env) {
  if (secret_file.empty()) {
    return checked_secret(env("DTRAIN_SECRET").value_or(""), "DTRAIN_SECRET");
  }
  std::ifstream in(secret_file, std::ios::binary);
  if (!in) throw UsageError(fmt::format("--secret_file {}: cannot be read", secret_file));
  refuse_if_others_may_access(secret_file);
  std::ostringstream text;
  text << in.rdbuf();
  std::string secret = text.str();
  if (!secret.empty() && secret.back() == '\n') secret.pop_back();
  if (!secret.empty() && secret.back() == '\r') secret.pop_back();
  if (secret.empty()) throw UsageError(fmt::format("--secret_file {}: is empty", secret_file));
  return checked_secret(std::move(secret), "--secret_file " + secret_file);
}

std::string required_cluster_secret(const std::string& secret_file, const EnvLookup& env,
                                    int world_size, const std::string& launcher,
                                    const std::string& file_option) {
  std::string secret = cluster_secret(secret_file, env);
  if (secret.empty()) {
    throw UsageError(fmt::format(
        "no cluster secret: the {} ranks {} starts need the same one: run `export "
        "DTRAIN_SECRET=$(openssl rand -hex 32)` before launching (on several hosts pass it on, "
        "e.g. mpirun -x DTRAIN_SECRET), or give {}",
        world_size, launcher, file_option));
  }
  return secret;
}

std::string new_cluster_secret() {
  std::string hex;
  for (std::byte b : random_nonce()) hex += fmt::format("{:02x}", static_cast<unsigned>(b));
  return hex;
}

}  // namespace dtrain
