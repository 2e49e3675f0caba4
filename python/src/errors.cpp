#include "errors.h"

#include <exception>

#include "turbodecode/error.h"

namespace nb = nanobind;

namespace turbodecode::python {
namespace {

PyObject* error_type = nullptr;
PyObject* invalid_argument_type = nullptr;
PyObject* cuda_error_type = nullptr;

PyObject* new_exception_type(const char* name, const char* doc, PyObject* bases) {
  PyObject* type = PyErr_NewExceptionWithDoc(name, doc, bases, nullptr);
  if (!type) throw nb::python_error();
  return type;
}

// Raises `type(message)` with the given attributes set on the instance.
void raise(PyObject* type, const char* message,
           std::initializer_list<std::pair<const char*, nb::object>> attributes) {
  nb::object instance = nb::steal(PyObject_CallFunction(type, "s", message));
  if (!instance.is_valid()) return;  // the constructor raised; that error stands
  for (const auto& [name, value] : attributes) nb::setattr(instance, name, value);
  PyErr_SetObject(type, instance.ptr());
}

void translate(const std::exception_ptr& exception, void*) {
  try {
    std::rethrow_exception(exception);
  } catch (const InvalidArgument& e) {
    raise(invalid_argument_type, e.what(),
          {{"argument", nb::str(e.argument().c_str())}, {"rule", nb::str(e.rule().c_str())}});
  } catch (const CudaError& e) {
    raise(cuda_error_type, e.what(),
          {{"call", nb::str(e.call().c_str())}, {"code", nb::int_(e.code())}});
  } catch (const Error& e) {
    raise(error_type, e.what(), {});
  }
}

}  // namespace

void register_errors(nb::module_& m) {
  error_type =
      new_exception_type("turbodecode.Error", "Base of every error the turbodecode library raises.",
                         PyExc_RuntimeError);
  nb::object invalid_bases = nb::make_tuple(nb::handle(error_type), nb::handle(PyExc_ValueError));
  invalid_argument_type = new_exception_type(
      "turbodecode.InvalidArgument",
      "An argument broke a rule; nothing was written. .argument names it, .rule says why.",
      invalid_bases.ptr());
  cuda_error_type = new_exception_type(
      "turbodecode.CudaError", "A CUDA call or kernel launch failed; .call names it.", error_type);
  m.attr("Error") = nb::handle(error_type);
  m.attr("InvalidArgument") = nb::handle(invalid_argument_type);
  m.attr("CudaError") = nb::handle(cuda_error_type);
  nb::register_exception_translator(translate);
}

void throw_type_error(const char* argument, const std::string& rule) {
  throw nb::type_error((std::string("argument '") + argument + "': " + rule).c_str());
}

}  // namespace turbodecode::python
