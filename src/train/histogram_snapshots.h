// Copies of the variables and their gradients for --summary_steps' histograms, taken between steps
// and handed to the run log, whose sink bins them on its own thread while training goes on.
#pragma once

#include <memory>
#include <vector>

#include "metrics/run_log.h"
#include "nn/param_set.h"

namespace dtrain {

class HistogramSnapshots {
 public:
  // The values of params and grads now, tagged by name ("gradients_on_average/<var>" for a
  // gradient). The copies go into the previous snapshot's buffers once every sink let go of them,
  // so a summary step costs a copy and no page faults. Not thread-safe: one caller, the loop.
  std::shared_ptr<const std::vector<NamedValues>> take(const ParamSet& params,
                                                       const GradSet& grads);

 private:
  std::shared_ptr<std::vector<NamedValues>> buffers_;
};

}  // namespace dtrain
