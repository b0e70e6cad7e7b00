// The parts of the _dtrain extension module, one file each, all registered by module.cc.
#pragma once

#include <pybind11/pybind11.h>

namespace dtrain::python {

// dtrain.Model and dtrain.load: training, evaluation, prediction, checkpoints and ONNX from numpy
// (model_bindings.cc), and the exceptions every part raises.
void bind_errors(pybind11::module_& m);
void bind_model(pybind11::module_& m);
// dtrain.distributed: a rank's collectives on numpy arrays (distributed_bindings.cc).
void bind_distributed(pybind11::module_& m);

}  // namespace dtrain::python
