// The script of gatedgrad report's page (nn/analysis/report.h), compiled into the library: it
// draws the maps, thumbnails and sink tables from the JSON in #data, and writes "ok: N maps" or
// the first error it met into #status.
"use strict";
const status = document.getElementById("status");
window.onerror = (message, source, line) => {
  status.textContent = "error: " + message + " (line " + line + ")";
  status.className = "error";
  status.hidden = false;
};
const data = JSON.parse(document.getElementById("data").textContent);

// A probability in [0, 1] as the PNG heat maps of plot.cpp colour it: white, light blue, dark blue.
function heat(p) {
  const stops = [[255, 255, 255], [107, 174, 214], [8, 48, 107]];
  const u = 2 * Math.min(Math.max(p, 0), 1), seg = u < 1 ? 0 : 1;
  return stops[0].map((_, k) => Math.round(stops[seg][k] + (u - seg) * (stops[seg + 1][k] - stops[seg][k])));
}
// A gate value in [0, 1]: white (closed) to orange (open).
function gateColor(g) {
  const v = Math.min(Math.max(g, 0), 1);
  return [255 - v * 25, 255 - v * 170, 255 - v * 242].map(Math.round);
}

// One pixel per value, rows × cols, row by row; CSS scales the canvas up with crisp cells.
function paint(canvas, values, rows, cols, color) {
  canvas.width = cols;
  canvas.height = rows;
  const context = canvas.getContext("2d");
  const image = context.createImageData(cols, rows);
  values.forEach((v, i) => {
    const [r, g, b] = color(v);
    image.data.set([r, g, b, 255], 4 * i);
  });
  context.putImageData(image, 0, 0);
}

// Token i of a run as text: the tokenizer's, which the page got (report --prompt), or a byte
// model's token named here.
function token(run, i) {
  if (run.token_texts) return "'" + run.token_texts[i] + "'";
  const id = run.tokens[i];
  if (id === 256) return "BOS";
  if (id >= 33 && id < 127) return "'" + String.fromCharCode(id) + "'";
  return id === 32 ? "' '" : "\\x" + id.toString(16).padStart(2, "0");
}

function element(tag, attributes, ...children) {
  const e = document.createElement(tag);
  Object.entries(attributes || {}).forEach(([k, v]) => e.setAttribute(k, v));
  children.forEach((c) => e.append(c));
  return e;
}

// analysis.h writes −1 for what a layer does not have (a gate), and JSON writes NaN as null.
const fixed = (v, digits) => (v === null || v < 0 ? "–" : v.toFixed(digits));

// What a run's score function adds to the first-token share (analysis.h): softmax1 and sink the
// slot's share, sigmoid and softpick the row sum.
const hasSlot = (s) => s.score_fn === "softmax1" || s.score_fn === "sink";
const hasRowSum = (s) => s.score_fn === "sigmoid" || s.score_fn === "softpick";
const percent = (v) => (100 * v).toFixed(1) + "%";

// The sink report of each run, as `gatedgrad sink` prints it.
function sinkTables() {
  const box = document.getElementById("sink-tables");
  for (const run of data.runs) {
    const s = run.sink, slot = hasSlot(s), rows = hasRowSum(s);
    const head = ["layer", "first-token share", ...(slot ? ["slot"] : []), ...(rows ? ["row sum"] : []), "sink",
                  "entropy", "gated entropy", "gate mean", "gate<0.1", "max|h|", "max|h@0|"];
    const table = element("table", {}, element("tr", {}, ...head.map((h) => element("th", {}, h))));
    s.layers.forEach((l) => {
      const cells = [String(l.layer), fixed(l.mean_first_token_share, 3), ...(slot ? [fixed(l.mean_slot_share, 3)] : []),
                     ...(rows ? [fixed(l.mean_row_sum, 3)] : []), l.sink ? "yes" : "no", fixed(l.entropy, 3),
                     fixed(l.gated_entropy, 3), fixed(l.gate_mean, 3), fixed(l.gate_below_0_1, 3),
                     fixed(l.max_abs_hidden, 1), fixed(l.max_abs_hidden_first, 1)];
      table.append(element("tr", l.sink ? {class: "sink"} : {}, ...cells.map((c) => element("td", {}, c))));
    });
    const above = rows ? "normalised alpha" : slot ? "alpha or slot" : "alpha";
    const summary = "mean first-token share " + fixed(s.mean_first_token_share, 3) +
                    (slot ? ", slot share " + fixed(s.mean_slot_share, 3) : "") +
                    (rows ? ", row sum " + fixed(s.mean_row_sum, 3) : "") + "; sink layers " + s.sink_layers + " of " +
                    s.layers.length + "; sink heads (" + above + " > " + s.threshold + ") " + s.sink_heads + " of " +
                    s.heads + (s.score_fn === "softmax" ? "" : "; sink rate (Gu et al. 2024): first token " +
                    percent(s.first_token_sink_rate) + (slot ? ", slot " + percent(s.slot_sink_rate) : ""));
    box.append(element("div", {class: "run"}, element("h3", {}, run.name + " (" + run.gate + ")"),
                       element("div", {class: "axis"}, run.sink_data), table, element("div", {}, summary)));
  }
}

const layers = Math.max(...data.runs.map((r) => r.layers.length));
const widest = data.runs.find((r) => r.layers.length == layers);  // its layers' indices name the choices
const heads = Math.max(...data.runs.map((r) => Math.max(...r.layers.map((l) => l.probs.length))));
const layerSelect = document.getElementById("layer"), headSelect = document.getElementById("head");
for (let l = 0; l < layers; ++l) layerSelect.append(element("option", {value: l}, String(widest.sink.layers[l].layer)));
for (let h = 0; h < heads; ++h) headSelect.append(element("option", {value: h}, String(h)));

