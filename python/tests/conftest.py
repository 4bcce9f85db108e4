"""Locating Google's test data (never committed) and the CLI for the Python tests."""
import os
import pathlib

import pytest


def _testdata():
  env = os.environ.get("TINYCORAL_TESTDATA")
  if env:
    return pathlib.Path(env)
  source = pathlib.Path(os.environ.get("TINYCORAL_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
  return source.parent / "shared" / "testdata"


@pytest.fixture
def testdata():
  path = _testdata()
  if not (path / "gen2020").is_dir():
    pytest.skip("no test data at %s: run scripts/download_testdata.sh and set TINYCORAL_TESTDATA"
                % path)
  return path


@pytest.fixture
def cli():
  path = os.environ.get("TINYCORAL_CLI")
  if not path:
    pytest.skip("TINYCORAL_CLI is not set (run through ctest)")
  return path
