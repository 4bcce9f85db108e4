// tinycoral serve's page: three views (Write, See, Chip) over the server's JSON API. Streamed
// answers are newline-separated JSON events: {"wait": N}, {"start"}, {"piece"}, {"done"},
// {"result"}, {"error"} (server.cpp lists them).
"use strict";

const $ = (id) => document.getElementById(id);
let info = null;

// --- navigation: the hash names the view -----------------------------------------------------
function showView() {
  const name = ["write", "see", "chip"].includes(location.hash.slice(1)) ? location.hash.slice(1) : "write";
  for (const v of document.querySelectorAll(".view")) v.classList.toggle("shown", v.id === name);
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.id === "nav-" + name);
  if (name === "chip") loadChip();
}
window.addEventListener("hashchange", showView);

// --- events ------------------------------------------------------------------------------------
// Reads a streamed answer line by line; a 4xx/5xx answer's plain text becomes an Error.
async function readEvents(response, onEvent) {
  if (!response.ok) throw new Error((await response.text()).trim() || "HTTP " + response.status);
  const reader = response.body.getReader();
  const utf8 = new TextDecoder();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += utf8.decode(value, { stream: true });
    let nl;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (line) onEvent(JSON.parse(line));
    }
  }
}

function setStatus(el, text, kind) {
  el.textContent = text;
  el.className = "status" + (kind ? " " + kind : "");
}

function waitText(place) {
  return place === 1 ? "busy, place 1 in line (next)" : `busy, place ${place} in line`;
}

// --- Write ------------------------------------------------------------------------------------
let storyAbort = null;

function base64Bytes(text) {
  const s = atob(text);
  const b = new Uint8Array(s.length);
  for (let i = 0; i < s.length; ++i) b[i] = s.charCodeAt(i);
  return b;
}

function deviceText(device) {
  return { cpu: "the CPU", sim: "the virtual Edge TPU", usb: "the Coral stick" }[device] || device;
}

// Measured speed on the device; on the virtual Edge TPU also the stick's modeled speed.
function storyDoneText(d) {
  let text = `done: ${d.positions} positions, ${d.tokens_per_second.toFixed(1)} tok/s measured on ` +
    deviceText(d.device);
  if (d.device !== "cpu") text += ` (${d.matmuls_on_chip} layer matmuls on the chip)`;
  if (d.modeled_stick_tokens_per_second !== undefined)
    text += `; modeled stick at 250 MHz: ${d.modeled_stick_tokens_per_second.toFixed(1)} tok/s ` +
      `(${d.modeled_tokens_per_second_with_host.toFixed(1)} tok/s with this host's share, modeled)`;
  return text + `, seed ${d.seed}`;
}

async function startStory() {
  const story = $("story"), status = $("story-status");
  story.textContent = "";
  story.dataset.state = "waiting";
  story.dataset.waited = 0;  // the farthest place in line this story waited at
  $("start").disabled = true;
  $("stop").disabled = false;
  storyAbort = new AbortController();
  const pieces = new TextDecoder();  // a character may span pieces (byte tokens)
  let text = "";
  const body = {
    prompt: $("prompt").value,
    temperature: Number($("temperature").value),
    topp: Number($("topp").value),
    seed: Number($("seed").value),
    steps: Number($("steps").value),
    device: $("story-device").value,
  };
  try {
    const response = await fetch("/api/story", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body), signal: storyAbort.signal,
    });
    await readEvents(response, (e) => {
      if ("wait" in e) {
        setStatus(status, waitText(e.wait), "busy");
        story.dataset.waited = Math.max(e.wait, Number(story.dataset.waited || 0));
      } else if (e.start) {
        story.dataset.state = "writing";
        setStatus(status, `writing on ${deviceText(e.start.device)} (${e.start.threads} threads)…`);
      } else if ("piece" in e) {
        text += pieces.decode(base64Bytes(e.piece), { stream: true });
        story.textContent = text;
      } else if (e.done) {
        text += pieces.decode();
        story.textContent = text;
        story.dataset.state = "done";
        setStatus(status, storyDoneText(e.done));
      } else if (e.error) {
        story.dataset.state = "error";
        setStatus(status, e.error, "error");
      }
    });
    if (story.dataset.state === "writing") story.dataset.state = "done";
  } catch (err) {
    if (err.name === "AbortError") {
      story.dataset.state = "stopped";
      setStatus(status, "stopped");
    } else {
      story.dataset.state = "error";
      setStatus(status, err.message, "error");
    }
  } finally {
    $("start").disabled = false;
    $("stop").disabled = true;
    storyAbort = null;
  }
}

