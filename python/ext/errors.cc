// dtrain's exceptions as Python's: dtrain.Error and one subclass per kind of failure, raised with
// the library's message. A bad flag or data file is also a ValueError, as Python code expects of a
// bad argument; a stop request (Ctrl-C) is a KeyboardInterrupt.
#include <Python.h>

#include <exception>

#include "base/error.h"
#include "ext/bindings.h"

namespace py = pybind11;

namespace dtrain::python {
namespace {

// A new exception class dtrain.<name> with these bases, kept alive by the module that holds it.
PyObject* new_exception(py::module_& m, const char* name, py::tuple bases) {
  const std::string qualified = std::string("dtrain.") + name;
  PyObject* type = PyErr_NewException(qualified.c_str(), bases.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(type));
  return type;
}

}  // namespace

void bind_errors(py::module_& m) {
  py::handle value_error(PyExc_ValueError);
  py::handle os_error(PyExc_OSError);
  static PyObject* error =
      new_exception(m, "Error", py::make_tuple(py::handle(PyExc_RuntimeError)));
  py::handle base(error);
  static PyObject* usage = new_exception(m, "UsageError", py::make_tuple(base, value_error));
  static PyObject* data = new_exception(m, "DataError", py::make_tuple(base, value_error));
  static PyObject* checkpoint = new_exception(m, "CheckpointError", py::make_tuple(base));
  static PyObject* io = new_exception(m, "IoError", py::make_tuple(base, os_error));
  static PyObject* transport = new_exception(m, "TransportError", py::make_tuple(base));
  static PyObject* collective =
      new_exception(m, "CollectiveError", py::make_tuple(py::handle(transport)));
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const StopRequested& e) {
      PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
    } catch (const UsageError& e) {
      PyErr_SetString(usage, e.what());
    } catch (const DataError& e) {
      PyErr_SetString(data, e.what());
    } catch (const CheckpointError& e) {
      PyErr_SetString(checkpoint, e.what());
    } catch (const IoError& e) {
      PyErr_SetString(io, e.what());
    } catch (const CollectiveError& e) {
      PyErr_SetString(collective, e.what());
    } catch (const TransportError& e) {
      PyErr_SetString(transport, e.what());
    } catch (const Error& e) {
      PyErr_SetString(error, e.what());
    }
  });
}

}  // namespace dtrain::python
