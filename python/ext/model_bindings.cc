// dtrain.Model's door: fit's keywords as `dtrain train` arguments, and the engine's calls
// (ext/engine.h) as Python sees them.
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "ext/bindings.h"
#include "ext/engine.h"
#include "nn/model_zoo.h"
#include "plan/flags.h"

namespace py = pybind11;

namespace dtrain::python {
namespace {

// A flag's value as the command line would spell it: numbers as Python prints them (the shortest
// text that reads back as the same float), lists joined by the flag's delimiter.
std::string flag_text(const FlagSpec& flag, const py::handle& value) {
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    if (flag.delimiter == 0) {
      throw py::type_error(fmt::format("{}: takes one value, not a list", flag.name.substr(2)));
    }
    std::string text;
    for (const py::handle item : value) {
      if (!text.empty()) text += flag.delimiter;
      text += py::str(item).cast<std::string>();
    }
    return text;
  }
  return py::str(value).cast<std::string>();
}

// fit's keywords as `dtrain train` arguments: each a flag of the run plan under its own name;
// None leaves the flag to its default (the model's recipe, then the table's).
std::vector<std::string> flag_arguments(const py::dict& keywords) {
  std::vector<std::string> arguments;
  for (const auto& [key, value] : keywords) {
    const std::string name = "--" + key.cast<std::string>();
    const FlagSpec* flag = find_flag(name);
    if (flag == nullptr || flag->hidden || std::holds_alternative<std::monostate>(flag->field)) {
      throw py::type_error(
          fmt::format("fit() got an unexpected keyword argument '{}': not a flag of dtrain train "
                      "(`dtrain train --help` lists them)",
                      key.cast<std::string>()));
    }
    if (value.is_none()) continue;
    if (flag->is_switch) {
      if (!py::isinstance<py::bool_>(value)) {
        throw py::type_error(
            fmt::format("{}: is a switch; give True or False", key.cast<std::string>()));
      }
      if (value.cast<bool>()) arguments.push_back(name);
      continue;
    }
    if (py::isinstance<py::bool_>(value)) {
      throw py::type_error(fmt::format("{}: takes a value, not {}", key.cast<std::string>(),
                                       value.cast<bool>() ? "True" : "False"));
    }
    arguments.push_back(name);
    arguments.push_back(flag_text(*flag, value));
  }
  return arguments;
}

}  // namespace

void bind_model(py::module_& m) {
  m.def("models", &model_names, "The names of the built-in models");
  m.def("flag_arguments", &flag_arguments, py::arg("keywords"),
        "fit's keywords as `dtrain train` arguments");
  py::class_<Engine>(m, "Engine")
      .def(py::init<const std::string&>(), py::arg("model"))
      .def_static("load", &Engine::load, py::arg("path"))
      .def_property_readonly("model_name", &Engine::model_name)
      .def_property_readonly("model_json", &Engine::model_json)
      .def_property_readonly("trained", &Engine::trained)
      .def("fit", &Engine::fit, py::arg("arguments"), py::arg("x").noconvert(),
           py::arg("y").noconvert(), py::arg("weights").noconvert(), py::arg("val_x").noconvert(),
           py::arg("val_y").noconvert(), py::arg("pixels"), py::arg("shuffle"), py::arg("on_event"),
           py::arg("on_text"), py::arg("wants_batches"))
      .def("evaluate", &Engine::evaluate, py::arg("x").noconvert(), py::arg("y").noconvert(),
           py::arg("precision"))
      .def("predict", &Engine::predict, py::arg("x").noconvert(), py::arg("logits"))
      .def("train_on_batch", &Engine::train_on_batch, py::arg("arguments"),
           py::arg("x").noconvert(), py::arg("y").noconvert(), py::arg("weights").noconvert())
      .def("get_weights", &Engine::get_weights)
      .def("weight_names", &Engine::weight_names)
      .def("set_weights", &Engine::set_weights, py::arg("arrays"))
      .def("summary_rows", &Engine::summary_rows)
      .def("save", &Engine::save, py::arg("dir"))
      .def("export_onnx", &Engine::export_onnx, py::arg("path"));
}

}  // namespace dtrain::python