$("start").addEventListener("click", startStory);
$("stop").addEventListener("click", () => storyAbort && storyAbort.abort());

// --- See --------------------------------------------------------------------------------------
async function classify(file) {
  const status = $("see-status"), list = $("labels");
  if (file.size > info.limits.image_bytes) {
    setStatus(status, `image too large: ${file.size} bytes (the limit is ${info.limits.image_bytes})`, "error");
    return;
  }
  $("preview").src = URL.createObjectURL(file);
  list.innerHTML = "";
  list.dataset.state = "waiting";
  setStatus(status, "sending…");
  const query = new URLSearchParams({ model: $("model").value, device: $("device").value });
  try {
    const response = await fetch("/api/classify?" + query, { method: "POST", body: file });
    await readEvents(response, (e) => {
      if ("wait" in e) setStatus(status, waitText(e.wait), "busy");
      else if (e.result) showLabels(e.result);
      else if (e.error) { list.dataset.state = "error"; setStatus(status, e.error, "error"); }
    });
  } catch (err) {
    list.dataset.state = "error";
    setStatus(status, err.message, "error");
  }
}

function showLabels(r) {
  const list = $("labels");
  list.innerHTML = "";
  for (const t of r.top) {
    const li = document.createElement("li");
    const name = document.createElement("span");
    name.className = "label-name";
    name.textContent = t.label || `class ${t.index}`;
    const score = document.createElement("span");
    score.className = "score";
    score.textContent = `${(t.score * 100).toFixed(1)}%`;
    const bar = document.createElement("div");
    bar.className = "bar";
    bar.style.width = Math.max(0.5, Math.min(100, t.score * 100)) + "%";
    li.append(name, score, bar);
    list.append(li);
  }
  list.dataset.state = "done";
  const modeled = r.modeled_stick_ms === undefined ? ""
    : ` (the virtual chip's host time; modeled on a real stick at 250 MHz: ${r.modeled_stick_ms.toFixed(2)} ms)`;
  setStatus($("see-status"), `${r.model} on ${r.device}: ${r.time_ms.toFixed(2)} ms per inference${modeled}`);
}

const drop = $("drop");
$("image-input").addEventListener("change", (e) => e.target.files[0] && classify(e.target.files[0]));
drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
drop.addEventListener("dragleave", () => drop.classList.remove("over"));
drop.addEventListener("drop", (e) => {
  e.preventDefault();
  drop.classList.remove("over");
  if (e.dataTransfer.files[0]) classify(e.dataTransfer.files[0]);
});

// --- Chip -------------------------------------------------------------------------------------
const fmt = (n) => Number(n).toLocaleString("en-US");
const unitColors = { mac: "#26a69a", dma: "#5c6bc0", ring: "#ef6c00", mesh: "#8e24aa", scalar: "#546e7a",
  usb_to_device_ms: "#1e88e5", usb_from_device_ms: "#3949ab", compute_ms_250MHz: "#26a69a", per_run_ms: "#90a4ae" };

function splitBar(el, parts, unit) {
  el.innerHTML = "";
  const total = parts.reduce((s, p) => s + p[1], 0);
  if (total <= 0) return;
  for (const [name, value] of parts) {
    if (value <= 0) continue;
    const d = document.createElement("div");
    d.style.width = (100 * value / total) + "%";
    d.style.background = unitColors[name] || "#78909c";
    d.textContent = `${name.replace(/_ms.*$/, "").replace(/_/g, " ")} ${unit(value)}`;
    d.title = d.textContent;
    el.append(d);
  }
}

