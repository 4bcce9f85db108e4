"""What the web app's tests share: the test data, a random llama2.c checkpoint made like the llm
tests make theirs (the test data's make_checkpoint.py), and a `tinycoral serve` on a free loopback
port. A test that lacks something it needs exits with SKIP (77) and says what is missing."""
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

SKIP = 77


def skip(why):
    print("SKIPPED: " + why)
    sys.exit(SKIP)


def testdata(source_dir):
    env = os.environ.get("TINYCORAL_TESTDATA")
    if env:
        if not os.path.isdir(env):
            sys.exit("TINYCORAL_TESTDATA=%s is not a folder" % env)
        return env
    beside = os.path.join(source_dir, "..", "shared", "testdata")
    if os.path.isdir(beside):
        return beside
    skip("no test data: set TINYCORAL_TESTDATA (scripts/download_testdata.sh) or put it in "
         "../shared/testdata")


class Paths:
    """The files the tests use, made or found once."""

    def __init__(self, cli, source_dir, work_dir):
        self.cli = cli
        data = testdata(source_dir)
        self.tokenizer = os.path.join(data, "llama2c", "tokenizer.bin")
        self.model = os.path.join(data, "gen2020", "mobilenet_v2_1.0_224_quant_edgetpu.tflite")
        self.labels = os.path.join(data, "labels", "imagenet_labels.txt")
        self.cat = os.path.join(data, "images", "cat.bmp")
        for f in (self.tokenizer, self.model, self.labels, self.cat):
            if not os.path.exists(f):
                skip("the test data lacks " + f)
        os.makedirs(work_dir, exist_ok=True)
        # rand_gqa: the llm tests' small random checkpoint (grouped-query attention, own classifier).
        self.checkpoint = os.path.join(work_dir, "rand_gqa.bin")
        if not os.path.exists(self.checkpoint):
            partial = self.checkpoint + ".%d" % os.getpid()
            subprocess.run([sys.executable, os.path.join(data, "llama2c", "make_checkpoint.py"),
                            partial, "rand_gqa"], check=True)
            os.replace(partial, self.checkpoint)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Server:
    """`tinycoral serve --port 0` with the test checkpoint and model; the URL from its first line."""

    def __init__(self, paths, extra=()):
        self.proc = subprocess.Popen(
            [paths.cli, "serve", "--port", "0", "--checkpoint", paths.checkpoint, "-z",
             paths.tokenizer, "--model", paths.model, "--labels", paths.labels, "--device", "sim",
             *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()))
        reader.start()
        reader.join(60)
        found = re.search(r"(http://127\.0\.0\.1:\d+/)", line[0] if line else "")
        if not found:
            self.proc.kill()
            sys.exit("tinycoral serve did not start: %r %s" % (line, self.proc.stderr.read()))
        self.url = found.group(1)
        self.pid = self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def cli_story(paths, prompt, seed, steps, temperature=1.0, topp=0.9, device="cpu"):
    """`tinycoral generate`'s text for these arguments (its final newline dropped)."""
    out = subprocess.run([paths.cli, "generate", paths.checkpoint, "-z", paths.tokenizer, "-i",
                          prompt, "-s", str(seed), "-n", str(steps), "-t", str(temperature), "-p",
                          str(topp), "--device", device], capture_output=True, check=True).stdout
    assert out.endswith(b"\n"), out
    return out[:-1].decode("utf-8", errors="replace")


def cli_label(paths, image):
    """The best label `tinycoral run` gives the image with the test model on the virtual chip."""
    out = subprocess.run([paths.cli, "run", paths.model, "--image", image, "--top", "1",
                          "--labels", paths.labels, "--device", "sim"], capture_output=True,
                         text=True, check=True).stdout
    index, score, label = out.splitlines()[0].split(" ", 2)
    return label


def post_events(url, body, content_type, timeout=120):
    """POSTs and returns the answer's JSON events (a 4xx raises urllib.error.HTTPError)."""
    import json
    req = urllib.request.Request(url, data=body, headers={"Content-Type": content_type})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return [json.loads(line) for line in r.read().decode().splitlines() if line]


def info(url):
    """The server's /api/info."""
    import json
    with urllib.request.urlopen(url + "api/info", timeout=30) as r:
        return json.load(r)
