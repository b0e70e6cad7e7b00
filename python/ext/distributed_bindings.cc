// dtrain.distributed's collectives; not built yet.
#include "ext/bindings.h"

namespace dtrain::python {

void bind_distributed(pybind11::module_& /*m*/) {}

}  // namespace dtrain::python
