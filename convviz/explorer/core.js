// convviz explorer: the numeric core.  Pure functions, no DOM, so that Node's own
// test runner and Python (through Node or Chromium) can check it.
//
// The geometry mirrors convviz/geometry.py rule for rule (TensorFlow's conventions):
//   eff = (kernel - 1) * dilation + 1
//   SAME: out = ceil(in / stride), need = max(0, (out - 1) * stride + eff - in),
//         before = floor(need / 2), after = need - before (the odd cell goes after)
//   VALID: no padding; EXPLICIT: the given pads
//   VALID / EXPLICIT: out = floor((in + before + after - eff) / stride) + 1, or 0
//   output o and tap t read input i = o * stride - before + t * dilation
// The example numbers come from a 32-bit hash mirrored in convviz/explorer/_numbers.py.

export const OPS = ["input_grad", "depthwise_filter_grad", "forward"];
// Old op names still read (links and presets made before the rename), each with its name now.
export const OP_ALIASES = { filter_grad: "depthwise_filter_grad" };
export const PADDINGS = ["SAME", "VALID", "EXPLICIT"];
export const VALUE_MODES = ["integers", "decimals"];
export const THEMES = ["auto", "light", "dark"];

// Every parameter of the explorer, with its default and its range.  The names are
// the anywidget traits, the controls' `name` attributes and the state's keys.
export const PARAMS = {
  input_h: { default: 6, min: 1, max: 32 },
  input_w: { default: 6, min: 1, max: 32 },
  kernel_h: { default: 3, min: 1, max: 9 },
  kernel_w: { default: 3, min: 1, max: 9 },
  stride_h: { default: 2, min: 1, max: 6 },
  stride_w: { default: 2, min: 1, max: 6 },
  dilation_h: { default: 1, min: 1, max: 6 },
  dilation_w: { default: 1, min: 1, max: 6 },
  padding: { default: "SAME", choices: PADDINGS },
  pad_top: { default: 0, min: 0, max: 8 },
  pad_bottom: { default: 0, min: 0, max: 8 },
  pad_left: { default: 0, min: 0, max: 8 },
  pad_right: { default: 0, min: 0, max: 8 },
  op: { default: "input_grad", choices: OPS },
  multiplier: { default: 1, min: 1, max: 4 },
  seed: { default: 0, min: 0, max: 99999 },
  values: { default: "integers", choices: VALUE_MODES },
  theme: { default: "auto", choices: THEMES },
};

export const OP_TITLES = {
  input_grad: "input gradient: W, dL/dy \u2192 dL/dx",
  depthwise_filter_grad: "depthwise filter gradient: x, dL/dy \u2192 dL/dW",
  forward: "forward: x, W \u2192 y",
};

export function defaults() {
  const out = {};
  for (const [name, spec] of Object.entries(PARAMS)) out[name] = spec.default;
  return out;
}

// A value for parameter `name`, or the default when it is not one.
export function coerce(name, value) {
  const spec = PARAMS[name];
  if (!spec) return undefined;
  if (name === "op" && Object.hasOwn(OP_ALIASES, value)) value = OP_ALIASES[value];
  if (spec.choices) return spec.choices.includes(value) ? value : spec.default;
  const n = typeof value === "number" ? value : Number(String(value).trim());
  if (!Number.isInteger(n)) return spec.default;
  return Math.min(spec.max, Math.max(spec.min, n));
}

export function normalize(params) {
  const out = defaults();
  for (const name of Object.keys(PARAMS)) if (params && params[name] !== undefined) out[name] = coerce(name, params[name]);
  return out;
}

// ---------------------------------------------------------------------------------
// Geometry

export function effectiveKernel(kernel, dilation) {
  return (kernel - 1) * dilation + 1;
}

export function samePadding(input, kernel, stride, dilation) {
  const out = Math.ceil(input / stride);
  const need = Math.max(0, (out - 1) * stride + effectiveKernel(kernel, dilation) - input);
  return [Math.floor(need / 2), need - Math.floor(need / 2), need];
}

