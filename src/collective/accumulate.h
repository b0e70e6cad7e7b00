// The reduction of the all-reduce algorithms, on their critical path.
#pragma once

#include <span>

namespace dtrain {

// into = (into + received) * scale. A scale other than 1 is the average's division, folded into
// the last reduction so that it costs no pass of its own. REQUIRES: equal sizes.
void accumulate(std::span<float> into, std::span<const float> received, float scale);

}  // namespace dtrain
