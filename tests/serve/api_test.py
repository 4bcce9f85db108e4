#!/usr/bin/env python3
"""`tinycoral serve` over plain HTTP: oversized and malformed requests get a 4xx with a plain
one-line message (a small image with too many pixels too); a request that arrives while the device is busy hears its place in line before
its answer; a client that disconnects mid-story leaves a server that answers the next request; a second server on a port in use exits 2.

  api_test.py TINYCORAL_CLI SOURCE_DIR WORK_DIR"""
import http.client
import json
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zlib

from serve_harness import Paths, Server, info, post_events


def expect_refusal(url, body, content_type, status, words):
    try:
        post_events(url, body, content_type)
    except urllib.error.HTTPError as e:
        text = e.read().decode()
        assert e.code == status, (url, e.code, text)
        assert e.headers.get_content_type() == "text/plain", e.headers
        assert words in text and text.count("\n") == 1, text
        print("%d %s" % (e.code, text.strip()))
        return
    raise AssertionError("%s was accepted, expected %d" % (url, status))


def big_png(width, height):
    """A small file with many pixels: a grey PNG of zeros."""
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
    rows = zlib.compress(b"\x00" * ((width + 1) * height), 9)
    return (b"\x89PNG\r\n\x1a\n" +
            chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", rows) + chunk(b"IEND", b""))


def story(prompt="Once upon a time", **kw):
    return json.dumps({"prompt": prompt, "seed": 5, "steps": 16, **kw}).encode()


def main():
    cli, source_dir, work = sys.argv[1:4]
    paths = Paths(cli, source_dir, work)
    cat = open(paths.cat, "rb").read()
    server = Server(paths)
    try:
        u = server.url
        expect_refusal(u + "api/story", story("x" * 2000), "application/json", 413,
                       "prompt too long: 2000 bytes")
        expect_refusal(u + "api/story", b"{not json", "application/json", 400, "bad request")
        expect_refusal(u + "api/story", story(temperature=5), "application/json", 400,
                       "temperature must be between 0 and 2")
        expect_refusal(u + "api/story", story(steps=100000), "application/json", 400,
                       "steps must be between 0 and seq_len 128")
        expect_refusal(u + "api/story", story(device="tpu9"), "application/json", 400,
                       "unknown device 'tpu9'")
        expect_refusal(u + "api/classify", b"\x00" * (9 << 20), "image/bmp", 413,
                       "request too large")
        expect_refusal(u + "api/classify", b"not an image at all", "image/png", 400,
                       "unreadable image")
        expect_refusal(u + "api/classify", big_png(4100, 4100), "image/png", 400,
                       "image too large: 4100 x 4100 pixels")
        expect_refusal(u + "api/classify?model=../../etc/passwd", cat, "image/bmp", 400,
                       "unknown model")
        expect_refusal(u + "api/classify?device=tpu9", cat, "image/bmp", 400, "device")
        try:
            urllib.request.urlopen(u + "nosuch")
            raise AssertionError("/nosuch answered")
        except urllib.error.HTTPError as e:
            assert e.code == 404 and e.read().decode() == "not found: /nosuch\n"

        # Busy: a long story holds the device; a classification sent meanwhile waits in place 1.
        conn = http.client.HTTPConnection(server.url.split("/")[2], timeout=60)
        conn.request("POST", "/api/story", story(steps=0), {"Content-Type": "application/json"})
        long_story = conn.getresponse()
        assert json.loads(long_story.readline())["start"]["device"] == "sim"  # the server's
        events = post_events(u + "api/classify", cat, "image/bmp")
        assert events[0] == {"wait": 1}, events[:3]
        assert events[-1]["result"]["top"][0]["label"] == "Egyptian cat", events[-1]
        print("busy: the classification waited (%s) then got %s" % (
            events[0], events[-1]["result"]["top"][0]["label"]))

        conn.close()
        served = info(u)["served"]
        assert (served["stories"], served["stories_stopped"], served["classifications"]) == (
            1, 0, 1), served

        # A story's client goes away after its first events: the server stops writing it (128
        # positions take far longer than noticing a closed socket) and answers the next request.
        conn = http.client.HTTPConnection(server.url.split("/")[2], timeout=60)
        conn.request("POST", "/api/story", story(steps=0), {"Content-Type": "application/json"})
        left = conn.getresponse()
        assert "start" in json.loads(left.readline())
        conn.close()
        deadline = time.monotonic() + 30
        while info(u)["served"]["stories_stopped"] != 1:
            assert time.monotonic() < deadline, info(u)
            time.sleep(0.05)
        assert info(u)["served"]["stories"] == 1, info(u)
        events = post_events(u + "api/story", story(), "application/json")
        assert "done" in events[-1], events[-1]
        assert server.alive()

        # A second server on the same port is refused (not sharing it through SO_REUSEPORT).
        port = server.url.split(":")[2].rstrip("/")
        second = subprocess.run([cli, "serve", "--port", port, "-z", paths.tokenizer],
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 2 and "cannot bind to 127.0.0.1:" + port in second.stderr, (
            second.returncode, second.stderr)
        print("a second server on port %s: %s" % (port, second.stderr.strip()))
        print("a client that left mid-story: the next story was written (%d events)" % len(events))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
