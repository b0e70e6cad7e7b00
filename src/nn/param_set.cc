// ParamSet arena layout.
#include "nn/param_set.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.h"
#include "tensor/thread_team.h"

namespace dtrain {
namespace {
constexpr size_t kAlignFloats = 16;  // 64 bytes
size_t round_up(size_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }
}  // namespace

ParamSet::ParamSet(std::vector<ParamSpec> specs) : specs_(std::move(specs)) {
  size_t offset = 0;
  for (const ParamSpec& spec : specs_) {
    offsets_.push_back(offset);
    sizes_.push_back(static_cast<size_t>(num_elements(spec.shape)));
    offset += round_up(sizes_.back());
  }
  arena_.assign(offset, 0.0f);
}

std::optional<size_t> ParamSet::find(std::string_view name) const {
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (specs_[i].name == name) return i;
  }
  return std::nullopt;
}

size_t ParamSet::index(std::string_view name) const {
  if (auto i = find(name)) return *i;
  throw Error(fmt::format("no parameter named '{}'", name));
}

void ParamSet::zero() { std::fill(arena_.begin(), arena_.end(), 0.0f); }

void ParamSet::copy_from(const ParamSet& other) {
  if (other.arena_.size() != arena_.size())
    throw Error("copy between parameter sets of different layouts");
  std::copy(other.arena_.begin(), other.arena_.end(), arena_.begin());
}

int64_t ParamSet::num_values() const {
  int64_t n = 0;
  for (size_t s : sizes_) n += static_cast<int64_t>(s);
  return n;
}

void parallel_tensor_rows(const ParamSet& layout,
                          const std::function<void(int, size_t, size_t, size_t)>& fn) {
  const int parts = parallel_parts();
  auto run_part = [&](int p) {
    for (size_t t = 0; t < layout.count(); ++t) {
      const size_t rows = layout.rows(t), row_size = layout.values(t).size() / rows;
      const size_t begin = split_point(rows, parts, p) * row_size;
      const size_t end = split_point(rows, parts, p + 1) * row_size;
      if (begin < end) fn(p, t, layout.offset(t) + begin, layout.offset(t) + end);
    }
  };
  if (parts == 1) {
    run_part(0);
  } else {
    ThreadTeam::current()->run(run_part);
  }
}

}  // namespace dtrain
