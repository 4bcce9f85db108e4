"""Classifies an image with the Python API: classify.py MODEL LABELS IMAGE [DEVICE]"""
import sys

from tinycoral.adapters import classify, common
from tinycoral.utils.dataset import read_label_file
from tinycoral.utils.edgetpu import make_interpreter

model, labels, image = sys.argv[1:4]
interpreter = make_interpreter(model, device=sys.argv[4] if len(sys.argv) > 4 else None)
common.set_input_image(interpreter, image)  # or common.set_input(interpreter, a_pil_image)
interpreter.invoke()
names = read_label_file(labels)
for c in classify.get_classes(interpreter, top_k=3):
  print(c.id, "%.6f" % c.score, names.get(c.id, ""))
