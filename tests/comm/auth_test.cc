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

// The process keys of the reference values below: bytes(range(1, 33)) and bytes([42]) * 32.
ProcessPublicKey counting_key() {
  ProcessPublicKey key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::byte>(i + 1);
  return key;
}
ProcessPublicKey key_of_42() {
  ProcessPublicKey key;
  key.fill(std::byte{42});
  return key;
}

// The params of the reference values below.
std::vector<std::byte> client_params() {
  return encode_params(
      {.authenticate_frames = true, .process_key = counting_key(), .identity = "worker 1"});
}
std::vector<std::byte> server_params() {
  return encode_params(
      {.authenticate_frames = true, .process_key = key_of_42(), .identity = "ps 0"});
}

template <size_t N>
std::string hex(const std::array<std::byte, N>& bytes) {
  return hex(std::span<const std::byte>(bytes));
}

TEST(Auth, ParamsEncodeAsDocumented) {
  EXPECT_EQ(hex(client_params()),
            "010102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2008776f726b65722031");
  const HandshakeParams back = decode_params(server_params());
  EXPECT_TRUE(back.authenticate_frames);
  EXPECT_EQ(back.process_key, key_of_42());
  EXPECT_EQ(back.incarnation(), 0x2A2A2A2A2A2A2A2Au);
  EXPECT_EQ(back.identity, "ps 0");
  EXPECT_FALSE(decode_params(encode_params({.authenticate_frames = false, .identity = ""}))
                   .authenticate_frames);
}

TEST(Auth, MalformedParamsAreAnAuthError) {
  auto params = server_params();
  EXPECT_THROW(decode_params(std::span(params).first(33)), AuthError);
  params[33] = std::byte{5};  // an identity length past the end
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
            "a1b7663ef7cac4408951f64a1f2dba692d54a329cd23ee05bb948df633dd51df");
  EXPECT_EQ(hex(client_proof("cluster-secret", server_nonce, client_nonce, client_params(),
                             server_params())),
            "74b6b38a47c92afd74a7de0e2b579d12c6ef3addfe8136364bb80a96834388e2");
}

TEST(Auth, ProcessSignaturesMatchAReferenceEd25519) {
  // python3-cryptography: k = Ed25519PrivateKey.from_private_bytes(sha256(pack("<Q", 7))), its
  // raw public key, and k.sign(b"dtrain-process" + ns + nc + b), nonces and b as above.
  const ProcessKey key = ProcessKey::from_seed(7);
  EXPECT_EQ(hex(key.public_key()),
            "061519a6055b674befe94b5666a98c28beb3e108fae34b3be74e48646b88f86d");
  const auto transcript =
      process_transcript(counting_nonce(32), counting_nonce(0), client_params(), server_params());
  const ProcessSignature signature = key.sign(transcript);
  EXPECT_EQ(hex(signature),
            "c825b10527494eb5cf79d2f1e7c2980f7fd4dbdd7ee220722824cdcede77a853"
            "12dd529286c596c961b00b13bc67434c0752034d2645c1b126e98409feb4a80b");
  EXPECT_TRUE(verify_process_signature(key.public_key(), transcript, signature));
  // Another process's key, another handshake, or another bit: no.
  EXPECT_FALSE(
      verify_process_signature(ProcessKey::from_seed(8).public_key(), transcript, signature));
  EXPECT_FALSE(verify_process_signature(
      key.public_key(),
      process_transcript(counting_nonce(33), counting_nonce(0), client_params(), server_params()),
      signature));
  ProcessSignature flipped = signature;
  flipped[10] ^= std::byte{1};
  EXPECT_FALSE(verify_process_signature(key.public_key(), transcript, flipped));
  EXPECT_NE(ProcessKey::own().public_key(), key.public_key());
}

TEST(Auth, FrameKeysMatchAReferenceHkdfSha256) {
  // python3-cryptography: HKDF(SHA256(), length=16, salt=nc + ns, info=label + b)
  // .derive(b"cluster-secret"), b as above.
  const FrameKeys keys = frame_keys("cluster-secret", counting_nonce(0), counting_nonce(32),
                                    client_params(), server_params());
  EXPECT_EQ(hex(keys.client_to_server), "695c5e3f180bea7286a0148e47e187a3");
  EXPECT_EQ(hex(keys.server_to_client), "279ce063444accdd02fd5d103d78268c");
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
      {.authenticate_frames = false, .process_key = counting_key(), .identity = "worker 1"});
  EXPECT_FALSE(proofs_equal(reference, server_proof("secret", a, b, off, ps)));
  const auto other = encode_params(
      {.authenticate_frames = true, .process_key = counting_key(), .identity = "worker 2"});
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
