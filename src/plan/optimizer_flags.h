// The flag table's rows of the optimizer's hyper-parameters (--momentum, --rho, --weight_decay,
// the clipping flags, ...): what each means to which optimizer, and where checkpoints record it.
// plan/flags.cc places them after --optimizer.
#pragma once

#include <vector>

#include "plan/flags.h"

namespace dtrain {

std::vector<FlagSpec> optimizer_rows();

}  // namespace dtrain
