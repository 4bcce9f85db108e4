"""The Python bindings: pycoral's API shape, numpy in and out, the same classes as the CLI on the
virtual Edge TPU and the CPU, and pycoral's classify_image example with only its imports changed."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

import tinycoral
from tinycoral.adapters import classify, common
from tinycoral.utils.dataset import read_label_file
from tinycoral.utils.edgetpu import list_edge_tpus, make_interpreter, run_inference

MODEL = "gen2020/mobilenet_v1_0.25_128_quant_edgetpu.tflite"
CPU_MODEL = "gen2020/mobilenet_v1_0.25_128_quant.tflite"
EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "python" / "classify_image.py"


def cli_top(cli, model, image, device, labels):
  """`tinycoral run --top 3` as [(id, score, label)]."""
  out = subprocess.run([cli, "run", str(model), "--image", str(image), "--device", device,
                        "--top", "3", "--labels", str(labels)],
                       check=True, capture_output=True, text=True).stdout
  rows = [line.split(" ", 2) for line in out.splitlines()]
  return [(int(i), float(s), label) for i, s, label in rows]


def test_list_edge_tpus_always_has_the_virtual_one():
  tpus = list_edge_tpus()
  assert {"type": "sim", "path": "sim"} in tpus
  assert all(t["type"] in ("usb", "sim") for t in tpus)


def test_errors_are_tinycoral_errors(tmp_path):
  bad = tmp_path / "bad.tflite"
  bad.write_bytes(b"not a model")
  with pytest.raises(tinycoral.Error, match="bad.tflite"):
    make_interpreter(str(bad), device="cpu")
  with pytest.raises(tinycoral.Error, match="unknown device 'tpu9'"):
    make_interpreter(str(bad), device="tpu9")
  assert issubclass(tinycoral.Error, RuntimeError)


@pytest.mark.parametrize("device,model", [("sim", MODEL), ("cpu", CPU_MODEL)])
def test_classifies_cat_with_the_clis_classes(testdata, cli, device, model):
  labels_path = testdata / "labels" / "imagenet_labels.txt"
  image = testdata / "images" / "cat.bmp"
  interpreter = make_interpreter(str(testdata / model), device=device)
  assert interpreter.device == device
  interpreter.allocate_tensors()
  assert common.input_size(interpreter) == (128, 128)
  common.set_input_image(interpreter, image)
  interpreter.invoke()
  labels = read_label_file(labels_path)
  got = [(c.id, c.score, labels[c.id]) for c in classify.get_classes(interpreter, top_k=3)]
  expected = cli_top(cli, testdata / model, image, device, labels_path)
  assert [(i, label) for i, _, label in got] == [(i, label) for i, _, label in expected]
  assert [s for _, s, _ in got] == pytest.approx([s for _, s, _ in expected], abs=1e-6)
  assert "cat" in got[0][2]


def test_numpy_in_and_out_and_invoke_repeats(testdata):
  interpreter = make_interpreter(str(testdata / CPU_MODEL), device="cpu")
  details = interpreter.get_input_details()[0]
  assert details["dtype"] == np.uint8 and list(details["shape"]) == [1, 128, 128, 3]
  scale, zero_point = interpreter.get_output_details()[0]["quantization"]
  assert scale > 0 and 0 <= zero_point <= 255
  rng = np.random.default_rng(7)
  image = rng.integers(0, 256, size=(1, 128, 128, 3), dtype=np.uint8)
  interpreter.set_tensor(details["index"], image)
  interpreter.invoke()
  first = common.output_tensor(interpreter, 0).copy()
  assert first.dtype == np.uint8 and first.shape == (1, 1001)
  interpreter.invoke()  # the same inputs again: the same outputs
  np.testing.assert_array_equal(common.output_tensor(interpreter, 0), first)
  run_inference(interpreter, image.tobytes())
  np.testing.assert_array_equal(common.output_tensor(interpreter, 0), first)
  with pytest.raises(ValueError, match="takes uint8"):
    interpreter.set_tensor(0, image.astype(np.float32))
  with pytest.raises(tinycoral.Error, match="bytes"):
    run_inference(interpreter, b"short")


def run_example(model, device, labels, image):
  """Our copy of pycoral's examples/classify_image.py (imports say tinycoral, PIL resizes): its
  results as [(label, score)]."""
  out = subprocess.run([sys.executable, str(EXAMPLE), "-m", "%s@%s" % (model, device),
                        "-l", str(labels), "-i", str(image), "-k", "3", "-c", "2"],
                       check=True, capture_output=True, text=True, env=os.environ).stdout
  rows = out.split("-------RESULTS--------\n")[1].splitlines()
  return [(label, float(score)) for label, score in (r.rsplit(": ", 1) for r in rows)]


@pytest.mark.parametrize("device,model", [("sim", MODEL), ("cpu", CPU_MODEL)])
def test_pycorals_classify_image_example_runs_with_tinycoral(testdata, cli, tmp_path, device,
                                                             model):
  labels = testdata / "labels" / "imagenet_labels.txt"
  # cat.bmp resized to the input size once (by tinycoral), so PIL's resize in the example is a
  # no-op and the example and the CLI classify the very same pixels.
  interpreter = make_interpreter(str(testdata / CPU_MODEL), device="cpu")
  common.set_input_image(interpreter, testdata / "images" / "cat.bmp")
  image = tmp_path / "cat_128.png"
  Image.fromarray(np.array(common.input_tensor(interpreter))).save(image)
  got = run_example(testdata / model, device, labels, image)
  expected = cli_top(cli, testdata / model, image, device, labels)
  assert [label for label, _ in got] == [label for _, _, label in expected]
  assert [score for _, score in got] == pytest.approx([s for _, s, _ in expected], abs=1e-5)
  # The original image, resized by PIL (Lanczos): still a cat.
  got = run_example(testdata / model, device, labels, testdata / "images" / "cat.bmp")
  assert "cat" in got[0][0]
