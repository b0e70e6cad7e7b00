// How much memory this machine has: the bound above which a model or a data file is refused before
// anything is allocated for it, instead of ending in std::bad_alloc or the kernel's OOM killer.
#pragma once

#include <cstdint>
#include <string>

namespace dtrain {

// The physical memory of this machine (sysconf: _SC_PHYS_PAGES · _SC_PAGE_SIZE), or the memory
// limit of this process's cgroup (v2 memory.max) where that is lower, as in a Kubernetes pod.
// Physical memory rather than MemAvailable: the bound must not depend on what else happens to run,
// so the same input is refused or accepted every time on the same machine.
uint64_t machine_memory_bytes();

// "23.4 GiB", "1.5 MiB", "5000 bytes": from 1 MiB on, in the largest binary unit that leaves at
// least 1; below it, exactly.
std::string format_bytes(uint64_t bytes);

}  // namespace dtrain
