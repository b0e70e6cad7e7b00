// The _dtrain extension module: the library's doors for Python. python/dtrain/*.py is the API
// users import; this module is what those files call.
#include <spdlog/spdlog.h>

#include "ext/bindings.h"

PYBIND11_MODULE(_dtrain, m) {
  m.doc() = "dtrain's library, for the dtrain package (import dtrain)";
  // The library's log lines (a ps task's link set up, a peer's retry) are a command line's
  // diagnostics; in a Python program only warnings and errors are worth its stderr.
  spdlog::set_level(spdlog::level::warn);
  dtrain::python::bind_errors(m);
  dtrain::python::bind_model(m);
  dtrain::python::bind_distributed(m);
}
