// tinycoral._native: the C++ API (include/tinycoral/) for Python, with numpy arrays for tensors.
// The pycoral-shaped modules (tinycoral.utils, tinycoral.adapters) are plain Python over this.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <tinycoral/tinycoral.hpp>

namespace py = pybind11;

namespace {

py::dtype numpy_dtype(tinycoral::DataType type) {
  switch (type) {
    case tinycoral::DataType::kFloat32:
      return py::dtype::of<float>();
    case tinycoral::DataType::kUInt8:
      return py::dtype::of<uint8_t>();
    case tinycoral::DataType::kInt8:
      return py::dtype::of<int8_t>();
    case tinycoral::DataType::kInt16:
      return py::dtype::of<int16_t>();
    case tinycoral::DataType::kInt32:
      return py::dtype::of<int32_t>();
    case tinycoral::DataType::kInt64:
      return py::dtype::of<int64_t>();
    case tinycoral::DataType::kBool:
      return py::dtype::of<bool>();
    case tinycoral::DataType::kOther:
      break;
  }
  throw tinycoral::Error("a tensor type numpy cannot hold");
}

py::dict details(const tinycoral::TensorInfo& t, size_t index) {
  py::dict d;
  d["name"] = t.name;
  d["index"] = index;
  d["shape"] = py::array_t<int32_t>(static_cast<py::ssize_t>(t.shape.size()), t.shape.data());
  d["dtype"] = numpy_dtype(t.type);
  d["bytes"] = t.bytes;
  d["quantization"] = py::make_tuple(t.quantization.scale, t.quantization.zero_point);
  return d;
}

// A numpy array over a tensor's memory; `owner` (the Python interpreter object) stays alive as
// long as the array does.
py::array view(const tinycoral::TensorInfo& t, const uint8_t* data, py::handle owner,
               bool writable) {
  std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
  py::array a(numpy_dtype(t.type), shape, data, owner);
  if (!writable)
    py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

tinycoral::Interpreter load(const py::object& model, const std::string& device) {
  if (py::isinstance<py::bytes>(model) || py::isinstance<py::bytearray>(model)) {
    const std::string bytes = model.cast<std::string>();
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
    return tinycoral::Interpreter(std::span<const uint8_t>(p, bytes.size()),
                                  tinycoral::Device::open(device));
  }
  return tinycoral::Interpreter(py::str(model).cast<std::string>(), device);
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "tinycoral's C++ API (use tinycoral.utils and tinycoral.adapters)";
  py::register_exception<tinycoral::Error>(m, "Error", PyExc_RuntimeError);
  m.attr("__version__") = tinycoral::version();

  m.def("list_devices", [] {
    py::list out;
    for (const auto& d : tinycoral::list_devices()) {
      const char* kind = d.kind == tinycoral::DeviceKind::kUsb       ? "usb"
                         : d.kind == tinycoral::DeviceKind::kVirtual ? "sim"
                                                                     : "cpu";
      py::dict e;
      e["type"] = kind;
      e["path"] = d.name;
      e["description"] = d.description;
      out.append(e);
    }
    return out;
  });
  m.def("read_labels", &tinycoral::read_labels, py::arg("path"));

  py::class_<tinycoral::Interpreter>(m, "NativeInterpreter")
      .def(py::init(&load), py::arg("model"), py::arg("device") = "auto")
      .def_property_readonly("device",
                             [](const tinycoral::Interpreter& it) { return it.device().name(); })
      .def("num_inputs", &tinycoral::Interpreter::num_inputs)
      .def("num_outputs", &tinycoral::Interpreter::num_outputs)
      .def("input_details",
           [](const tinycoral::Interpreter& it, size_t i) { return details(it.input(i), i); })
      .def("output_details", [](const tinycoral::Interpreter& it,
                                size_t i) { return details(it.output(i), it.num_inputs() + i); })
      .def("input_array",
           [](py::object self, size_t i) {
             auto& it = self.cast<tinycoral::Interpreter&>();
             return view(it.input(i), it.input_data(i).data(), self, true);
           })
      .def("output_array",
           [](py::object self, size_t i) {
             const auto& it = self.cast<const tinycoral::Interpreter&>();
             return view(it.output(i), it.output_data(i).data(), self, false);
           })
      .def("set_input",
           [](tinycoral::Interpreter& it, size_t i, const py::object& data) {
             if (py::isinstance<py::bytes>(data)) {
               const std::string b = data.cast<std::string>();
               it.set_input(i, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(b.data()),
                                                        b.size()));
               return;
             }
             // Any array-like: its bytes in C order (the size check is the interpreter's).
             const py::array a = py::array::ensure(data, py::array::c_style);
             if (!a) throw tinycoral::Error("set_input needs bytes or an array");
             it.set_input(i, std::span<const uint8_t>(static_cast<const uint8_t*>(a.data()),
                                                      static_cast<size_t>(a.nbytes())));
           })
      .def("set_input_image",
           [](tinycoral::Interpreter& it, size_t i, const std::string& path) {
             tinycoral::set_input_image(it, i, path);
           })
      .def("invoke", &tinycoral::Interpreter::invoke, py::call_guard<py::gil_scoped_release>())
      .def("output_values", [](const tinycoral::Interpreter& it, size_t i) {
        const std::vector<float> v = it.output_values(i);
        return py::array_t<float>(static_cast<py::ssize_t>(v.size()), v.data());
      });
}
