// A strategy built for one task of a run, with what the composition root (plan/run.h) tells it
// when the run ends early.
#pragma once

#include <exception>
#include <functional>
#include <memory>

#include "train/strategy.h"

namespace dtrain {

struct TaskStrategy {
  std::unique_ptr<Strategy> strategy;
  // The run failed or was stopped (a StopRequested) for this reason: tells the peers, so that
  // they stop at once rather than after their timeouts. Empty when there is no one to tell.
  std::function<void(const std::exception& why)> abort;
};

}  // namespace dtrain