async function loadChip() {
  const tiles = $("tiles"), traffic = $("traffic"), note = $("chip-note");
  tiles.dataset.state = "loading";
  const chip = await (await fetch("/api/chip")).json();
  tiles.innerHTML = "";
  traffic.innerHTML = "";
  $("time-split").innerHTML = "";
  $("busy").innerHTML = "";
  if (!chip) {
    tiles.dataset.state = "empty";
    note.textContent = "Nothing has run yet: classify an image in See first.";
    return;
  }
  const rows = [["device", chip.device], ["model", chip.model], ["host time", chip.time_ms.toFixed(2) + " ms"]];
  if (chip.usb) rows.push(["USB to the stick", fmt(chip.usb.to_device_bytes) + " B"],
    ["USB from the stick", fmt(chip.usb.from_device_bytes) + " B"]);
  if (chip.sim) {
    note.textContent = "From the virtual Edge TPU's statistics and clock.";
    const max = Math.max(1, ...chip.sim.tiles.map((t) => t.macs));
    for (const t of chip.sim.tiles) {
      const d = document.createElement("div");
      d.className = "tile";
      d.dataset.tile = t.tile;
      const heat = t.macs / max;
      d.style.background = `rgba(38, 166, 154, ${0.1 + 0.8 * heat})`;
      d.innerHTML = `<div class="tile-name">tile ${t.tile}</div><div class="tile-value">${fmt(t.macs)}</div>` +
        `<div class="tile-name">MACs</div>`;
      d.title = `narrow ${fmt(t.narrow_bytes)} B, wide ${fmt(t.wide_bytes)} B`;
      tiles.append(d);
    }
    tiles.dataset.state = "done";
    rows.push(["MACs (all tiles)", fmt(chip.sim.macs)], ["ring traffic", fmt(chip.sim.ring_bytes) + " B"],
      ["mesh traffic", fmt(chip.sim.mesh_bytes) + " B"]);
  } else {
    tiles.dataset.state = "none";
    note.textContent = chip.device === "usb"
      ? "A real stick: what the runtime measured (the tiles' work is only known on the virtual Edge TPU)."
      : "The CPU ran this model: no chip statistics.";
  }
  if (chip.modeled_stick) {
    const m = chip.modeled_stick;
    rows.push(["modeled stick time 250 MHz", m.total_ms_250MHz.toFixed(3) + " ms"],
      ["modeled stick time 500 MHz", m.total_ms_500MHz.toFixed(3) + " ms"], ["chip cycles", fmt(m.cycles)]);
    splitBar($("time-split"), [["compute_ms_250MHz", m.compute_ms_250MHz], ["usb_to_device_ms", m.usb_to_device_ms],
      ["usb_from_device_ms", m.usb_from_device_ms], ["per_run_ms", m.per_run_ms]], (v) => v.toFixed(3) + " ms");
    splitBar($("busy"), Object.entries(m.busy_cycles), (v) => fmt(v));
  }
  for (const [k, v] of rows) {
    const tr = document.createElement("tr");
    tr.innerHTML = "<td></td><td></td>";
    tr.children[0].textContent = k;
    tr.children[1].textContent = v;
    traffic.append(tr);
  }
}

// --- start ------------------------------------------------------------------------------------
async function init() {
  info = await (await fetch("/api/info")).json();
  const s = info.story;
  const note = $("story-note");
  if (!s.available) {
    note.textContent = "No stories: " + s.error;
    $("start").disabled = true;
  } else {
    $("steps").max = s.seq_len;
    note.textContent = (s.random
      ? "Writing with a random checkpoint (the text is noise). For real stories get stories15M.bin " +
        "(https://huggingface.co/karpathy/tinyllamas/resolve/main/stories15M.bin) and start " +
        "tinycoral serve --checkpoint stories15M.bin -z tokenizer.bin. "
      : "") + "Checkpoint: " + s.checkpoint + ". Default device: " + s.device +
      " (cpu: float32; sim, usb: the layer matmuls on the Edge TPU in int8, as tinycoral generate " +
      "--device writes them; auto: a stick if plugged in, else the CPU).";
  }
  const select = $("model");
  for (const m of info.see.models) select.add(new Option(m, m));
  $("see-note").textContent = info.see.models.length
    ? `Default device: ${info.see.device}. Google's compiled models, or ours, from the --model folder.`
    : "No model: start tinycoral serve with --model M_edgetpu.tflite --labels labels.txt.";
  document.body.dataset.ready = "1";
}

showView();
init();