// One spatial axis: sizes, pads, and which input cells no window reads.
export function axisGeometry(input, kernel, stride, dilation, padding, explicitBefore = 0, explicitAfter = 0) {
  let before = 0, after = 0, need = 0;
  if (padding === "SAME") [before, after, need] = samePadding(input, kernel, stride, dilation);
  else if (padding === "EXPLICIT") [before, after] = [explicitBefore, explicitAfter];
  const eff = effectiveKernel(kernel, dilation);
  const padded = input + before + after;
  const span = padded - eff;
  const out = span < 0 ? 0 : Math.floor(span / stride) + 1;
  const lastRead = out === 0 ? -1 : (out - 1) * stride + eff - 1 - before; // in input coordinates
  const coverage = new Array(input).fill(0);
  for (let t = 0; t < kernel; t++)
    for (let o = 0; o < out; o++) {
      const i = o * stride - before + t * dilation;
      if (i >= 0 && i < input) coverage[i] += 1;
    }
  const lost = [];
  coverage.forEach((count, i) => { if (count === 0) lost.push(i); });
  return { input, kernel, stride, dilation, padding, before, after, need, eff, padded, out, lastRead,
           unreadAfter: out === 0 ? padded : padded - ((out - 1) * stride + eff), coverage, lost };
}

export function inputIndex(axis, o, t) {
  return o * axis.stride - axis.before + t * axis.dilation;
}

// (output, tap) pairs of one axis that land on input index i (padding included).
export function pairsAt(axis, i) {
  const pairs = [];
  for (let t = 0; t < axis.kernel; t++) {
    const num = i + axis.before - t * axis.dilation;
    if (num < 0 || num % axis.stride !== 0) continue;
    const o = num / axis.stride;
    if (o < axis.out) pairs.push([o, t]);
  }
  return pairs;
}

// The geometry of the explorer's parameters, or an `error` saying why it is none.
export function geometry(params) {
  const p = normalize(params);
  const rows = axisGeometry(p.input_h, p.kernel_h, p.stride_h, p.dilation_h, p.padding, p.pad_top, p.pad_bottom);
  const cols = axisGeometry(p.input_w, p.kernel_w, p.stride_w, p.dilation_w, p.padding, p.pad_left, p.pad_right);
  const g = { params: p, rows, cols, multiplier: p.op === "depthwise_filter_grad" ? p.multiplier : 1, error: null };
  if (rows.out === 0 || cols.out === 0)
    g.error = `No window fits: the ${rows.eff}x${cols.eff} effective kernel is larger than the ` +
      `${rows.padded}x${cols.padded} padded input, so the output (and its gradient) is empty.`;
  return g;
}

// ---------------------------------------------------------------------------------
// Tensors: a stack of `channels` row-major planes in one Float64Array.

export function tensor(rows, cols, channels = 1, data = null) {
  return { rows, cols, channels, data: data || new Float64Array(rows * cols * channels) };
}

export function at(t, r, c, ch = 0) {
  return t.data[(ch * t.rows + r) * t.cols + c];
}

function add(t, r, c, ch, v) {
  t.data[(ch * t.rows + r) * t.cols + c] += v;
}

// ---------------------------------------------------------------------------------
// Example numbers: a 32-bit integer hash of (seed, salt, index).  Salts: x 1, W 2, dy 3.

export const SALTS = { x: 1, w: 2, dy: 3 };
const INTEGER_POOL = [-2, -1, 1, 2, 3];

export function hash32(seed, salt, index) {
  let h = Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(salt + 1, 0xc2b2ae35) ^ Math.imul(index + 1, 0x27d4eb2f);
  h ^= h >>> 16;
  h = Math.imul(h, 0x7feb352d);
  h ^= h >>> 15;
  h = Math.imul(h, 0x846ca68b);
  h ^= h >>> 16;
  return h >>> 0;
}

// Integers from {-2, -1, 1, 2, 3}; decimals from {-0.9 .. -0.1, 0.1 .. 0.9}.
export function exampleValue(seed, salt, index, mode) {
  const h = hash32(seed, salt, index);
  if (mode === "decimals") {
    const k = h % 18;
    return (k < 9 ? k - 9 : k - 8) / 10;
  }
  return INTEGER_POOL[h % 5];
}

export function exampleTensor(seed, salt, rows, cols, channels, mode) {
  const t = tensor(rows, cols, channels);
  for (let i = 0; i < t.data.length; i++) t.data[i] = exampleValue(seed, salt, i, mode);
  return t;
}

