// The ps's clipping refusals: each names the flag, and the variable a norm would need whole.
#include "ps/shard_clipping.h"

#include <fmt/format.h>

#include "base/error.h"

namespace dtrain {

void refuse_clipping_across_shards(const std::vector<ParamSpec>& specs, const PartitionMap& map,
                                   const std::vector<size_t>& shards, const OptimizerConfig& o) {
  if (o.global_clipnorm > 0) {
    throw UsageError(fmt::format(
        "--global_clipnorm {}: a ps task holds its own shards only, and the global norm needs "
        "every variable's gradient in one place; use --clipnorm or --clipvalue, or --strategy "
        "allreduce",
        o.global_clipnorm));
  }
  if (o.clipnorm <= 0) return;
  for (const size_t index : shards) {
    const Shard& shard = map.shards[index];
    const ParamSpec& spec = specs[shard.tensor];
    const size_t rows = spec.shape.empty() || spec.shape[0] == 0 ? 1 : size_t(spec.shape[0]);
    if (shard.row_begin == 0 && shard.row_end == rows) continue;
    throw UsageError(fmt::format(
        "--clipnorm {}: variable {} ({} bytes) is cut into shards (rows {}..{} of {} in one), and "
        "its norm needs the whole of it in one place; use --clipvalue, or --strategy allreduce",
        o.clipnorm, spec.name, num_elements(spec.shape) * 4, shard.row_begin, shard.row_end, rows));
  }
}

}  // namespace dtrain
