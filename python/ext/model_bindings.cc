// dtrain.Model's engine; not built yet.
#include "ext/bindings.h"

namespace dtrain::python {

void bind_model(pybind11::module_& /*m*/) {}

}  // namespace dtrain::python
