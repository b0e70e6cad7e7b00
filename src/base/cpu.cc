#include "base/cpu.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace dtrain {

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::optional<int> bind_to_core(int index) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (index < 0 || sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return std::nullopt;
  for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed) || seen++ != index) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) return std::nullopt;
    return cpu;
  }
  return std::nullopt;
}

}  // namespace dtrain