// The input panels each op reads, with their shapes.
export function inputShapes(g) {
  const { rows, cols } = g;
  const shapes = {
    input_grad: { w: [rows.kernel, cols.kernel, 1], dy: [rows.out, cols.out, 1] },
    depthwise_filter_grad: { x: [rows.input, cols.input, 1], dy: [rows.out, cols.out, g.multiplier] },
    forward: { x: [rows.input, cols.input, 1], w: [rows.kernel, cols.kernel, 1] },
  };
  return shapes[g.params.op];
}

export const OUTPUT_PANEL = { input_grad: "dx", depthwise_filter_grad: "dw", forward: "y" };

// The op's inputs: given tensors where their shapes fit, example numbers otherwise.
export function inputs(g, given = {}) {
  const out = {};
  for (const [name, [r, c, ch]] of Object.entries(inputShapes(g))) {
    const t = given[name];
    out[name] = t && t.rows === r && t.cols === c && t.channels === ch ? t
      : exampleTensor(g.params.seed, SALTS[name], r, c, ch, g.params.values);
  }
  return out;
}

// ---------------------------------------------------------------------------------
// The three ops (float64, scatter order: output cell, then tap).

export function inputGrad(g, w, dy) {
  const { rows, cols } = g;
  const dx = tensor(rows.input, cols.input, 1);
  for (let oh = 0; oh < rows.out; oh++)
    for (let ow = 0; ow < cols.out; ow++)
      for (const t of windowTerms(g, oh, ow)) if (!t.pad) add(dx, t.ih, t.iw, 0, at(dy, oh, ow) * at(w, t.kh, t.kw));
  return dx;
}

export function depthwiseFilterGrad(g, x, dy) {
  const { rows, cols } = g;
  const dw = tensor(rows.kernel, cols.kernel, g.multiplier);
  for (let m = 0; m < g.multiplier; m++)
    for (let kh = 0; kh < rows.kernel; kh++)
      for (let kw = 0; kw < cols.kernel; kw++) {
        let s = 0;
        for (const term of filterTerms(g, kh, kw)) s += at(x, term.ih, term.iw) * at(dy, term.oh, term.ow, m);
        dw.data[(m * rows.kernel + kh) * cols.kernel + kw] = s;
      }
  return dw;
}

export function forward(g, x, w) {
  const { rows, cols } = g;
  const y = tensor(rows.out, cols.out, 1);
  for (let oh = 0; oh < rows.out; oh++)
    for (let ow = 0; ow < cols.out; ow++) {
      let s = 0;
      for (const term of windowTerms(g, oh, ow)) if (!term.pad) s += at(x, term.ih, term.iw) * at(w, term.kh, term.kw);
      y.data[oh * cols.out + ow] = s;
    }
  return y;
}

// Everything the explorer shows for one setting: geometry, inputs and the output.
export function compute(params, given = {}) {
  const g = geometry(params);
  if (g.error) return { g, tensors: {}, output: null };
  const t = inputs(g, given);
  const op = g.params.op;
  if (op === "input_grad") t.dx = inputGrad(g, t.w, t.dy);
  else if (op === "depthwise_filter_grad") t.dw = depthwiseFilterGrad(g, t.x, t.dy);
  else t.y = forward(g, t.x, t.w);
  return { g, tensors: t, output: OUTPUT_PANEL[op] };
}

// ---------------------------------------------------------------------------------
// Which cells make which: the terms of a worked sum, and the cells a hover lights.

// Output cell (oh, ow)'s tap (kh, kw), with the input cell it reads (maybe padding).
function term(g, oh, ow, kh, kw) {
  const { rows, cols } = g;
  const ih = inputIndex(rows, oh, kh), iw = inputIndex(cols, ow, kw);
  return { oh, ow, kh, kw, ih, iw, pad: ih < 0 || ih >= rows.input || iw < 0 || iw >= cols.input };
}

// Every tap of output cell (oh, ow)'s window, with the input cell it reads (maybe padding).
export function windowTerms(g, oh, ow) {
  const terms = [];
  for (let kh = 0; kh < g.rows.kernel; kh++)
    for (let kw = 0; kw < g.cols.kernel; kw++) terms.push(term(g, oh, ow, kh, kw));
  return terms;
}

// The (output cell, tap) pairs that reach input cell (ih, iw): the terms of dx[ih, iw].
export function cellTerms(g, ih, iw) {
  const terms = [];
  for (const [oh, kh] of pairsAt(g.rows, ih))
    for (const [ow, kw] of pairsAt(g.cols, iw)) terms.push({ oh, ow, kh, kw, ih, iw, pad: false });
  return terms;
}

