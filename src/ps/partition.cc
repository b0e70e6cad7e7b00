// Partitioning by water-filling: small variables first, then the large ones cut as one stream of
// rows so that every task rises to the same level. Counts are in float32 values; bytes are 4×.
#include "ps/partition.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <tuple>

#include "base/error.h"

namespace dtrain {
namespace {

// A large variable's place in the stream of rows that the balanced policy cuts.
struct StreamPiece {
  size_t tensor;
  size_t stream_begin;  // in values, from the start of the stream
  size_t rows;
  size_t row_size;
  size_t end() const { return stream_begin + rows * row_size; }
};

size_t row_size(const ParamSet& layout, size_t t) {
  return layout.values(t).size() / layout.rows(t);
}

Shard whole_tensor(const ParamSet& layout, size_t t, int ps) {
  return Shard{
      ps, t, 0, layout.rows(t), layout.offset(t), layout.offset(t) + layout.values(t).size()};
}

// The row boundary of the stream nearest to x (ties: the lower one). Monotone in x, so cuts taken
// at increasing x never cross; each is within half a row of x.
size_t nearest_row_boundary(const std::vector<StreamPiece>& pieces, double x) {
  const size_t total = pieces.back().end();
  if (x >= static_cast<double>(total)) return total;
  if (x <= 0) return 0;
  auto it = std::upper_bound(pieces.begin(), pieces.end(), x, [](double v, const StreamPiece& p) {
    return v < static_cast<double>(p.stream_begin);
  });
  const StreamPiece& piece = *(it - 1);
  const size_t row =
      static_cast<size_t>(x - static_cast<double>(piece.stream_begin)) / piece.row_size;
  const size_t lo = piece.stream_begin + row * piece.row_size;
  const size_t hi = lo + piece.row_size;
  return x - static_cast<double>(lo) <= static_cast<double>(hi) - x ? lo : hi;
}

// Water-filling: the share of `stream_values` each task takes so that the loads end level. The
// tasks below the level are the k least loaded, for the largest k whose level is at least the
// k-th smallest load; a task already above the level from small variables takes nothing.
std::vector<double> stream_quotas(const std::vector<size_t>& loads, size_t stream_values) {
  std::vector<size_t> sorted = loads;
  std::sort(sorted.begin(), sorted.end());
  double level = 0;
  double prefix = std::accumulate(sorted.begin(), sorted.end(), 0.0);
  for (size_t k = sorted.size(); k >= 1; --k) {
    level = (static_cast<double>(stream_values) + prefix) / static_cast<double>(k);
    if (level >= static_cast<double>(sorted[k - 1])) break;
    prefix -= static_cast<double>(sorted[k - 1]);
  }
  std::vector<double> quotas(loads.size());
  for (size_t p = 0; p < loads.size(); ++p)
    quotas[p] = std::max(0.0, level - static_cast<double>(loads[p]));
  return quotas;
}

// Places small variables whole, largest first, each on the least-loaded task; returns the loads.
std::vector<size_t> place_small(const ParamSet& layout, const std::vector<size_t>& small,
                                int num_ps, std::vector<Shard>& shards) {
  std::vector<size_t> order = small;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return layout.values(a).size() > layout.values(b).size();
  });
  std::vector<size_t> loads(static_cast<size_t>(num_ps), 0);
  for (size_t t : order) {
    // min_element returns the first minimum: ties go to the lowest index.
    const int ps = static_cast<int>(std::min_element(loads.begin(), loads.end()) - loads.begin());
    shards.push_back(whole_tensor(layout, t, ps));
    loads[static_cast<size_t>(ps)] += layout.values(t).size();
  }
  return loads;
}

// Cuts the stream of large variables at row boundaries: task p takes [cut[p], cut[p+1]).
void place_stream(const ParamSet& layout, const std::vector<StreamPiece>& pieces,
                  const std::vector<size_t>& loads, std::vector<Shard>& shards) {
  const size_t total = pieces.back().end();
  const std::vector<double> quotas = stream_quotas(loads, total);
  const size_t num_ps = loads.size();
  std::vector<size_t> cut(num_ps + 1, 0);
  double cumulative = 0;
  for (size_t p = 0; p < num_ps; ++p) {
    cumulative += quotas[p];
    // The quotas sum to the stream mathematically; the last cut is pinned against rounding.
    cut[p + 1] = p + 1 == num_ps ? total : nearest_row_boundary(pieces, cumulative);
  }
  for (size_t p = 0; p < num_ps; ++p) {
    for (const StreamPiece& piece : pieces) {
      const size_t lo = std::max(cut[p], piece.stream_begin);
      const size_t hi = std::min(cut[p + 1], piece.end());
      if (lo >= hi) continue;
      const size_t row_begin = (lo - piece.stream_begin) / piece.row_size;
      const size_t row_end = (hi - piece.stream_begin) / piece.row_size;
      const size_t base = layout.offset(piece.tensor);
      shards.push_back(Shard{static_cast<int>(p), piece.tensor, row_begin, row_end,
                             base + row_begin * piece.row_size, base + row_end * piece.row_size});
    }
  }
}

