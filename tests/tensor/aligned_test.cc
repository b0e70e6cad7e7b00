#include "tensor/aligned.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

namespace dtrain {
namespace {

uintptr_t address_of(const FloatBuffer& buffer) {
  return reinterpret_cast<uintptr_t>(buffer.data());
}

// The VmFlags line of the mapping in /proc/self/smaps that holds `address`, "" if none does.
// "hg" there is the kernel's record of MADV_HUGEPAGE, whatever its system-wide policy.
std::string vm_flags_at(uintptr_t address) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    const size_t dash = line.find('-');
    const size_t space = line.find(' ');
    if (dash != std::string::npos && space != std::string::npos && dash < space &&
        line.find(':') > space) {
      const uintptr_t begin = std::stoull(line.substr(0, dash), nullptr, 16);
      const uintptr_t end = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
      inside = begin <= address && address < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

bool has_flag(const std::string& vm_flags, const std::string& flag) {
  std::istringstream words(vm_flags);
  std::string word;
  while (words >> word) {
    if (word == flag) return true;
  }
  return false;
}

TEST(AlignedBuffer, SmallBuffersAreCacheLineAligned) {
  for (const size_t floats : {size_t{1}, size_t{17}, size_t{1000}, kOwnMappingBytes / 4 - 1}) {
    FloatBuffer buffer(floats, 1.0f);
    EXPECT_EQ(address_of(buffer) % 64, 0u) << floats << " floats";
    EXPECT_EQ(std::accumulate(buffer.begin(), buffer.end(), 0.0), static_cast<double>(floats));
  }
}

TEST(AlignedBuffer, LargeBuffersStartOnAHugePageAdvisedForHugePages) {
  for (const size_t floats : {kOwnMappingBytes / 4, kHugePageBytes / 4 + 3, size_t{5} << 20}) {
    FloatBuffer buffer(floats);
    std::iota(buffer.begin(), buffer.end(), 0.0f);
    EXPECT_EQ(address_of(buffer) % kHugePageBytes, 0u) << floats << " floats";
    EXPECT_EQ(buffer.back(), static_cast<float>(floats - 1));
    const std::string flags = vm_flags_at(address_of(buffer));
    ASSERT_FALSE(flags.empty()) << "no mapping holds the buffer of " << floats << " floats";
    EXPECT_TRUE(has_flag(flags, "hg")) << floats << " floats: " << flags;
    // The last float lies in the same advised mapping: the advice covers the whole buffer.
    const uintptr_t last = reinterpret_cast<uintptr_t>(&buffer.back());
    EXPECT_TRUE(has_flag(vm_flags_at(last), "hg")) << floats << " floats";
  }
}

TEST(AlignedBuffer, FreedLargeBuffersReturnTheirMapping) {
  uintptr_t address = 0;
  {
    FloatBuffer buffer(kHugePageBytes / 4, 2.0f);
    address = address_of(buffer);
    ASSERT_FALSE(vm_flags_at(address).empty());
  }
  EXPECT_EQ(vm_flags_at(address), "") << "the mapping outlived its buffer";
}

TEST(AlignedBuffer, GrowingAcrossTheThresholdKeepsTheValues) {
  FloatBuffer buffer(1000);
  std::iota(buffer.begin(), buffer.end(), 0.0f);
  buffer.resize(kHugePageBytes / 2);  // moves into a mapping of its own
  buffer.resize(500);
  buffer.shrink_to_fit();  // and back to the heap
  for (size_t i = 0; i < buffer.size(); ++i) ASSERT_EQ(buffer[i], static_cast<float>(i));
}

}  // namespace
}  // namespace dtrain
