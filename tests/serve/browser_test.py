#!/usr/bin/env python3
"""The web app in a real browser (headless Chromium driven by Selenium) against `tinycoral serve
--device sim` on a free loopback port: the Write view writes exactly the text `tinycoral generate`
writes for the same prompt, seed and device - on the virtual Edge TPU (the chip path, with the
measured and the modeled stick tok/s shown), on the CPU when chosen on the page, and on the chip
again after waiting in line behind classifications; the See view gives cat.bmp the label `tinycoral
run` gives, the Chip view shows a MAC count for each of the 16 tiles after that run (adding up to the
chip's total). Screenshots of the three views go to ARTIFACT_DIR.

  browser_test.py TINYCORAL_CLI SOURCE_DIR ARTIFACT_DIR"""
import os
import re
import shutil
import sys
import threading
import time

from serve_harness import Paths, Server, cli_label, cli_story, info, post_events, skip

PROMPT = "Once upon a time, a little"
SEED = 1234
STEPS = 48


def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        skip("no Selenium for this python3 (Debian: python3-selenium, scripts/setup.sh)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        skip("no chromium / chromedriver (Debian: chromium chromium-driver, scripts/setup.sh)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1100,1000", "--no-first-run"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(driver), options=options)


def main():
    cli, source_dir, artifacts = sys.argv[1:4]
    paths = Paths(cli, source_dir, artifacts)
    expected_story = cli_story(paths, PROMPT, SEED, STEPS, device="sim")
    expected_cpu_story = cli_story(paths, PROMPT, SEED, STEPS, device="cpu")
    assert expected_story != expected_cpu_story, "int8 on the chip and float32 wrote the same text"
    expected_label = cli_label(paths, paths.cat)
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    server = Server(paths)
    driver = browser()
    try:
        wait = WebDriverWait(driver, 60)
        # Write
        driver.get(server.url + "#write")
        wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
        prompt = driver.find_element(By.ID, "prompt")
        prompt.clear()
        prompt.send_keys(PROMPT)
        for field, value in (("seed", SEED), ("steps", STEPS), ("temperature", "1.0"),
                             ("topp", "0.9")):
            box = driver.find_element(By.ID, field)
            box.clear()
            box.send_keys(str(value))
        from selenium.webdriver.support.ui import Select
        device = Select(driver.find_element(By.ID, "story-device"))
        story = driver.find_element(By.ID, "story")

        def write(choice, expected):
            device.select_by_value(choice)
            driver.find_element(By.ID, "start").click()
            wait.until(lambda d: story.get_attribute("data-state") in ("done", "error"))
            status = driver.find_element(By.ID, "story-status").text
            assert story.get_attribute("data-state") == "done", status
            written = story.get_property("textContent")
            assert written == expected, "browser:\n%r\ntinycoral generate:\n%r" % (
                written, expected)
            return status

        # The CPU (float32) first, then the server's choice: sim, the chip path on the virtual
        # Edge TPU, which shows the measured and the modeled stick speed.
        status = write("cpu", expected_cpu_story)
        assert "tok/s measured on the CPU" in status, status
        print("write on the CPU: equal to tinycoral generate --device cpu (%s)" % status)
        status = write("", expected_story)
        assert "measured on the virtual Edge TPU" in status, status
        assert re.search(r"modeled stick at 250 MHz: [0-9.]+ tok/s", status), status
        driver.save_screenshot(os.path.join(artifacts, "write.png"))
        print("write on sim: %d characters, equal to tinycoral generate --device sim's (%s)" % (
            len(expected_story), status))

        # The same story while classifications hold the device (three in line: about a second
        # of work, against the click's few tenths): the page says it waits, then writes the same
        # text.
        cat_bytes = open(paths.cat, "rb").read()
        holders = [threading.Thread(target=post_events, args=(server.url + "api/classify",
                                                              cat_bytes, "image/bmp"))
                   for _ in range(3)]
        for h in holders:
            h.start()
        deadline = time.monotonic() + 60
        while info(server.url)["served"]["in_line"] < 1:  # the first holds the device
            assert time.monotonic() < deadline, "the classifications never started"
            time.sleep(0.01)
        driver.execute_script("document.getElementById('start').click()")
        wait.until(lambda d: story.get_attribute("data-state") in ("done", "error"))
        for h in holders:
            h.join()
        waited = int(story.get_attribute("data-waited"))
        assert waited >= 1, "the story never waited"
        assert story.get_property("textContent") == expected_story
        print("write behind classifications: waited (at place %d), then the same text" % waited)

        # See
        driver.get(server.url + "#see")
        wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
        driver.find_element(By.ID, "image-input").send_keys(os.path.abspath(paths.cat))
        labels = driver.find_element(By.ID, "labels")
        wait.until(lambda d: labels.get_attribute("data-state") in ("done", "error"))
        status = driver.find_element(By.ID, "see-status").text
        assert labels.get_attribute("data-state") == "done", status
        items = labels.find_elements(By.TAG_NAME, "li")
        assert len(items) == 5, len(items)
        best = items[0].find_element(By.CLASS_NAME, "label-name").text
        assert best == expected_label, (best, expected_label)
        assert "ms per inference" in status and "on sim" in status, status
        driver.save_screenshot(os.path.join(artifacts, "see.png"))
        print("see: cat.bmp is '%s' as with tinycoral run (%s)" % (best, status))

        # Chip
        driver.get(server.url + "#chip")
        tiles = driver.find_element(By.ID, "tiles")
        wait.until(lambda d: tiles.get_attribute("data-state") in ("done", "none", "empty"))
        assert tiles.get_attribute("data-state") == "done", tiles.get_attribute("data-state")
        values = {}
        for tile in tiles.find_elements(By.CLASS_NAME, "tile"):
            text = tile.find_element(By.CLASS_NAME, "tile-value").text
            values[int(tile.get_attribute("data-tile"))] = int(text.replace(",", ""))
        assert sorted(values) == list(range(16)), sorted(values)
        assert all(v > 0 for v in values.values()), values
        rows = {r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")[1].text
                for r in driver.find_elements(By.CSS_SELECTOR, "#traffic tr")}
        total = int(rows["MACs (all tiles)"].replace(",", ""))
        assert sum(values.values()) == total, (values, total)
        assert int(rows["ring traffic"].split()[0].replace(",", "")) > 0, rows
        assert driver.find_elements(By.CSS_SELECTOR, "#time-split div"), "no modeled time split"
        driver.save_screenshot(os.path.join(artifacts, "chip.png"))
        print("chip: 16 tiles, %d MACs in all; screenshots in %s" % (total, artifacts))
    finally:
        driver.quit()
        server.stop()


if __name__ == "__main__":
    main()