std::vector<Shard> balanced(const ParamSet& layout, int num_ps, size_t min_shard_bytes) {
  std::vector<size_t> small;
  std::vector<StreamPiece> pieces;
  size_t stream_values = 0;
  for (size_t t = 0; t < layout.count(); ++t) {
    const size_t values = layout.values(t).size();
    if (values * sizeof(float) <= min_shard_bytes) {
      small.push_back(t);
      continue;
    }
    pieces.push_back(StreamPiece{t, stream_values, layout.rows(t), row_size(layout, t)});
    stream_values += values;
  }
  std::vector<Shard> shards;
  const std::vector<size_t> loads = place_small(layout, small, num_ps, shards);
  if (!pieces.empty()) place_stream(layout, pieces, loads, shards);
  return shards;
}

std::vector<Shard> round_robin(const ParamSet& layout, int num_ps) {
  std::vector<Shard> shards;
  for (size_t t = 0; t < layout.count(); ++t)
    shards.push_back(whole_tensor(layout, t, static_cast<int>(t % static_cast<size_t>(num_ps))));
  return shards;
}

}  // namespace

Placement parse_placement(std::string_view name) {
  if (name == "balanced") return Placement::kBalanced;
  if (name == "round_robin") return Placement::kRoundRobin;
  throw UsageError(
      fmt::format("--placement {}: unknown placement; choose one of balanced, round_robin", name));
}

std::string_view placement_name(Placement placement) {
  return placement == Placement::kBalanced ? "balanced" : "round_robin";
}

size_t PartitionMap::bytes_on(int ps) const {
  size_t values = 0;
  for (size_t i : shards_of_ps.at(static_cast<size_t>(ps))) values += shards[i].size();
  return values * sizeof(float);
}

// Cuts every shard longer than max_bytes into row ranges of at most max_bytes (at least one row
// each), so that a large variable travels as several frames that the ps applies and returns one
// by one while the next is still arriving.
std::vector<Shard> cut_long_shards(const ParamSet& layout, const std::vector<Shard>& shards,
                                   size_t max_bytes) {
  std::vector<Shard> cut;
  for (const Shard& shard : shards) {
    const size_t rows = shard.row_end - shard.row_begin;
    const size_t row_size = rows > 0 ? shard.size() / rows : 0;
    const size_t max_rows = std::max<size_t>(1, max_bytes / std::max<size_t>(1, row_size * 4));
    if (rows <= max_rows) {
      cut.push_back(shard);
      continue;
    }
    const size_t pieces = (rows + max_rows - 1) / max_rows;
    for (size_t k = 0; k < pieces; ++k) {
      // Even pieces: the first rows % pieces get one row more.
      const size_t begin = shard.row_begin + k * (rows / pieces) + std::min(k, rows % pieces);
      const size_t end = begin + rows / pieces + (k < rows % pieces ? 1 : 0);
      const size_t base = layout.offset(shard.tensor);
      cut.push_back(Shard{shard.ps, shard.tensor, begin, end, base + begin * row_size,
                          base + end * row_size});
    }
  }
  return cut;
}

PartitionMap make_partition(const ParamSet& layout, int num_ps, Placement placement,
                            size_t min_shard_bytes, size_t max_shard_bytes) {
  if (num_ps < 1) {
    throw UsageError(
        fmt::format("partition over {} ps tasks: need at least one (--ps / --ps_hosts)", num_ps));
  }
  PartitionMap map;
  map.shards = placement == Placement::kBalanced ? balanced(layout, num_ps, min_shard_bytes)
                                                 : round_robin(layout, num_ps);
  if (max_shard_bytes > 0) map.shards = cut_long_shards(layout, map.shards, max_shard_bytes);
  std::sort(map.shards.begin(), map.shards.end(), [](const Shard& a, const Shard& b) {
    return std::tie(a.ps, a.tensor, a.row_begin) < std::tie(b.ps, b.tensor, b.row_begin);
  });
  map.shards_of_ps.resize(static_cast<size_t>(num_ps));
  for (size_t i = 0; i < map.shards.size(); ++i)
    map.shards_of_ps[static_cast<size_t>(map.shards[i].ps)].push_back(i);
  return map;
}

uint64_t partition_fingerprint(const ParamSet& layout, const PartitionMap& map) {
  // FNV-1a over a canonical text: stable across builds and hosts, which std::hash is not.
  std::string text;
  for (const ParamSpec& spec : layout.specs()) {
    text += spec.name;
    for (int64_t d : spec.shape) text += fmt::format(",{}", d);
    text += ';';
  }
  for (const Shard& s : map.shards)
    text += fmt::format("{}:{}:{}-{};", s.ps, s.tensor, s.row_begin, s.row_end);
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (char ch : text) {
    hash ^= static_cast<unsigned char>(ch);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

void check_map_matches(const std::vector<ParamSpec>& specs, const PartitionMap& map) {
  for (size_t i = 0; i < map.shards.size(); ++i) {
    const Shard& shard = map.shards[i];
    bool ok = shard.tensor < specs.size() && shard.begin <= shard.end;
    if (ok) {
      const Shape& shape = specs[shard.tensor].shape;
      const size_t rows = shape.empty() || shape[0] == 0 ? 1 : static_cast<size_t>(shape[0]);
      const size_t row_size = static_cast<size_t>(num_elements(shape)) / rows;
      ok = shard.row_begin <= shard.row_end && shard.row_end <= rows &&
           shard.size() == (shard.row_end - shard.row_begin) * row_size;
    }
    if (!ok) {
      throw Error(fmt::format(
          "partition map does not match the model: shard {} (variable {}, rows {}..{}) is not "
          "a row range of a variable of {} given",
          i, shard.tensor, shard.row_begin, shard.row_end, specs.size()));
    }
  }
}

}  // namespace dtrain