// The output cells whose tap (kh, kw) reads a real input cell: the terms of dW[kh, kw].
export function filterTerms(g, kh, kw) {
  return tapTerms(g, kh, kw).filter((t) => !t.pad);
}

// Every tap's reach (padding included): output cells and the input cell each reads.
export function tapTerms(g, kh, kw) {
  const terms = [];
  for (let oh = 0; oh < g.rows.out; oh++)
    for (let ow = 0; ow < g.cols.out; ow++) terms.push(term(g, oh, ow, kh, kw));
  return terms;
}

// ---------------------------------------------------------------------------------
// Words: why a padding cell is there, why a real row gets no gradient.

const SIDES = { rows: ["top", "bottom", "rows"], cols: ["left", "right", "columns"] };

export function paddingReason(g, axisName, before) {
  const axis = g[axisName];
  const [first, second, unit] = SIDES[axisName];
  const side = before ? first : second;
  const amount = before ? axis.before : axis.after;
  if (axis.padding === "SAME") {
    return `SAME padding: the last window needs ${axis.need} extra ${unit} ` +
      `((out \u2212 1)\u00b7stride + eff \u2212 in = (${axis.out} \u2212 1)\u00b7${axis.stride} + ${axis.eff} \u2212 ${axis.input} = ${axis.need}); ` +
      `TensorFlow puts \u230a${axis.need}/2\u230b = ${axis.before} ${first} and ${axis.after} ${second} ` +
      `(an odd one goes ${second}). This is one of the ${amount} ${side} ${unit}.`;
  }
  return `Explicit padding: you asked for ${amount} ${side} ${unit}.`;
}

export const PADDING_HOLDS = "Padding holds zeros and is not part of x: gradient that lands on it is dropped.";

// Why real input index i along `axisName` is read by no window (null when it is read).
export function lostReason(g, axisName, i) {
  const axis = g[axisName];
  if (axis.coverage[i] !== 0) return null;
  const unit = axisName === "rows" ? "row" : "column";
  if (i > axis.lastRead) {
    return `No window reads ${unit} ${i}: the windows stop at ${unit} ${axis.lastRead} ` +
      `(padded ${axis.padded} \u2212 eff ${axis.eff} = ${axis.padded - axis.eff} is not a multiple of stride ${axis.stride}), ` +
      `so its gradient is exactly 0.`;
  }
  return `No window reads ${unit} ${i}: with stride ${axis.stride} and dilation ${axis.dilation} the taps skip it, ` +
    `so its gradient is exactly 0.`;
}

// ---------------------------------------------------------------------------------
// Numbers as text.

export function formatNumber(v) {
  if (!Number.isFinite(v)) return String(v);
  if (Object.is(v, -0)) v = 0;
  if (Number.isInteger(v)) return v < 0 ? "\u2212" + String(-v) : String(v);
  const text = String(Math.abs(v) >= 100 ? Number(v.toFixed(1)) : Number(v.toFixed(2)));
  return text.startsWith("-") ? "\u2212" + text.slice(1) : text;
}

// Full precision, for data-value (Python's float() reads it back exactly).
export function exactNumber(v) {
  return Object.is(v, -0) ? "0" : String(v);
}

// ---------------------------------------------------------------------------------
// The URL query: `input`, `kernel`, `stride`, `dilation` as N or HxW; `pads` as
// top,bottom,left,right; `padding`, `op`, `multiplier`, `seed`, `values`, `theme`.

const PAIRS = { input: ["input_h", "input_w"], kernel: ["kernel_h", "kernel_w"],
                stride: ["stride_h", "stride_w"], dilation: ["dilation_h", "dilation_w"] };
const SINGLES = ["padding", "op", "multiplier", "seed", "values", "theme"];
const PAD_NAMES = ["pad_top", "pad_bottom", "pad_left", "pad_right"];

