// The handshake's proofs: HMAC-SHA256 over a label and both nonces, checked against an independent
// implementation (Python's hmac module), and bound to direction, secret and nonces.
#include "comm/auth.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

namespace dtrain {
namespace {

// nonce[i] = first + i
Nonce counting_nonce(int first) {
  Nonce nonce;
  for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<std::byte>(first + i);
  return nonce;
}

std::string hex(const Proof& proof) {
  std::string text;
  for (std::byte b : proof) text += fmt::format("{:02x}", static_cast<unsigned>(b));
  return text;
}

TEST(Auth, ProofsMatchAReferenceHmacSha256) {
  // python3: hmac.new(b"cluster-secret", b"dtrain-server" + nc + ns, hashlib.sha256).hexdigest()
  // with nc = bytes(range(32)), ns = bytes(range(32, 64)); and "dtrain-client" + ns + nc.
  const Nonce client_nonce = counting_nonce(0);
  const Nonce server_nonce = counting_nonce(32);
  EXPECT_EQ(hex(server_proof("cluster-secret", client_nonce, server_nonce)),
            "19b794f032108fcad5e329050db329ad3216f7e25e7a80b893cea2d1e3c4b5dc");
  EXPECT_EQ(hex(client_proof("cluster-secret", server_nonce, client_nonce)),
            "7b29eafee5aeb438078bace16a682d6dc2df459532afb2ac6476af1b310aa6e5");
}

TEST(Auth, ProofsDependOnDirectionSecretAndEveryNonce) {
  const Nonce a = counting_nonce(0);
  const Nonce b = counting_nonce(32);
  const Proof reference = server_proof("secret", a, b);
  // A server proof cannot be reflected as a client proof over the same nonces.
  EXPECT_FALSE(proofs_equal(reference, client_proof("secret", a, b)));
  EXPECT_FALSE(proofs_equal(reference, server_proof("Secret", a, b)));
  EXPECT_FALSE(proofs_equal(reference, server_proof("secret", b, a)));
  Nonce last_bit_flipped = b;
  last_bit_flipped.back() ^= std::byte{1};
  EXPECT_FALSE(proofs_equal(reference, server_proof("secret", a, last_bit_flipped)));
  EXPECT_TRUE(proofs_equal(reference, server_proof("secret", a, b)));
}

TEST(Auth, SecretsMayHoldAnyBytes) {
  const std::string with_nul("ab\0cd", 5);
  const Nonce n = counting_nonce(7);
  EXPECT_FALSE(proofs_equal(server_proof(with_nul, n, n), server_proof("ab", n, n)));
}

TEST(Auth, ProofsEqualComparesEveryByte) {
  Proof a{};
  Proof b{};
  EXPECT_TRUE(proofs_equal(a, b));
  b.back() = std::byte{1};
  EXPECT_FALSE(proofs_equal(a, b));
}

TEST(Auth, NoncesAreFresh) { EXPECT_NE(random_nonce(), random_nonce()); }

}  // namespace
}  // namespace dtrain
