// How much memory this machine has, and this process may allocate: the bound above which a model or
// a data file is refused before anything is allocated for it, instead of ending in std::bad_alloc
// or the kernel's OOM killer.
#pragma once

#include <cstdint>
#include <string>

namespace dtrain {

// The physical memory of this machine (sysconf: _SC_PHYS_PAGES · _SC_PAGE_SIZE), or the memory
// limit of this process's cgroup (v2 memory.max) where that is lower, as in a Kubernetes pod.
// Physical memory rather than MemAvailable: the bound must not depend on what else happens to run,
// so the same input is refused or accepted every time on the same machine.
uint64_t machine_memory_bytes();

// The most a model or a data set may ask this process to allocate, and how a refusal states it.
struct AllocationLimit {
  uint64_t bytes = 0;
  // What a refusal says after "more than ": "the 23.4 GiB of memory this machine has", or "the
  // 3.9 GiB this process may still map under its address-space limit of 4.0 GiB (RLIMIT_AS,
  // ulimit -v)".
  std::string text;
};

// machine_memory_bytes(), or less where this process's own limits leave less: RLIMIT_AS (`ulimit
// -v`) less the address space it maps already (VmSize), and RLIMIT_DATA (`ulimit -d`) less its
// data mappings (VmData). Under such a limit an allocation fails with std::bad_alloc long before
// physical memory runs out, so the check before allocating must know it. Read on every call, as
// what the process maps changes.
AllocationLimit allocation_limit();

// `bytes` stated as this machine's memory: for tests that pretend a machine of that size.
AllocationLimit machine_allocation_limit(uint64_t bytes);

// "23.4 GiB", "1.5 MiB", "5000 bytes": from 1 MiB on, in the largest binary unit that leaves at
// least 1; below it, exactly.
std::string format_bytes(uint64_t bytes);

}  // namespace dtrain
