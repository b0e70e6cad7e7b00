// dtrain.distributed's engine: a RankGroup formed as `dtrain task` forms a launched cluster (the
// launcher's rank, the rendezvous, the cluster secret), and its collectives on numpy arrays, in
// place, with the GIL released while they run.
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "cluster/bind_address.h"
#include "cluster/cluster_secret.h"
#include "cluster/launch_env.h"
#include "cluster/rendezvous.h"
#include "collective/rank_group.h"
#include "ext/bindings.h"

namespace py = pybind11;

namespace dtrain::python {
namespace {

// The launcher's rank and world, read as `dtrain task` reads them, or the caller's own.
LaunchEnv launch_env_of(std::optional<int> rank, std::optional<int> world_size,
                        const std::string& rendezvous) {
  if (!rank && !world_size) {
    std::optional<LaunchEnv> env = launch_env_from(process_env(), rendezvous);
    if (!env) {
      throw UsageError(
          "dtrain.distributed.init(): no launcher gives this process a rank (mpirun, srun, "
          "torchrun-style RANK and WORLD_SIZE); start it under one, or pass rank=, world_size= "
          "and rendezvous=\"HOST:PORT\"");
    }
    return *env;
  }
  if (!rank || !world_size) {
    throw UsageError(fmt::format(
        "dtrain.distributed.init({}=...): give rank= and world_size= together, or neither to take "
        "them from the launcher",
        rank ? "rank" : "world_size"));
  }
  if (*world_size < 1 || *rank < 0 || *rank >= *world_size) {
    throw UsageError(
        fmt::format("dtrain.distributed.init(rank={}, world_size={}): the rank must "
                    "be one of 0..world_size-1",
                    *rank, *world_size));
  }
  LaunchEnv env;
  env.source = "dtrain.distributed.init(rank=, world_size=)";
  env.rank = *rank;
  env.world_size = *world_size;
  env.world_size_variable = "world_size";
  if (*world_size > 1) {
    if (rendezvous.empty()) {
      throw UsageError(fmt::format(
          "dtrain.distributed.init(rank={}, world_size={}): give rendezvous=\"HOST:PORT\", where "
          "rank 0 listens for the others",
          *rank, *world_size));
    }
    env.rendezvous = parse_host_port("rendezvous", rendezvous);
    env.rendezvous_source = "rendezvous=";
  }
  return env;
}

std::unique_ptr<RankGroup> join(std::optional<int> rank, std::optional<int> world_size,
                                const std::string& rendezvous_address,
                                const std::string& secret_file, double timeout_s) {
  if (!(timeout_s > 0)) {
    throw UsageError(
        fmt::format("dtrain.distributed.init(timeout={}): must be positive seconds", timeout_s));
  }
  const LaunchEnv env = launch_env_of(rank, world_size, rendezvous_address);
  RankGroupOptions options;
  options.rank = env.rank;
  options.world_size = env.world_size;
  options.timeout_ms = static_cast<int>(std::min(timeout_s * 1000, double{INT_MAX}));
  if (env.world_size == 1) {
    return std::make_unique<RankGroup>(options, HostPort{"127.0.0.1", 0}, nullptr);
  }
  options.secret = required_cluster_secret(secret_file, process_env(), env.world_size, env.source,
                                           "secret_file=PATH");
  RendezvousOptions meet;
  meet.address = env.rendezvous;
  meet.source = env.rendezvous_source;
  meet.rank = env.rank;
  meet.world_size = env.world_size;
  meet.secret = options.secret;
  meet.timeout_ms = options.timeout_ms;
  const std::vector<HostPort> ranks = rendezvous(meet);
  options.ranks_on_host = ranks_on_host_of(ranks, env.rank);
  const HostPort& own = ranks[static_cast<size_t>(env.rank)];
  return std::make_unique<RankGroup>(options, HostPort{bind_address_for(own, "").host, own.port},
                                     [&](const HostPort&) { return ranks; });
}

std::string type_name(const py::handle& object) {
  return py::str(py::type::of(object).attr("__name__"));
}

// The array behind `a`, which the collective will write in place: an ndarray (anything else would
// be converted, and the result lost), C-contiguous and writeable. Its buffer stays claimed (no
// resize) while the returned view lives.
py::buffer_info writable_array(const py::handle& a, const char* call) {
  if (!py::isinstance<py::array>(a)) {
    throw py::type_error(fmt::format(
        "dtrain.distributed.{}: expected a numpy.ndarray, got {}: collectives work in place", call,
        type_name(a)));
  }
  const auto array = py::reinterpret_borrow<py::array>(a);
  if (!(array.flags() & py::array::c_style)) {
    throw py::value_error(fmt::format(
        "dtrain.distributed.{}: the array is not C-contiguous (a strided slice or a transposed "
        "view); collectives work in place on contiguous memory: pass np.ascontiguousarray(a) and "
        "use that array afterwards",
        call));
  }
  if (!array.writeable()) {
    throw py::value_error(fmt::format(
        "dtrain.distributed.{}: the array is read-only; the result is written into it", call));
  }
  return array.request(/*writable=*/true);
}

std::span<float> float32_span(const py::handle& a, const char* call) {
  if (py::isinstance<py::array>(a) &&
      !py::reinterpret_borrow<py::array>(a).dtype().is(py::dtype::of<float>())) {
    throw py::type_error(fmt::format(
        "dtrain.distributed.{}: the array's dtype is {}; dtrain reduces float32 arrays in place: "
        "pass a.astype(np.float32) and use that array afterwards",
        call, std::string(py::str(py::reinterpret_borrow<py::array>(a).dtype()))));
  }
  const py::buffer_info buffer = writable_array(a, call);
  return {static_cast<float*>(buffer.ptr), static_cast<size_t>(buffer.size)};
}

ReduceOp reduce_op(const std::string& op) {
  if (op == "sum") return ReduceOp::kSum;
  if (op == "mean") return ReduceOp::kAverage;
  throw UsageError(
      fmt::format("dtrain.distributed.allreduce(op=\"{}\"): expected \"sum\" or \"mean\"", op));
}

}  // namespace

void bind_distributed(py::module_& m) {
  py::class_<RankGroup>(m, "RankGroup",
                        "This process's place among the ranks (dtrain.distributed's engine).")
      .def(py::init(&join), py::arg("rank") = py::none(), py::arg("world_size") = py::none(),
           py::arg("rendezvous") = "", py::arg("secret_file") = "", py::arg("timeout") = 60.0,
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("rank", &RankGroup::rank)
      .def_property_readonly("world_size", &RankGroup::size)
      .def(
          "allreduce",
          [](RankGroup& group, const py::handle& a, const std::string& op) {
            const std::span<float> data = float32_span(a, "allreduce");
            const ReduceOp reduce = reduce_op(op);
            py::gil_scoped_release release;
            group.communicator().allreduce(data, reduce);
          },
          py::arg("a"), py::arg("op") = "sum")
      .def(
          "broadcast",
          [](RankGroup& group, const py::handle& a, int root) {
            const py::buffer_info buffer = writable_array(a, "broadcast");
            if (py::reinterpret_borrow<py::array>(a).dtype().attr("hasobject").cast<bool>()) {
              throw py::type_error(
                  "dtrain.distributed.broadcast: the array holds Python objects, which are "
                  "pointers into this process; broadcast numbers");
            }
            const std::span<std::byte> bytes(static_cast<std::byte*>(buffer.ptr),
                                             static_cast<size_t>(buffer.size * buffer.itemsize));
            py::gil_scoped_release release;
            group.communicator().broadcast_bytes(bytes, root);
          },
          py::arg("a"), py::arg("root") = 0)
      .def(
          "barrier", [](RankGroup& group) { group.communicator().barrier(); },
          py::call_guard<py::gil_scoped_release>());
}

}  // namespace dtrain::python
