// How many cores this process may run on.
#pragma once

namespace dtrain {

// The CPUs in this process's affinity mask (taskset, cgroup cpusets), at least 1. Unlike
// std::thread::hardware_concurrency it does not count cores the process may not use.
int available_cores();

}  // namespace dtrain