// Per run: the chosen map, its gate column, and what the pointer is over.
const panels = data.runs.map((run) => {
  const map = element("canvas", {class: "map"}), gate = element("canvas", {class: "gate"});
  const readout = element("div", {class: "readout"}, "point at the map to read it");
  const title = element("h3", {}, run.name + " (" + run.gate + ")");
  const pair = element("div", {class: "pair"}, map);
  if (run.layers.some((l) => l.gates)) pair.append(gate);
  // The text: a byte model's bytes after BOS read as UTF-8, or the tokenizer's tokens one box each,
  // which the pointer on the map marks (its query and its key).
  const bytes = Uint8Array.from(run.tokens.filter((t) => t < 256));
  const spans = (run.token_texts || []).map((t, i) => element("span", {class: "tok", title: "token " + i}, t));
  const text = run.token_texts ? element("div", {class: "text tokens"}, ...spans)
                               : element("div", {class: "text"}, "⟨BOS⟩" + new TextDecoder().decode(bytes));
  document.getElementById("maps").append(
      element("div", {class: "run"}, title, text, element("div", {class: "axis"}, "rows: queries, top to bottom; columns: keys, " +
              "left to right" + (run.layers.some((l) => l.gates) ? "; right: the head's gate at each query (white 0, orange 1)" : "")),
              pair, readout));
  return {run, map, gate, readout, spans};
});

// Marks query q and key k among a run's token boxes (none: -1).
function mark(spans, q, k) {
  spans.forEach((s, i) => s.className = "tok" + (i === q ? " query" : "") + (i === k ? " key" : ""));
}

// One head's shares: α, and the slot's share or the row sum where its score function has one.
function headShares(s, layer, head, digits, short) {
  const l = s.layers[layer];
  return (short ? "α " : "first-token share ") + fixed(l.first_token_share[head], digits) +
         (hasSlot(s) ? ", slot " + fixed(l.slot_share[head], digits) : "") +
         (hasRowSum(s) ? (short ? ", Σ " : ", row sum ") + fixed(l.row_sum[head], digits) : "");
}

// Shows one layer and head in every run's panel; the address keeps the choice (#layer=1&head=2),
// so a link or a reload opens the page on it.
function show(layer, head) {
  layerSelect.value = layer;
  headSelect.value = head;
  history.replaceState(null, "", "#layer=" + layer + "&head=" + head);
  for (const {run, map, gate, readout, spans} of panels) {
    mark(spans, -1, -1);
    const T = run.tokens.length, l = run.layers[layer];
    if (!l || head >= l.probs.length) {
      paint(map, [0], 1, 1, heat);
      paint(gate, [0], 1, 1, gateColor);
      map.onmousemove = null;
      readout.textContent = "this run has no layer " + layer + ", head " + head;
      continue;
    }
    paint(map, l.probs[head], T, T, heat);
    paint(gate, l.gates ? l.gates[head] : [0], l.gates ? T : 1, 1, gateColor);
    readout.textContent = "layer " + run.sink.layers[layer].layer + ", head " + head + ": " +
                          headShares(run.sink, layer, head, 3) +
                          (run.token_texts ? " (over the prompt)" : " (over the sink's sequences)");
    map.onmousemove = (event) => {
      const q = Math.floor(event.offsetY / map.clientHeight * T), k = Math.floor(event.offsetX / map.clientWidth * T);
      if (q < 0 || k < 0 || q >= T || k >= T) return;
      mark(spans, q, k);
      readout.textContent = "query " + q + " " + token(run, q) + " → key " + k + " " + token(run, k) +
                            ": " + fixed(l.probs[head][q * T + k], 4) + (l.gates ? "; gate " + fixed(l.gates[head][q], 3) : "");
    };
  }
  document.querySelectorAll(".thumb").forEach((t) =>
      t.classList.toggle("chosen", t.dataset.layer == layer && t.dataset.head == head));
}

// Every layer and head of each run, small; a click shows it above.
function thumbnails() {
  let drawn = 0;
  for (const run of data.runs) {
    const T = run.tokens.length, table = element("table", {class: "thumbs"});
    run.layers.forEach((l, layer) => {
      const row = element("tr", {}, element("td", {}, "layer " + run.sink.layers[layer].layer));
      l.probs.forEach((probs, head) => {
        const canvas = element("canvas", {class: "thumb", "data-layer": layer, "data-head": head});
        paint(canvas, probs, T, T, heat);
        canvas.onclick = () => show(layer, head);
        ++drawn;
        row.append(element("td", {}, canvas, element("br"), "head " + head + ", " + headShares(run.sink, layer, head, 2, true)));
      });
      table.append(row);
    });
    document.getElementById("thumbs").append(element("div", {class: "run"}, element("h3", {}, run.name + " (" + run.gate + ")"), table));
  }
  return drawn;
}

sinkTables();
const drawn = thumbnails();
layerSelect.onchange = headSelect.onchange = () => show(+layerSelect.value, +headSelect.value);
const asked = new URLSearchParams(location.hash.slice(1));
const clamp = (v, n) => Math.min(Math.max(Math.floor(+v) || 0, 0), n - 1);
show(clamp(asked.get("layer"), layers), clamp(asked.get("head"), heads));
if (status.className !== "error") status.textContent = "ok: " + drawn + " maps";
