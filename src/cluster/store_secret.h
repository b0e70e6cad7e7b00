// A cluster secret agreed by the ranks of a group through a key-value store that anyone who reaches
// it may read and write (torch.distributed's TCPStore has no authentication), without the store
// ever holding the secret: each rank publishes an ephemeral X25519 public key, and rank 0 seals a
// fresh secret to each rank's key. Whoever reads the store, then or later, learns keys and sealed
// boxes that open for nobody else. It does not stop a process that writes the store during the
// rendezvous: one that puts its own key in a rank's place gets that rank's box, as it could put its
// own address in place of Gloo's ranks'. A secret given to every rank (DTRAIN_SECRET) needs no
// store at all.
#pragma once

#include <string>

namespace dtrain {

// The store the ranks share. Implementations: torch's c10d::Store (python/torch_backend/), a map
// in tests.
class SharedStore {
 public:
  virtual ~SharedStore() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Waits until `key` is set (within the store's own timeout) and returns its value.
  virtual std::string get(const std::string& key) = 0;
};

// Keys under the store's prefix: "dtrain/key/<rank>" (32 bytes, X25519) for every rank, and
// "dtrain/sealed/<rank>" (AES-256-GCM of the secret, tag last) for every rank but 0.
std::string store_key_key(int rank);
std::string store_sealed_key(int rank);

// The same secret on every rank 0 <= rank < world_size (rank 0 draws it: new_cluster_secret()).
// Throws AuthError naming the key when what the store holds for this rank does not open (another
// process wrote to the store during the rendezvous), and Error where OpenSSL fails; the store's
// own errors (its timeout) as they come.
std::string agree_secret_through_store(SharedStore& store, int rank, int world_size);

}  // namespace dtrain