export function parseQuery(search) {
  const q = new URLSearchParams(search || "");
  const out = {};
  for (const [key, [h, w]] of Object.entries(PAIRS)) {
    if (!q.has(key)) continue;
    const parts = q.get(key).toLowerCase().split(/[x,\u00d7]/);
    if (parts.length === 1) parts.push(parts[0]);
    if (parts.length === 2) { out[h] = coerce(h, parts[0]); out[w] = coerce(w, parts[1]); }
  }
  if (q.has("pads")) {
    const parts = q.get("pads").split(",");
    if (parts.length === 4) PAD_NAMES.forEach((name, i) => { out[name] = coerce(name, parts[i]); });
  }
  for (const key of SINGLES) {
    if (!q.has(key)) continue;
    const raw = q.get(key);
    out[key] = coerce(key, key === "padding" ? raw.toUpperCase() : raw);
  }
  return out;
}

export function toQuery(params) {
  const p = normalize(params);
  const parts = [];
  for (const [key, [h, w]] of Object.entries(PAIRS)) parts.push(`${key}=${p[h] === p[w] ? p[h] : `${p[h]}x${p[w]}`}`);
  parts.push(`padding=${p.padding}`);
  if (p.padding === "EXPLICIT") parts.push(`pads=${PAD_NAMES.map((n) => p[n]).join(",")}`);
  parts.push(`op=${p.op}`);
  if (p.op === "depthwise_filter_grad") parts.push(`multiplier=${p.multiplier}`);
  parts.push(`seed=${p.seed}`);
  if (p.values !== "integers") parts.push(`values=${p.values}`);
  if (p.theme !== "auto") parts.push(`theme=${p.theme}`);
  return "?" + parts.join("&");
}

// A key naming a setting's numbers (the kernel's reply in Jupyter carries it).
export function settingKey(params) {
  const p = normalize(params);
  return Object.keys(PARAMS).filter((k) => k !== "theme").map((k) => `${k}=${p[k]}`).join(";");
}

// ---------------------------------------------------------------------------------
// Colour: palettes and the WCAG contrast rule.

// matplotlib's PuOr and berlin (diverging, colour-blind safe; berlin is dark in the
// middle for the dark theme), 11 stops each.
export const PALETTES = {
  diverging_light: ["#7f3b08", "#b25706", "#e08214", "#fcb761", "#fee0b6", "#f6f6f7", "#d8daeb", "#b1aad1", "#8073ac", "#532687", "#2d004b"],
  diverging_dark: ["#9eb0ff", "#62a6e0", "#3280a6", "#20526a", "#112732", "#190c09", "#371000", "#61200b", "#964a36", "#ca7b71", "#ffadad"],
};

function hexToRgb(hex) {
  const n = parseInt(hex.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

// Colour at position u in [0, 1] of an 11-stop palette, as [r, g, b] (0-255).
export function paletteColor(stops, u) {
  const x = Math.min(1, Math.max(0, u)) * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(x));
  const a = hexToRgb(stops[i]), b = hexToRgb(stops[i + 1]), f = x - i;
  return a.map((v, k) => Math.round(v + (b[k] - v) * f));
}

export function relativeLuminance([r, g, b]) {
  const lin = (v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}

export function contrastRatio(a, b) {
  const la = relativeLuminance(a), lb = relativeLuminance(b);
  return (Math.max(la, lb) + 0.05) / (Math.min(la, lb) + 0.05);
}

// Black or white, whichever contrasts more with the background (always >= 4.58:1).
export function textColorOn(rgb) {
  return contrastRatio(rgb, [0, 0, 0]) >= contrastRatio(rgb, [255, 255, 255]) ? [0, 0, 0] : [255, 255, 255];
}

export function rgbCss([r, g, b]) {
  return `rgb(${r}, ${g}, ${b})`;
}

// A palette sampled at PALETTE_STEPS + 1 points, as CSS rules `.<prefix>-<i>` with the
// background and its WCAG text colour: cells carry a class instead of an inline style,
// which a redraw of 1000s of cells restyles much faster.
export const PALETTE_STEPS = 512;

export function paletteRules(stops, prefix) {
  const rules = [];
  for (let i = 0; i <= PALETTE_STEPS; i++) {
    const bg = paletteColor(stops, i / PALETTE_STEPS);
    rules.push(`.cvz-explorer .${prefix}-${i}{background:${rgbCss(bg)};color:${rgbCss(textColorOn(bg))}}`);
  }
  return rules.join("\n");
}

// The step of the palette showing `v` on a scale of +-`vmax`.
export function paletteStep(v, vmax) {
  return Math.round((0.5 + 0.5 * v / vmax) * PALETTE_STEPS);
}
