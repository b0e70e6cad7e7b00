// Shared pieces of the standalone Gloo / MPI all-reduce comparison benchmarks: size lists, the
// iteration budget, the correctness pattern and the result line, so both binaries report alike.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace compare {

inline constexpr std::size_t kKiB = 1024;
inline constexpr std::size_t kMiB = 1024 * 1024;

// Warm-ups also absorb first-touch page faults and lazy connection setup inside the libraries.
inline constexpr int kWarmupIters = 3;
inline constexpr double kTargetSeconds = 1.5;
inline constexpr int kMinIters = 10;
inline constexpr int kMaxIters = 3000;

inline std::vector<std::size_t> DefaultSizes() {
  return {4 * kKiB, 16 * kKiB, 64 * kKiB, 256 * kKiB, 1 * kMiB, 4 * kMiB, 16 * kMiB, 64 * kMiB};
}

// "64K" = 64 KiB, "4M" = 4 MiB, a bare number is bytes. Sizes must hold whole float32 elements.
inline std::size_t ParseSize(std::string_view text) {
  if (text.empty()) throw std::invalid_argument("empty size");
  std::size_t multiplier = 1;
  const char suffix = text.back();
  if (suffix == 'K' || suffix == 'k') multiplier = kKiB;
  if (suffix == 'M' || suffix == 'm') multiplier = kMiB;
  if (multiplier != 1) text.remove_suffix(1);
  std::size_t consumed = 0;
  const std::string digits(text);
  const unsigned long long value = std::stoull(digits, &consumed);
  if (consumed != digits.size() || value == 0) {
    throw std::invalid_argument("bad size '" + digits + "'");
  }
  const std::size_t bytes = static_cast<std::size_t>(value) * multiplier;
  if (bytes % sizeof(float) != 0) {
    throw std::invalid_argument("size " + std::to_string(bytes) + " is not a multiple of 4");
  }
  return bytes;
}

inline std::vector<std::size_t> ParseSizeList(std::string_view list) {
  std::vector<std::size_t> sizes;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    sizes.push_back(ParseSize(list.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  if (sizes.empty()) throw std::invalid_argument("empty --bytes list");
  return sizes;
}

// Depends on rank and index so a misplaced chunk is caught, and stays a small integer so the
// float sum is exact in any reduction order.
inline float PatternValue(int rank, std::size_t index) {
  return static_cast<float>((rank + 1) * static_cast<int>(index % 251 + 1));
}

inline void FillPattern(std::vector<float>& buffer, int rank) {
  for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = PatternValue(rank, i);
}

// Returns a description of the first wrong element, if any.
inline std::optional<std::string> CheckSum(const std::vector<float>& buffer, int ranks) {
  const int rank_sum = ranks * (ranks + 1) / 2;
  for (std::size_t i = 0; i < buffer.size(); ++i) {
    const float expected = static_cast<float>(rank_sum * static_cast<int>(i % 251 + 1));
    if (buffer[i] != expected) {
      return "element " + std::to_string(i) + " is " + std::to_string(buffer[i]) + ", expected " +
             std::to_string(expected);
    }
  }
  return std::nullopt;
}

// Decided on rank 0 from the warm-up time and shared with the others so ranks stay in lockstep.
inline int IterationsFor(double seconds_per_iter) {
  if (!(seconds_per_iter > 0.0)) return kMaxIters;
  const double wanted = std::ceil(kTargetSeconds / seconds_per_iter);
  return static_cast<int>(std::clamp(wanted, double{kMinIters}, double{kMaxIters}));
}

inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

inline void PrintResult(const std::string& impl, int ranks, std::size_t bytes,
                        double median_seconds) {
  const double algbw = static_cast<double>(bytes) / median_seconds / 1e9;
  const double busbw = algbw * 2.0 * (ranks - 1) / ranks;
  std::printf("impl=%s ranks=%d bytes=%zu median_ms=%.3f algbw_GBps=%.2f busbw_GBps=%.2f\n",
              impl.c_str(), ranks, bytes, median_seconds * 1e3, algbw, busbw);
  std::fflush(stdout);
}

}  // namespace compare
