// Binding a thread to one of the CPUs it may use, as bench allreduce binds its ranks.
#include "base/cpu.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <optional>
#include <thread>

namespace dtrain {
namespace {

// The CPUs the calling thread may run on now.
cpu_set_t allowed_now() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  return set;
}

TEST(BindToCore, BindsTheCallingThreadToTheIndexthAllowedCpuAndNoOther) {
  const int cores = available_cores();
  for (int index = 0; index < cores; ++index) {
    // On a thread of its own, so the test's own thread keeps every CPU.
    std::thread([&] {
      const cpu_set_t before = allowed_now();
      int expected = -1;
      for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE && expected < 0; ++cpu) {
        if (CPU_ISSET(cpu, &before) && seen++ == index) expected = cpu;
      }
      const std::optional<int> bound = bind_to_core(index);
      ASSERT_TRUE(bound.has_value()) << "index " << index;
      EXPECT_EQ(*bound, expected);
      const cpu_set_t after = allowed_now();
      EXPECT_EQ(CPU_COUNT(&after), 1);
      EXPECT_TRUE(CPU_ISSET(expected, &after));
    }).join();
  }
  const cpu_set_t mine = allowed_now();
  EXPECT_EQ(CPU_COUNT(&mine), cores);
}

TEST(BindToCore, AnIndexPastTheAllowedCpusLeavesTheThreadAsItWas) {
  std::thread([] {
    const cpu_set_t before = allowed_now();
    EXPECT_FALSE(bind_to_core(available_cores()).has_value());
    EXPECT_FALSE(bind_to_core(-1).has_value());
    const cpu_set_t after = allowed_now();
    EXPECT_EQ(CPU_COUNT(&after), CPU_COUNT(&before));
  }).join();
}

}  // namespace
}  // namespace dtrain
