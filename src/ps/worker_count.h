// What a sync ps of an elastic job (--min_workers) says of its workers in every shard reply: how
// many are in the job, and the newest change, so that every worker can print that change's line.
#pragma once

#include <cstdint>

namespace dtrain {

struct WorkerCount {
  uint32_t changes = 0;  // changes so far; 0 with workers 0: the job is not elastic
  uint32_t left = 0;     // of which workers that left (the others joined)
  int32_t workers = 0;   // workers in the job now
  int32_t worker = -1;   // who the newest change was about
  uint8_t joined = 0;    // it joined (1) or left (0)
  int64_t step = 0;      // the step of this task's first shard then
  bool operator==(const WorkerCount&) const = default;
};

}  // namespace dtrain
