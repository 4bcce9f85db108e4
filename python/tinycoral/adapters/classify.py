"""Classification results, as pycoral.adapters.classify gives them."""
import collections

import numpy as np

from tinycoral.adapters import common

Class = collections.namedtuple("Class", ["id", "score"])


def num_classes(interpreter):
  return int(np.prod(interpreter.get_output_details()[0]["shape"]))


def get_scores(interpreter):
  """Output 0 as float32 scores (dequantized when it is quantized)."""
  scores = common.output_tensor(interpreter, 0)
  if np.issubdtype(scores.dtype, np.integer):
    scale, zero_point = interpreter.get_output_details()[0]["quantization"]
    if scale != 0:
      return (scale * (scores.astype(np.int64) - zero_point)).astype(np.float32).ravel()
  return scores.astype(np.float32).ravel()


def get_classes_from_scores(scores, top_k=float("inf"), score_threshold=-float("inf")):
  """The best classes, best first; equal scores put the higher id first (as the CLI does)."""
  scores = np.asarray(scores).ravel()
  ids = np.arange(scores.size)
  order = np.lexsort((-ids, -scores))  # by score descending, then id descending
  count = min(top_k, scores.size)
  return [Class(int(i), float(scores[i])) for i in order[:int(count)]
          if scores[i] >= score_threshold]


def get_classes(interpreter, top_k=float("inf"), score_threshold=-float("inf")):
  """The `top_k` best classes of output 0 scoring at least `score_threshold`."""
  return get_classes_from_scores(get_scores(interpreter), top_k, score_threshold)
