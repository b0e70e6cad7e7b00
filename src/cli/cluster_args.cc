// What the local launcher passes on to its tasks: the user's arguments and the cluster secret.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "cli/commands.h"
#include "comm/auth.h"

namespace dtrain::cli {
namespace {

std::vector<std::string>& command_line() {
  static std::vector<std::string> args;
  return args;
}

}  // namespace

void set_command_line(int argc, char** argv) { command_line().assign(argv, argv + argc); }

std::vector<std::string> train_arguments() {
  const std::vector<std::string>& args = command_line();
  // argv[0] is the binary, argv[1] the subcommand.
  return args.size() > 2 ? std::vector<std::string>(args.begin() + 2, args.end())
                         : std::vector<std::string>{};
}

std::vector<std::string> without_options(const std::vector<std::string>& args,
                                         const std::vector<std::string>& names) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const bool named = std::find(names.begin(), names.end(), arg) != names.end();
    const bool named_with_value = std::any_of(names.begin(), names.end(), [&](const auto& name) {
      return arg.rfind(name + "=", 0) == 0;
    });
    if (named) {
      ++i;  // its value
    } else if (!named_with_value) {
      kept.push_back(arg);
    }
  }
  return kept;
}

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

std::string cluster_secret(const std::string& secret_file) {
  if (secret_file.empty()) {
    const char* secret = std::getenv("DTRAIN_SECRET");
    return checked_secret(secret ? secret : "", "DTRAIN_SECRET");
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

std::string new_cluster_secret() {
  std::string hex;
  for (std::byte b : random_nonce()) hex += fmt::format("{:02x}", static_cast<unsigned>(b));
  return hex;
}

}  // namespace dtrain::cli
