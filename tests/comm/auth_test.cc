// The handshake's proofs and frame keys: HMAC-SHA256 over a label, both nonces and both sides'
// params, and HKDF-SHA256, checked against independent implementations (Python's hmac module,
// python3-cryptography's HKDF), and bound to direction, secret, nonces and params.
#include "comm/auth.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"

namespace dtrain {
namespace {

// nonce[i] = first + i
Nonce counting_nonce(int first) {
  Nonce nonce;
  for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<std::byte>(first + i);
  return nonce;
}

std::string hex(std::span<const std::byte> bytes) {
  std::string text;
  for (std::byte b : bytes) text += fmt::format("{:02x}", static_cast<unsigned>(b));
  return text;
}

// The params of the reference values below.
std::vector<std::byte> client_params() {
  return encode_params(
      {.authenticate_frames = true, .incarnation = 0x0102030405060708, .identity = "worker 1"});
}
std::vector<std::byte> server_params() {
  return encode_params({.authenticate_frames = true, .incarnation = 42, .identity = "ps 0"});
}

template <size_t N>
std::string hex(const std::array<std::byte, N>& bytes) {
  return hex(std::span<const std::byte>(bytes));
}

TEST(Auth, ParamsEncodeAsDocumented) {
  EXPECT_EQ(hex(client_params()), "01080706050403020108776f726b65722031");
  const HandshakeParams back = decode_params(server_params());
  EXPECT_TRUE(back.authenticate_frames);
  EXPECT_EQ(back.incarnation, 42u);
  EXPECT_EQ(back.identity, "ps 0");
  EXPECT_FALSE(
      decode_params(encode_params({.authenticate_frames = false, .incarnation = 0, .identity = ""}))
          .authenticate_frames);
}

TEST(Auth, MalformedParamsAreAnAuthError) {
  auto params = server_params();
  EXPECT_THROW(decode_params(std::span(params).first(9)), AuthError);
  params[9] = std::byte{5};  // an identity length past the end
  EXPECT_THROW(decode_params(params), AuthError);
  params = server_params();
  params[0] = std::byte{2};  // an unknown flag
  EXPECT_THROW(decode_params(params), AuthError);
  params = server_params();
  params.back() = std::byte{0x07};  // a control character in the identity
  EXPECT_THROW(decode_params(params), AuthError);
}

TEST(Auth, ProofsMatchAReferenceHmacSha256) {
  // python3: b = pack("<H", len(pc)) + pc + pack("<H", len(ps)) + ps, then
  // hmac.new(b"cluster-secret", b"dtrain-server" + nc + ns + b, hashlib.sha256).hexdigest()
  // with nc = bytes(range(32)), ns = bytes(range(32, 64)); and "dtrain-client" + ns + nc + b.
  const Nonce client_nonce = counting_nonce(0);
  const Nonce server_nonce = counting_nonce(32);
  EXPECT_EQ(hex(server_proof("cluster-secret", client_nonce, server_nonce, client_params(),
                             server_params())),
            "8588fb68f570bae869151e063fb614ad8ded3a1096827df03ed32fce4834d3eb");
  EXPECT_EQ(hex(client_proof("cluster-secret", server_nonce, client_nonce, client_params(),
                             server_params())),
            "c511fae731cdb563e791314b3cb58dad3594b2528e38af61912aabfba99002b4");
}

TEST(Auth, FrameKeysMatchAReferenceHkdfSha256) {
  // python3-cryptography: HKDF(SHA256(), length=16, salt=nc + ns, info=label + b)
  // .derive(b"cluster-secret"), b as above.
  const FrameKeys keys = frame_keys("cluster-secret", counting_nonce(0), counting_nonce(32),
                                    client_params(), server_params());
  EXPECT_EQ(hex(keys.client_to_server), "69caf58177f9b5761ba15a54788efdeb");
  EXPECT_EQ(hex(keys.server_to_client), "4ebac08746e24abbd90b7490dd01a868");
}

TEST(Auth, ProofsDependOnDirectionSecretEveryNonceAndTheParams) {
  const Nonce a = counting_nonce(0);
  const Nonce b = counting_nonce(32);
  const auto pc = client_params();
  const auto ps = server_params();
  const Proof reference = server_proof("secret", a, b, pc, ps);
  // A server proof cannot be reflected as a client proof over the same nonces.
  EXPECT_FALSE(proofs_equal(reference, client_proof("secret", a, b, pc, ps)));
  EXPECT_FALSE(proofs_equal(reference, server_proof("Secret", a, b, pc, ps)));
  EXPECT_FALSE(proofs_equal(reference, server_proof("secret", b, a, pc, ps)));
  Nonce last_bit_flipped = b;
  last_bit_flipped.back() ^= std::byte{1};
  EXPECT_FALSE(proofs_equal(reference, server_proof("secret", a, last_bit_flipped, pc, ps)));
  // A relay that turns frame authentication off, or changes who the client says it is.
  const auto off = encode_params(
      {.authenticate_frames = false, .incarnation = 0x0102030405060708, .identity = "worker 1"});
  EXPECT_FALSE(proofs_equal(reference, server_proof("secret", a, b, off, ps)));
  const auto other = encode_params(
      {.authenticate_frames = true, .incarnation = 0x0102030405060708, .identity = "worker 2"});
  EXPECT_FALSE(proofs_equal(reference, server_proof("secret", a, b, other, ps)));
  // Both sides' params are bound, each in its place.
  EXPECT_FALSE(proofs_equal(reference, server_proof("secret", a, b, ps, pc)));
  EXPECT_TRUE(proofs_equal(reference, server_proof("secret", a, b, pc, ps)));
}

TEST(Auth, SecretsMayHoldAnyBytes) {
  const std::string with_nul("ab\0cd", 5);
  const Nonce n = counting_nonce(7);
  EXPECT_FALSE(
      proofs_equal(server_proof(with_nul, n, n, {}, {}), server_proof("ab", n, n, {}, {})));
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
