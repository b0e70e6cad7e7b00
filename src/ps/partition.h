// The partition map: which parameter-server task holds which rows of which variable. A pure
// function of (layout, ps count, policy, min_shard_bytes), so every task of a cluster computes the
// same map without talking (DESIGN.md §5). It knows nothing of sockets or of the values themselves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "nn/param_set.h"

namespace dtrain {

enum class Placement {
  // Variables larger than min_shard_bytes are cut into contiguous row ranges so that every ps
  // task holds nearly equal bytes; smaller ones are placed whole on the least-loaded task.
  kBalanced,
  // Whole variables in declaration order, variable i on task i mod num_ps, as
  // tf.train.replica_device_setter places them.
  kRoundRobin,
};

// "balanced" | "round_robin". REQUIRES: one of those; otherwise throws UsageError naming
// --placement and the choices.
Placement parse_placement(std::string_view name);
std::string_view placement_name(Placement placement);

// Rows [row_begin, row_end) of variable `tensor`, held by task `ps`. [begin, end) is the same
// range as offsets into the flat arena of a ParamSet with this layout:
// begin = layout.offset(tensor) + row_begin * row_size, where row_size = values / rows.
// A push or pull of this shard is the slice flat()[begin, end) of the gradients or parameters.
struct Shard {
  int ps = 0;
  size_t tensor = 0;
  size_t row_begin = 0, row_end = 0;
  size_t begin = 0, end = 0;

  size_t size() const { return end - begin; }
  bool operator==(const Shard&) const = default;
};

struct PartitionMap {
  // Sorted by (ps, tensor, row_begin). Every value of every variable lies in exactly one shard;
  // no shard splits a row; no shard is empty unless its variable has no values.
  std::vector<Shard> shards;
  // shards_of_ps[p]: indices into `shards` of the shards task p holds, ascending.
  std::vector<std::vector<size_t>> shards_of_ps;

  int num_ps() const { return static_cast<int>(shards_of_ps.size()); }
  // Parameter bytes (float32 values, padding excluded) held by task ps.
  size_t bytes_on(int ps) const;
  bool operator==(const PartitionMap&) const = default;
};

// The map for `num_ps` tasks over the variables of `layout`.
// Balanced: small variables (at most min_shard_bytes) are placed first, largest first, each on
// the least-loaded task (ties: lowest index); then the large variables, taken in declaration
// order as one stream of rows, are cut so that every task ends as close as possible to the same
// total — each task within one row of the level when the small ones leave room for it.
// Then, with max_shard_bytes > 0, every shard longer than that is cut into near-equal row ranges
// of at most max_shard_bytes (a row is never split): the units a push or pull pipelines.
// REQUIRES: num_ps >= 1; otherwise throws UsageError.
PartitionMap make_partition(const ParamSet& layout, int num_ps, Placement placement,
                            size_t min_shard_bytes = 64 * 1024, size_t max_shard_bytes = 0);

// A digest of the layout and the map (names, shapes, every shard's rows and task): a worker and a
// ps task started with different --model, --hidden_units, --placement or ps count disagree on it,
// which the ps reports at the first hello instead of corrupting anything.
uint64_t partition_fingerprint(const ParamSet& layout, const PartitionMap& map);

// Throws Error naming the first shard that is not a row range of a variable of `specs`: a map of
// another model would make every push land in the wrong place.
void check_map_matches(const std::vector<ParamSpec>& specs, const PartitionMap& map);

}  // namespace dtrain
