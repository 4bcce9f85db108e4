"""Opening models on devices, as pycoral.utils.edgetpu does."""
from tinycoral import _native
from tinycoral.interpreter import Interpreter


def _device_name(device):
  # pycoral's spellings: None (any), ":N" (the Nth Edge TPU), "usb", "usb:N"; tinycoral adds
  # "sim" (the virtual Edge TPU) and "cpu".
  if device is None or device == "":
    return "auto"
  if device.startswith(":"):
    return "usb" + device
  return device


def make_interpreter(model_path_or_content, device=None, delegate=None):
  """Loads a model (a path, or its bytes) on `device`: None/"auto", "usb", "usb:N", ":N", "sim"
  or "cpu". `delegate` exists for pycoral's signature and must be None."""
  if delegate is not None:
    raise ValueError("tinycoral runs the Edge TPU itself: no delegate to pass")
  if isinstance(model_path_or_content, (bytes, bytearray)):
    return Interpreter(model_content=model_path_or_content, device=_device_name(device))
  return Interpreter(model_path=model_path_or_content, device=_device_name(device))


def list_edge_tpus():
  """Every Edge TPU: the sticks on USB ({"type": "usb", "path": "usb:N"}), then the virtual one
  ({"type": "sim", "path": "sim"})."""
  return [{"type": d["type"], "path": d["path"]} for d in _native.list_devices()
          if d["type"] != "cpu"]


def run_inference(interpreter, input_data):
  """Fills input 0 with `input_data` (bytes or an array of the input's size) and invokes."""
  interpreter._native.set_input(0, input_data)
  interpreter.invoke()
