"""Model input and output helpers, as pycoral.adapters.common offers them."""
import numpy as np


def output_tensor(interpreter, i):
  """Output i as a read-only numpy view (valid until the next invoke)."""
  return interpreter.tensor(interpreter.get_output_details()[i]["index"])()


def input_details(interpreter, key):
  """One entry of input 0's details, e.g. "shape" or "quantization"."""
  return interpreter.get_input_details()[0][key]


def input_size(interpreter):
  """(width, height) of the image input."""
  _, height, width, _ = input_details(interpreter, "shape")
  return int(width), int(height)


def input_tensor(interpreter):
  """Input 0's memory as a writable [H, W, C] array."""
  return interpreter.tensor(input_details(interpreter, "index"))()[0]


def set_input(interpreter, data):
  """Copies `data` (an array or a PIL image of the input's size) into input 0."""
  input_tensor(interpreter)[:, :] = np.asarray(data).reshape(input_tensor(interpreter).shape)


def set_resized_input(interpreter, size, resize):
  """Resizes an image of `size` with `resize(size)` to fit, pads with zeros, returns the result
  and its scale, as pycoral does."""
  width, height = input_size(interpreter)
  w, h = size
  scale = min(width / w, height / h)
  w, h = int(w * scale), int(h * scale)
  tensor = input_tensor(interpreter)
  tensor.fill(0)
  _, _, channel = tensor.shape
  result = resize((w, h))
  tensor[:h, :w] = np.reshape(result, (h, w, channel))
  return result, (scale, scale)


def set_input_image(interpreter, image_path):
  """tinycoral's own: reads a BMP, PNG or JPEG into input 0 exactly as `tinycoral run --image`
  does (bilinear resize as libcoral), without PIL."""
  interpreter._native.set_input_image(0, str(image_path))
