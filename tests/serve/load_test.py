#!/usr/bin/env python3
"""A bounded loopback load test of `tinycoral serve`: CLIENTS clients at once, each asking in turn
for a short story and a classification of cat.bmp until SECONDS have passed, then finishing the
request it has in flight. Every request must be answered in full (a story's "done", a
classification's "result" with cat.bmp's label), none lost, and the server's resident memory
after the run must stay within a small bound of what it was after the first round (flat).

  load_test.py TINYCORAL_CLI SOURCE_DIR WORK_DIR [--seconds 12] [--clients 20]
(bench/serve_load.sh runs it for a minute)."""
import argparse
import json
import threading
import time

from serve_harness import Paths, Server, post_events, rss_kib

# The small MobileNet keeps a classification's turn on the virtual chip short.
t0 = time.monotonic()
MODEL = "mobilenet_v1_0.25_128_quant_edgetpu.tflite"
# Memory is flat when the second half of the run adds less than this: the worker threads' stacks
# and malloc's pools settle in the first seconds, a leak of even 10 KiB per request would not.
SECOND_HALF_GROWTH_KIB = 8 << 10


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
                body = json.dumps({"prompt": "Once upon a time", "seed": i + 1, "steps": 24})
                events = post_events(server.url + "api/story", body.encode(), "application/json")
                ok = "done" in events[-1] and events[-1]["done"]["positions"] == 24
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
    samples = []  # RSS once a second while the clients run
    while any(t.is_alive() for t in threads):
        samples.append(rss_kib(server.pid))
        time.sleep(1)
    for t in threads:
        t.join()
    rss_end = rss_kib(server.pid)
    print("RSS samples (KiB):", samples)
    alive = server.alive()
    server.stop()
    print("%d clients, %.0f s: %d requests sent, %d answered, %d 'busy, place N' events; "
          "RSS %d KiB after warm-up, %d KiB at the end" % (a.clients, a.seconds, sent[0],
                                                           answered[0], waits[0], rss_warm,
                                                           rss_end))
    assert alive, "the server died"
    assert not failures, failures[:5]
    assert answered[0] == sent[0], (answered[0], sent[0])
    assert waits[0] > 0, "no request ever waited: the clients did not overlap"
    if not a.no_memory_check:
        half = samples[min(len(samples) - 1, int(a.seconds / 2))]
        assert rss_end - half < SECOND_HALF_GROWTH_KIB, (half, rss_end, samples)


if __name__ == "__main__":
    main()
