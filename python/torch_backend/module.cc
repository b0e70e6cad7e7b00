// The _dtrain_torch extension module: the creator that torch.distributed calls for the "dtrain"
// backend (python/dtrain/torch.py registers it). torch must be imported first, so that its
// pybind11 types (Store, ProcessGroup) are known here.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group_dtrain.h"
#include "store_rendezvous.h"

namespace py = pybind11;

PYBIND11_MODULE(_dtrain_torch, m) {
  m.doc() = "dtrain's torch.distributed backend, for dtrain.torch";
  m.def(
      "create_process_group",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
         std::chrono::milliseconds timeout) -> c10::intrusive_ptr<c10d::ProcessGroup> {
        return c10::make_intrusive<dtrain::torch_backend::ProcessGroupDtrain>(
            dtrain::torch_backend::join_through_store(store, rank, world_size, timeout));
      },
      py::arg("store"), py::arg("rank"), py::arg("world_size"), py::arg("timeout"),
      py::call_guard<py::gil_scoped_release>(),
      "The dtrain ProcessGroup of this rank, formed through `store` (torch.distributed's "
      "creator for a registered backend).");
}
