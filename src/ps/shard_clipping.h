// What a ps task can clip: a clipping optimizer sees one shard at a time, so a norm that needs
// more than the shard (a global norm, or the norm of a variable cut into shards) cannot be kept
// on the ps, and is refused before training rather than computed wrongly.
#pragma once

#include <cstddef>
#include <vector>

#include "nn/param_set.h"
#include "optim/optimizer.h"
#include "ps/partition.h"

namespace dtrain {

// Throws UsageError naming the flag: --global_clipnorm under any ps, or --clipnorm where one of
// `shards` (this task's, indices into map.shards) holds part of a variable, naming the variable,
// its size and the rows the shard holds. A --clipvalue is kept whole on any shard.
void refuse_clipping_across_shards(const std::vector<ParamSpec>& specs, const PartitionMap& map,
                                   const std::vector<size_t>& shards,
                                   const OptimizerConfig& optimizer);

}  // namespace dtrain
