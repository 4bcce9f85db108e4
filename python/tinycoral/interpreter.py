"""The Interpreter: what tflite_runtime's Interpreter offers pycoral's adapters, over tinycoral.

Tensor indices: input i is index i, output j is index num_inputs + j (as given in the details).
"""
import numpy as np

from tinycoral import _native


class Interpreter:
  """A loaded model on a device ("auto", "usb", "usb:N", "sim" or "cpu")."""

  def __init__(self, model_path=None, model_content=None, device="auto"):
    if (model_path is None) == (model_content is None):
      raise ValueError("give exactly one of model_path and model_content")
    model = bytes(model_content) if model_content is not None else str(model_path)
    self._native = _native.NativeInterpreter(model, device)
    self._inputs = self._native.num_inputs()

  @property
  def device(self):
    """The device it runs on: "usb:N", "sim" or "cpu"."""
    return self._native.device

  def allocate_tensors(self):
    """Nothing to do: memory is planned when the model is loaded (kept for pycoral scripts)."""

  def get_input_details(self):
    return [self._native.input_details(i) for i in range(self._inputs)]

  def get_output_details(self):
    return [self._native.output_details(i) for i in range(self._native.num_outputs())]

  def tensor(self, index):
    """A function returning a numpy view of the tensor (inputs writable, outputs read-only)."""
    if index < self._inputs:
      return lambda: self._native.input_array(index)
    return lambda: self._native.output_array(index - self._inputs)

  def set_tensor(self, index, value):
    """Copies `value` (exactly the input's dtype and size) into input `index`."""
    if not 0 <= index < self._inputs:
      raise ValueError("tensor %d is not an input" % index)
    expected = self._native.input_details(index)["dtype"]
    value = np.asarray(value)
    if value.dtype != expected:
      raise ValueError("input %d takes %s, got %s" % (index, expected, value.dtype))
    self._native.set_input(index, value)

  def get_tensor(self, index):
    """A copy of the tensor."""
    return np.array(self.tensor(index)())

  def invoke(self):
    self._native.invoke()
