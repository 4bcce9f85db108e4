"""tinycoral: run TFLite models on a Coral USB Accelerator, its simulator or the CPU.

Shaped like pycoral: tinycoral.utils.edgetpu.make_interpreter, tinycoral.adapters.common and
tinycoral.adapters.classify, tinycoral.utils.dataset.read_label_file. Errors are tinycoral.Error
(a RuntimeError).
"""
from tinycoral._native import Error, __version__
from tinycoral.interpreter import Interpreter

__all__ = ["Error", "Interpreter", "__version__"]
