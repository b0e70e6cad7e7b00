// The _dtrain extension module: the library's doors for Python. python/dtrain/*.py is the API
// users import; this module is what those files call.
#include "ext/bindings.h"

PYBIND11_MODULE(_dtrain, m) {
  m.doc() = "dtrain's library, for the dtrain package (import dtrain)";
  dtrain::python::bind_errors(m);
  dtrain::python::bind_model(m);
  dtrain::python::bind_distributed(m);
}
