// How many cores this process may run on, and binding to one of them.
#pragma once

#include <optional>

namespace dtrain {

// The CPUs in this process's affinity mask (taskset, cgroup cpusets), at least 1. Unlike
// std::thread::hardware_concurrency it does not count cores the process may not use.
int available_cores();

// Binds the calling thread, and the threads it starts afterwards, to the `index`-th CPU of its
// affinity mask, as `mpirun --bind-to core` binds its ranks. Returns that CPU's number, or nullopt
// where the mask has no such CPU or the kernel refused (the thread is then left as it was).
std::optional<int> bind_to_core(int index);

}  // namespace dtrain
