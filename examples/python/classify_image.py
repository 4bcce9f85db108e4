"""Classifies an image the way pycoral's examples/classify_image.py does, with `pycoral` replaced
by `tinycoral` in the imports and nothing else changed in how the API is used:

  python3 classify_image.py -m model_edgetpu.tflite@sim -l labels.txt -i cat.bmp -k 3

The device follows the model path after '@' (as in pycoral): usb, usb:N, :N, sim or cpu.
"""
import argparse
import time

from PIL import Image
from tinycoral.adapters import classify
from tinycoral.adapters import common
from tinycoral.utils.dataset import read_label_file
from tinycoral.utils.edgetpu import make_interpreter


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("-m", "--model", required=True, help="the .tflite model[@device]")
  parser.add_argument("-i", "--input", required=True, help="the image to classify")
  parser.add_argument("-l", "--labels", help="the labels file")
  parser.add_argument("-k", "--top_k", type=int, default=1, help="how many classes to print")
  parser.add_argument("-t", "--threshold", type=float, default=0.0, help="lowest score shown")
  parser.add_argument("-c", "--count", type=int, default=5, help="how many inferences to time")
  args = parser.parse_args()

  labels = read_label_file(args.labels) if args.labels else {}
  interpreter = make_interpreter(*args.model.split("@"))
  interpreter.allocate_tensors()

  size = common.input_size(interpreter)
  image = Image.open(args.input).convert("RGB").resize(size, Image.ANTIALIAS)
  common.set_input(interpreter, image)

  print("----INFERENCE TIME----")
  for _ in range(args.count):
    start = time.perf_counter()
    interpreter.invoke()
    elapsed = time.perf_counter() - start
    classes = classify.get_classes(interpreter, args.top_k, args.threshold)
    print("%.1fms" % (elapsed * 1000))

  print("-------RESULTS--------")
  for c in classes:
    print("%s: %.5f" % (labels.get(c.id, c.id), c.score))


if __name__ == "__main__":
  main()
