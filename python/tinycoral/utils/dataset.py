"""Label files, as pycoral.utils.dataset reads them."""
from tinycoral import _native


def read_label_file(file_path):
  """{index: label} from "INDEX LABEL" lines or one label per line (the line number is the
  index): the same reading as `tinycoral run --labels`."""
  return _native.read_labels(str(file_path))
