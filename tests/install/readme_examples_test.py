"""The README shows the library's examples verbatim: each example file must appear in it whole,
so that the code the suite builds and runs is the code a reader copies."""
import pathlib
import sys

source = pathlib.Path(sys.argv[1])
readme = (source / "README.md").read_text()
stale = [path for path in ("examples/cpp/classify.cpp", "examples/c/classify.c",
                           "examples/python/classify.py")
         if (source / path).read_text() not in readme]
if stale:
  sys.exit("README.md does not show the current " + ", ".join(stale))
print("README.md shows every example as it is")
