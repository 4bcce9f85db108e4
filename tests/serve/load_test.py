#!/usr/bin/env python3
"""A bounded loopback load test of `tinycoral serve --device sim`: CLIENTS clients at once, each
asking in turn for a short story (on the virtual Edge TPU, the chip path) and a classification of
cat.bmp until SECONDS have passed, then finishing the request it has in flight. Every request must
be answered in full and right (a story's text is `tinycoral generate --device sim`'s for its seed, a
classification's best label is cat.bmp's), none lost, and the server's resident memory once the
clients are done must be within a small bound of what it was after the warm-up round (flat). The
resident memory is printed once a second meanwhile (it rises and falls with the requests in
flight: 20 waiting classifications hold their images).

  load_test.py TINYCORAL_CLI SOURCE_DIR WORK_DIR [--seconds 12] [--clients 20]
(bench/serve_load.sh runs it for a minute)."""
import argparse
import json
import threading
import time

import base64

from serve_harness import Paths, Server, cli_story, post_events, rss_kib

# The small MobileNet keeps a classification's turn on the virtual chip short.
t0 = time.monotonic()
MODEL = "mobilenet_v1_0.25_128_quant_edgetpu.tflite"
# Memory is flat when the idle server after the run holds less than this more than after the
# warm-up round; a leak of even 10 KiB per request would exceed it in the suite's 12 s.
IDLE_GROWTH_KIB = 6 << 10
PROMPT = "Once upon a time"
SEEDS = (1, 2, 3, 4)  # stories cycle through these: each text is known
STEPS = 24


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cli")
    p.add_argument("source_dir")
    p.add_argument("work_dir")
    p.add_argument("--seconds", type=float, default=12)
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--only", choices=("story", "classify"), help="ask for one kind only")
    p.add_argument("--no-memory-check", action="store_true",
                   help="under AddressSanitizer (its quarantine holds freed memory)")
    a = p.parse_args()
    paths = Paths(a.cli, a.source_dir, a.work_dir)
    cat = open(paths.cat, "rb").read()
    stories = {seed: cli_story(paths, PROMPT, seed, STEPS, device="sim") for seed in SEEDS}
    server = Server(paths)
    expected = post_events(server.url + "api/classify?model=" + MODEL, cat, "image/bmp")
    label = expected[-1]["result"]["top"][0]["label"]
    lock = threading.Lock()
    sent, answered, failures, waits = [0], [0], [], [0]
    warm = threading.Barrier(a.clients + 1)
    stop_at = [None]

    def one(kind, i):
        with lock:
            sent[0] += 1
        try:
            if kind == "story":
                seed = SEEDS[i % len(SEEDS)]
                body = json.dumps({"prompt": PROMPT, "seed": seed, "steps": STEPS})
                events = post_events(server.url + "api/story", body.encode(), "application/json")
                text = b"".join(base64.b64decode(e["piece"]) for e in events if "piece" in e)
                ok = ("done" in events[-1] and events[-1]["done"]["device"] == "sim" and
                      text.decode("utf-8", errors="replace") == stories[seed])
            else:
                events = post_events(server.url + "api/classify?model=" + MODEL, cat, "image/bmp")
                ok = "result" in events[-1] and events[-1]["result"]["top"][0]["label"] == label
            with lock:
                waits[0] += sum(1 for e in events if "wait" in e)
                if ok:
                    answered[0] += 1
                else:
                    failures.append(events[-1])
        except Exception as e:  # a lost or refused request
            with lock:
                failures.append("%s %d at %.1f s: %r" % (kind, i, time.monotonic() - t0, e))

    def client(c):
        n = 0
        one("story", c * 1000 + n)
        one("classify", 0)
        warm.wait()
        while time.monotonic() < stop_at[0]:
            n += 1
            one(a.only or ("story" if n % 2 else "classify"), c * 1000 + n)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(a.clients)]
    for t in threads:
        t.start()
    stop_at[0] = time.monotonic() + 3600
    warm.wait()
    rss_warm = rss_kib(server.pid)
    stop_at[0] = time.monotonic() + a.seconds
    start = time.monotonic()
    samples = []  # RSS once a second while the clients run
    print("RSS after the warm-up round (idle): %.1f MiB" % (rss_warm / 1024))
    print("   t (s)  RSS (MiB)  answered")
    while any(t.is_alive() for t in threads):
        samples.append(rss_kib(server.pid))
        print("%8.0f  %9.1f  %8d" % (time.monotonic() - start, samples[-1] / 1024, answered[0]),
              flush=True)
        time.sleep(1)
    for t in threads:
        t.join()
    time.sleep(0.5)  # the last answers' buffers are freed after they are sent
    rss_end = rss_kib(server.pid)
    alive = server.alive()
    server.stop()
    half = len(samples) // 2
    print("%d clients, %.0f s: %d requests sent, %d answered, %d 'busy, place N' events; "
          "RSS idle after warm-up %.1f MiB, idle at the end %.1f MiB; while loaded %.1f-%.1f MiB "
          "in the first half, %.1f-%.1f MiB in the second" % (
              a.clients, a.seconds, sent[0], answered[0], waits[0], rss_warm / 1024,
              rss_end / 1024, min(samples[:half] or [0]) / 1024, max(samples[:half] or [0]) / 1024,
              min(samples[half:]) / 1024, max(samples[half:]) / 1024))
    assert alive, "the server died"
    assert not failures, failures[:5]
    assert answered[0] == sent[0], (answered[0], sent[0])
    assert waits[0] > 0, "no request ever waited: the clients did not overlap"
    if not a.no_memory_check:
        assert rss_end - rss_warm < IDLE_GROWTH_KIB, (rss_warm, rss_end, samples)


if __name__ == "__main__":
    main()
