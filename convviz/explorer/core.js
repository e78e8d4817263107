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
// A transposed convolution (PyTorch's conv_transpose2d) is the input gradient of the
// convolution going the other way: its output is that convolution's input, of size
// (in - 1) * stride - 2 * padding + eff + output_padding, padded (padding, padding - output_padding).
// Channels: a convolution's output channel co belongs to group co / (out / groups) and reads
// that group's in / groups input channels; depthwise is groups = in channels, each read by
// `multiplier` output channels (co = c * multiplier + m).
// The example numbers come from a 32-bit hash mirrored in convviz/explorer/_setting.py.

// The explorer's modes, one per public op, by the public function's name.  Mirrors the
// op records of convviz.ops (tests/test_explorer_core.py holds them equal): the roles of
// the two tensors an op is given, in its arguments' order, and the role it returns.
export const OP_RECORDS = {
  conv2d: { given: ["input", "filter"], result: "output", depthwise: false, transposed: false,
            label: "conv2d (forward)", title: "conv2d: x, W \u2192 y" },
  conv2d_backprop_input: { given: ["filter", "output"], result: "input", depthwise: false, transposed: false,
                           label: "conv2d_backprop_input", title: "input gradient: W, dL/dy \u2192 dL/dx" },
  conv2d_backprop_filter: { given: ["input", "output"], result: "filter", depthwise: false, transposed: false,
                            label: "conv2d_backprop_filter", title: "filter gradient: x, dL/dy \u2192 dL/dW" },
  depthwise_conv2d_native: { given: ["input", "filter"], result: "output", depthwise: true, transposed: false,
                             label: "depthwise_conv2d_native", title: "depthwise forward: x, W \u2192 y" },
  depthwise_conv2d_native_backprop_input: { given: ["filter", "output"], result: "input", depthwise: true,
                                            transposed: false, label: "depthwise_conv2d_native_backprop_input",
                                            title: "depthwise input gradient: W, dL/dy \u2192 dL/dx" },
  depthwise_conv2d_native_backprop_filter: { given: ["input", "output"], result: "filter", depthwise: true,
                                             transposed: false, label: "depthwise_conv2d_native_backprop_filter",
                                             title: "depthwise filter gradient: x, dL/dy \u2192 dL/dW" },
  conv_transpose2d: { given: ["output", "filter"], result: "input", depthwise: false, transposed: true,
                      label: "conv_transpose2d (PyTorch)", title: "conv_transpose2d: x, W \u2192 y (PyTorch)" },
};
export const OPS = Object.keys(OP_RECORDS);
// Short names of the first explorer, still read (links, presets and calls made before v3).
export const OP_ALIASES = {
  forward: "conv2d", input_grad: "conv2d_backprop_input",
  depthwise_filter_grad: "depthwise_conv2d_native_backprop_filter", filter_grad: "depthwise_conv2d_native_backprop_filter",
};
export const PADDINGS = ["SAME", "VALID", "EXPLICIT"];
export const VALUE_MODES = ["integers", "decimals"];
export const THEMES = ["auto", "light", "dark"];
export const SWITCH = ["off", "on"];
export const ROLES = ["input", "filter", "output"];

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
  output_padding_h: { default: 0, min: 0, max: 5 },
  output_padding_w: { default: 0, min: 0, max: 5 },
  op: { default: "conv2d_backprop_input", choices: OPS },
  in_channels: { default: 1, min: 1, max: 4 },
  out_channels: { default: 1, min: 1, max: 4 },
  groups: { default: 1, min: 1, max: 4 },
  multiplier: { default: 1, min: 1, max: 4 },
  batch: { default: 1, min: 1, max: 2 },
  seed: { default: 0, min: 0, max: 99999 },
  values: { default: "integers", choices: VALUE_MODES },
  symbols: { default: "off", choices: SWITCH },
  practice: { default: "off", choices: SWITCH },
  theme: { default: "auto", choices: THEMES },
};

export const OP_TITLES = Object.fromEntries(OPS.map((op) => [op, OP_RECORDS[op].title]));

// The panel of each of an op's tensors: given tensors x, W, dy; results dx, dW, y.  A
// transposed convolution's input is the convolution's output role (x), and its output
// the convolution's input role (y).
const GIVEN_PANELS = { input: "x", filter: "w", output: "dy" };
const RESULT_PANELS = { input: "dx", filter: "dw", output: "y" };
const TRANSPOSED_PANELS = { output: "x", filter: "w", input: "y" };

// The panels of `op`, left to right (its two given tensors, then its result), with the
// role of each panel and the panel of each role.
export function opPanels(op) {
  const rec = OP_RECORDS[op];
  const panelOf = {};
  for (const role of ROLES)
    panelOf[role] = rec.transposed ? TRANSPOSED_PANELS[role] : (role === rec.result ? RESULT_PANELS : GIVEN_PANELS)[role];
  const layout = [...rec.given.map((role) => panelOf[role]), panelOf[rec.result]];
  const roleOf = Object.fromEntries(ROLES.map((role) => [panelOf[role], role]));
  return { layout, panelOf, roleOf, output: panelOf[rec.result], padded: panelOf.input };
}

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

// Every parameter, coerced; a transposed convolution's padding is PyTorch's, the same on
// both sides of an axis (pad_top and pad_left; EXPLICIT).
export function normalize(params) {
  const out = defaults();
  for (const name of Object.keys(PARAMS)) if (params && params[name] !== undefined) out[name] = coerce(name, params[name]);
  if (OP_RECORDS[out.op].transposed) {
    out.padding = "EXPLICIT";
    out.pad_bottom = out.pad_top;
    out.pad_right = out.pad_left;
  }
  return out;
}

// The parameters `op` does not use, at their defaults: the setting a link names.
export function canonical(params) {
  const p = normalize(params);
  const rec = OP_RECORDS[p.op];
  const d = defaults();
  const unused = [];
  if (p.padding !== "EXPLICIT") unused.push("pad_top", "pad_bottom", "pad_left", "pad_right");
  if (!rec.transposed) unused.push("output_padding_h", "output_padding_w");
  if (rec.depthwise) unused.push("out_channels", "groups");
  else unused.push("multiplier");
  for (const name of unused) p[name] = d[name];
  return p;
}

// Which controls do nothing for a setting, each with the reason (the view disables them).
export function unusedParams(params) {
  const p = normalize(params);
  const rec = OP_RECORDS[p.op];
  const out = {};
  if (rec.transposed) {
    out.padding = "conv_transpose2d takes PyTorch's padding: the same on both sides (top and left set it)";
    out.pad_bottom = out.pad_right = "conv_transpose2d pads both sides alike: set top (rows) and left (columns)";
  } else {
    if (p.padding !== "EXPLICIT") for (const n of ["pad_top", "pad_bottom", "pad_left", "pad_right"]) out[n] = "used with EXPLICIT padding only";
    out.output_padding_h = out.output_padding_w = "used by conv_transpose2d only";
  }
  if (rec.depthwise) out.out_channels = out.groups = "depthwise: out channels are in channels \u00d7 multiplier, one group per channel";
  else out.multiplier = "used by the depthwise ops only";
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
           unreadAfter: out === 0 ? padded : padded - ((out - 1) * stride + eff), coverage, lost, transposed: false };
}

// PyTorch's output size of a transposed convolution along one axis.
export function transposedSize(size, kernel, stride, padding, outputPadding, dilation) {
  return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + outputPadding + 1;
}

// One axis of a transposed convolution (PyTorch): the axis of the convolution it is the
// input gradient of, whose input is the transposed output, padded (padding, padding -
// output_padding): a negative `after` means output rows past the scatter's end.
// `error` says why there is no such axis.
export function transposedAxis(size, kernel, stride, dilation, padding, outputPadding, name = "rows") {
  const outSize = transposedSize(size, kernel, stride, padding, outputPadding, dilation);
  if (outputPadding >= Math.max(stride, dilation))
    return { error: `output_padding must be smaller than stride or dilation: ${name} output_padding ${outputPadding} ` +
      `with stride ${stride} and dilation ${dilation} (PyTorch refuses it).` };
  if (outSize < 1)
    return { error: `padding crops more than the scatter has: the output would have ${outSize} ${name} ` +
      `(padding ${padding} on each side of a ${outSize + 2 * padding}-${name === "rows" ? "row" : "column"} scatter).` };
  const axis = axisGeometry(outSize, kernel, stride, dilation, "EXPLICIT", padding, padding - outputPadding);
  return { ...axis, transposed: true, outputPadding, size };
}

// The channels of a setting: batch, the convolution's input and output channels (a
// transposed convolution's are the other way round), groups and the depthwise multiplier.
export function channelGeometry(p) {
  const rec = OP_RECORDS[p.op];
  if (rec.depthwise) {
    const c = p.in_channels, m = p.multiplier;
    return { batch: p.batch, convIn: c, convOut: c * m, groups: c, inPerGroup: 1, outPerGroup: m, multiplier: m,
             depthwise: true, error: null };
  }
  const [convIn, convOut] = rec.transposed ? [p.out_channels, p.in_channels] : [p.in_channels, p.out_channels];
  const groups = p.groups;
  const error = p.in_channels % groups || p.out_channels % groups
    ? `groups must divide in_channels and out_channels: groups ${groups}, in_channels ${p.in_channels}, ` +
      `out_channels ${p.out_channels}.` : null;
  return { batch: p.batch, convIn, convOut, groups, inPerGroup: Math.floor(convIn / groups),
           outPerGroup: Math.floor(convOut / groups), multiplier: 1, depthwise: false, error };
}

// The geometry of the explorer's parameters, or an `error` saying why it is none.
export function geometry(params) {
  const p = normalize(params);
  const rec = OP_RECORDS[p.op];
  let rows, cols;
  if (rec.transposed) {
    rows = transposedAxis(p.input_h, p.kernel_h, p.stride_h, p.dilation_h, p.pad_top, p.output_padding_h, "rows");
    cols = transposedAxis(p.input_w, p.kernel_w, p.stride_w, p.dilation_w, p.pad_left, p.output_padding_w, "columns");
  } else {
    rows = axisGeometry(p.input_h, p.kernel_h, p.stride_h, p.dilation_h, p.padding, p.pad_top, p.pad_bottom);
    cols = axisGeometry(p.input_w, p.kernel_w, p.stride_w, p.dilation_w, p.padding, p.pad_left, p.pad_right);
  }
  const channels = channelGeometry(p);
  const g = { params: p, op: p.op, record: rec, rows, cols, channels, multiplier: channels.multiplier, error: null };
  if (rows.error || cols.error) g.error = rows.error || cols.error;
  else if (rows.out === 0 || cols.out === 0)
    g.error = `No window fits: the ${rows.eff}x${cols.eff} effective kernel is larger than the ` +
      `${rows.padded}x${cols.padded} padded input, so the output (and its gradient) is empty.`;
  else if (channels.error) g.error = channels.error;
  return g;
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

// ---------------------------------------------------------------------------------
// Tensors: `batch` x `channels` row-major planes in one Float64Array.  An activation's
// planes are (image n, channel c); a filter's are (a, b) = (input channel within the
// group, output channel) for a dense filter (HWIO's I and O), (channel, multiplier) for a
// depthwise one ([kh, kw, c, m]).

export function tensor(rows, cols, channels = 1, data = null, batch = 1) {
  return { rows, cols, channels, batch, data: data || new Float64Array(rows * cols * channels * batch) };
}

export function at(t, r, c, ch = 0, n = 0) {
  return t.data[((n * t.channels + ch) * t.rows + r) * t.cols + c];
}

// The shape [planes a, planes b, rows, cols] of a role's tensor.
export function roleShape(g, role) {
  const ch = g.channels;
  if (role === "input") return [ch.batch, ch.convIn, g.rows.input, g.cols.input];
  if (role === "output") return [ch.batch, ch.convOut, g.rows.out, g.cols.out];
  return ch.depthwise ? [ch.convIn, ch.multiplier, g.rows.kernel, g.cols.kernel]
    : [ch.inPerGroup, ch.convOut, g.rows.kernel, g.cols.kernel];
}

// A cell [a, b, row, col] of a role's tensor as its index in the tensor convviz takes or
// returns for the op, in that tensor's own layout (the DOM's data-index): NHWC activations,
// HWIO or [kh, kw, c, m] filters; NCHW and (C_in, C_out / groups, kH, kW) for conv_transpose2d.
export function tensorIndex(g, role, [a, b, r, c]) {
  if (g.record.transposed) return role === "filter" ? [b, a, r, c] : [a, b, r, c];
  return role === "filter" ? [r, c, a, b] : [a, r, c, b];
}

// tensorIndex(g, role, [a, b, r, c]) as the DOM writes it ("0,1,2,3"), without building arrays:
// it runs for every cell of every redraw.
export function indexText(g, role, a, b, r, c) {
  if (g.record.transposed) return role === "filter" ? `${b},${a},${r},${c}` : `${a},${b},${r},${c}`;
  return role === "filter" ? `${r},${c},${a},${b}` : `${a},${r},${c},${b}`;
}

// The names of a role's tensor's axes, in tensorIndex's order.
export function layoutNames(g, role) {
  if (g.record.transposed) return role === "filter" ? ["c_in", "c_out/groups", "kh", "kw"] : ["n", "c", "h", "w"];
  if (role === "filter") return g.channels.depthwise ? ["kh", "kw", "c", "m"] : ["kh", "kw", "i", "o"];
  return ["n", "h", "w", "c"];
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

export function exampleTensor(seed, salt, rows, cols, channels, mode, batch = 1) {
  const t = tensor(rows, cols, channels, null, batch);
  for (let i = 0; i < t.data.length; i++) t.data[i] = exampleValue(seed, salt, i, mode);
  return t;
}

// The panels an op is given, with their shapes [rows, cols, channels, planes a].
export function inputShapes(g) {
  const { panelOf } = opPanels(g.params.op);
  const out = {};
  for (const role of g.record.given) {
    const [a, b, r, c] = roleShape(g, role);
    out[panelOf[role]] = [r, c, b, a];
  }
  return out;
}

// The op's inputs: given tensors where their shapes fit, example numbers otherwise.
export function inputs(g, given = {}) {
  const out = {};
  for (const [name, [r, c, ch, n]] of Object.entries(inputShapes(g))) {
    const t = given[name];
    out[name] = t && t.rows === r && t.cols === c && t.channels === ch && (t.batch || 1) === n ? t
      : exampleTensor(g.params.seed, SALTS[name], r, c, ch, g.params.values, n);
  }
  return out;
}

// ---------------------------------------------------------------------------------
// Links: every product of the convolution.  A link is input cell (n, ci, ih, iw) (maybe
// padding) times filter cell (a, b, kh, kw) into output cell (n, co, oh, ow); each op sums
// the products of its two given tensors over the links that reach each cell of its result.

// Output channel co's i-th input channel: its group, the input channel ci, and the filter
// plane (fa, fb) that joins them.
function channelLink(ch, co, i) {
  const group = Math.floor(co / ch.outPerGroup);
  const ci = group * ch.inPerGroup + i;
  return { group, ci, fa: ch.depthwise ? ci : i, fb: ch.depthwise ? co % ch.multiplier : co };
}

function makeLink(g, n, co, i, oh, ow, kh, kw) {
  const { group, ci, fa, fb } = channelLink(g.channels, co, i);
  const ih = inputIndex(g.rows, oh, kh), iw = inputIndex(g.cols, ow, kw);
  const pad = ih < 0 || ih >= g.rows.input || iw < 0 || iw >= g.cols.input;
  return { n, ci, co, group, oh, ow, kh, kw, ih, iw, pad,
           input: [n, ci, ih, iw], filter: [fa, fb, kh, kw], output: [n, co, oh, ow] };
}

// The links that reach cell [a, b, row, col] of `role`'s tensor (a padding cell of the
// input too), in the order a worked sum lists them: by channel (or image), then tap.
export function linksOf(g, role, [a, b, r, c]) {
  const ch = g.channels, links = [];
  if (role === "output") {
    for (let i = 0; i < ch.inPerGroup; i++)
      for (let kh = 0; kh < g.rows.kernel; kh++)
        for (let kw = 0; kw < g.cols.kernel; kw++) links.push(makeLink(g, a, b, i, r, c, kh, kw));
  } else if (role === "input") {
    const group = Math.floor(b / ch.inPerGroup), i = b % ch.inPerGroup;
    const rowPairs = pairsAt(g.rows, r), colPairs = pairsAt(g.cols, c);
    for (let co = group * ch.outPerGroup; co < (group + 1) * ch.outPerGroup; co++)
      for (const [oh, kh] of rowPairs)
        for (const [ow, kw] of colPairs) links.push(makeLink(g, a, co, i, oh, ow, kh, kw));
  } else {
    const co = ch.depthwise ? a * ch.multiplier + b : b, i = ch.depthwise ? 0 : a;
    for (let n = 0; n < ch.batch; n++)
      for (let oh = 0; oh < g.rows.out; oh++)
        for (let ow = 0; ow < g.cols.out; ow++) links.push(makeLink(g, n, co, i, oh, ow, r, c));
  }
  return links;
}

// Every link as flat indices into the input, filter and output tensors (input -1 on
// padding): the scatter that computes an op without building a link object each.
function eachLink(g, fn) {
  const ch = g.channels, R = g.rows, C = g.cols;
  const [, , inRows, inCols] = roleShape(g, "input");
  const fShape = roleShape(g, "filter");
  for (let n = 0; n < ch.batch; n++)
    for (let co = 0; co < ch.convOut; co++)
      for (let i = 0; i < ch.inPerGroup; i++) {
        const { ci, fa, fb } = channelLink(ch, co, i);
        const fBase = (fa * fShape[1] + fb) * R.kernel * C.kernel;
        const xBase = (n * ch.convIn + ci) * inRows * inCols;
        for (let oh = 0; oh < R.out; oh++)
          for (let ow = 0; ow < C.out; ow++) {
            const yi = ((n * ch.convOut + co) * R.out + oh) * C.out + ow;
            for (let kh = 0; kh < R.kernel; kh++) {
              const ih = oh * R.stride - R.before + kh * R.dilation;
              const rowIn = ih >= 0 && ih < inRows;
              for (let kw = 0; kw < C.kernel; kw++) {
                const iw = ow * C.stride - C.before + kw * C.dilation;
                const xi = rowIn && iw >= 0 && iw < inCols ? xBase + ih * inCols + iw : -1;
                fn(xi, fBase + kh * C.kernel + kw, yi);
              }
            }
          }
      }
}

function emptyOf(g, role) {
  const [a, b, r, c] = roleShape(g, role);
  return tensor(r, c, b, null, a);
}

// The op's result from its two given tensors (by role), in float64.
export function computeResult(g, given) {
  const role = g.record.result;
  const out = emptyOf(g, role), o = out.data;
  if (role === "output") {
    const x = given.input.data, w = given.filter.data;
    eachLink(g, (xi, wi, yi) => { if (xi >= 0) o[yi] += x[xi] * w[wi]; });
  } else if (role === "input") {
    const w = given.filter.data, dy = given.output.data;
    eachLink(g, (xi, wi, yi) => { if (xi >= 0) o[xi] += dy[yi] * w[wi]; });
  } else {
    const x = given.input.data, dy = given.output.data;
    eachLink(g, (xi, wi, yi) => { if (xi >= 0) o[wi] += x[xi] * dy[yi]; });
  }
  return out;
}

// The three results of a geometry's convolution by name, whatever op `g` was made for.
export function inputGrad(g, w, dy) {
  return computeResult({ ...g, record: OP_RECORDS.conv2d_backprop_input }, { filter: w, output: dy });
}

export function filterGrad(g, x, dy) {
  return computeResult({ ...g, record: OP_RECORDS.conv2d_backprop_filter }, { input: x, output: dy });
}

export function forward(g, x, w) {
  return computeResult({ ...g, record: OP_RECORDS.conv2d }, { input: x, filter: w });
}

// Everything the explorer shows for one setting: geometry, inputs and the output.
export function compute(params, given = {}) {
  const g = geometry(params);
  if (g.error) return { g, tensors: {}, output: null };
  const t = inputs(g, given);
  const { panelOf, output } = opPanels(g.params.op);
  const byRole = {};
  for (const role of g.record.given) byRole[role] = t[panelOf[role]];
  t[output] = computeResult(g, byRole);
  return { g, tensors: t, output };
}

// The worked sum of result cell [a, b, row, col]: its terms (the two factors' panels,
// cells and values; links on padding left out, counted in `padReads`), grouped by the
// channel they come through (the image, for a filter gradient).
export function workedSum(g, tensors, cell) {
  const rec = g.record;
  const { panelOf } = opPanels(g.params.op);
  const [first, second] = rec.given;
  const terms = [];
  let padReads = 0;
  for (const link of linksOf(g, rec.result, cell)) {
    if (link.pad) { padReads++; continue; }
    const va = at(tensors[panelOf[first]], link[first][2], link[first][3], link[first][1], link[first][0]);
    const vb = at(tensors[panelOf[second]], link[second][2], link[second][3], link[second][1], link[second][0]);
    const by = rec.result === "filter" ? link.n : rec.result === "input" ? link.co : link.ci;
    terms.push({ link, a: { panel: panelOf[first], cell: link[first] }, b: { panel: panelOf[second], cell: link[second] },
                 va, vb, group: by });
  }
  let value = 0;
  for (const t of terms) value += t.va * t.vb;
  const groups = [];
  for (const t of terms) {
    if (!groups.length || groups[groups.length - 1].key !== t.group) groups.push({ key: t.group, terms: [] });
    groups[groups.length - 1].terms.push(t);
  }
  const groupedBy = rec.result === "filter" ? "image" : "channel";
  return { terms, groups, groupedBy, padReads, value };
}

// ---------------------------------------------------------------------------------
// Words: why a padding cell is there, why a real row gets no gradient.

const SIDES = { rows: ["top", "bottom", "rows"], cols: ["left", "right", "columns"] };

export function paddingReason(g, axisName, before) {
  const axis = g[axisName];
  const [first, second, unit] = SIDES[axisName];
  const side = before ? first : second;
  const amount = before ? axis.before : axis.after;
  if (axis.transposed) {
    return `conv_transpose2d's padding ${axis.before} crops ${axis.before} ${unit} from each side of the full scatter ` +
      `(${axis.input + axis.before + Math.max(axis.after, 0)} ${unit}` +
      (axis.outputPadding ? `, output_padding ${axis.outputPadding} giving back ${Math.min(axis.outputPadding, axis.before)} ${second}` : "") +
      `). This is one of the ${amount} cropped ${side} ${unit}.`;
  }
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
  if (axis.transposed) {
    if (i > axis.lastRead)
      return `No input cell reaches ${unit} ${i} of y: the scatter ends at ${unit} ${axis.lastRead}, and ` +
        `output_padding ${axis.outputPadding} adds ${unit}s after it, so it is exactly 0 (PyTorch adds only the bias).`;
    return `No input cell reaches ${unit} ${i} of y: with stride ${axis.stride} and dilation ${axis.dilation} the ` +
      `scatter skips it, so it is exactly 0.`;
  }
  if (i > axis.lastRead) {
    return `No window reads ${unit} ${i}: the windows stop at ${unit} ${axis.lastRead} ` +
      `(padded ${axis.padded} \u2212 eff ${axis.eff} = ${axis.padded - axis.eff} is not a multiple of stride ${axis.stride}), ` +
      `so its gradient is exactly 0.`;
  }
  return `No window reads ${unit} ${i}: with stride ${axis.stride} and dilation ${axis.dilation} the taps skip it, ` +
    `so its gradient is exactly 0.`;
}

// ---------------------------------------------------------------------------------
// Practice: a learner's answer for a cell, read as people type numbers.

// The number typed (a typographic minus, a comma for the decimal point, spaces allowed), or NaN.
export function parseAnswer(text) {
  const t = String(text).trim().replace(/\u2212/g, "-").replace(/\s+/g, "").replace(",", ".");
  return t === "" || !/^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(t) ? NaN : Number(t);
}

// Right when it is the value, or the value as the cells write it (two decimals).
export function isRight(answer, value) {
  if (!Number.isFinite(answer)) return false;
  return Math.abs(answer - value) <= 1e-9 * Math.max(1, Math.abs(value)) || formatNumber(answer) === formatNumber(value);
}

// ---------------------------------------------------------------------------------
// Symbols: a cell's short name (on the cell) and the op's sum as a formula, with this
// setting's strides, dilations and pads written in.

const SUBSCRIPTS = "\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089";

export function subscript(n) {
  return String(n).split("").map((d) => SUBSCRIPTS[Number(d)]).join("");
}

// x\u2081\u2082 for row 1, column 2 (a comma between them once either has two digits).
export function shortSymbol(symbol, r, c) {
  return symbol + subscript(r) + (r > 9 || c > 9 ? "," : "") + subscript(c);
}

// The input row (column) an output index and a tap read, as an expression: s\u00b7i + d\u00b7k \u2212 p.
function axisExpr(axis, out, tap) {
  const term = (coef, name) => (coef === 1 ? name : `${coef}${name}`);
  let text = `${term(axis.stride, out)}+${term(axis.dilation, tap)}`;
  if (axis.before > 0) text += `\u2212${axis.before}`;
  else if (axis.before < 0) text += `+${-axis.before}`;
  return text;
}

// The op's sum as a formula over index names, in the tensors' own layouts.
export function formula(g) {
  const rec = g.record, ch = g.channels, R = g.rows, C = g.cols;
  const rows = axisExpr(R, "i", "kh"), cols = axisExpr(C, "j", "kw");
  const { panelOf } = opPanels(g.params.op);
  const sym = (role) => ({ x: "x", w: "W", dy: "dy", dx: "dx", dw: "dW", y: "y" })[panelOf[role]];
  const grouped = !ch.depthwise && ch.groups > 1;
  const cIn = grouped ? `c (of o's group)` : "c";
  const wDense = grouped ? `${sym("filter")}[kh,kw,c\u2212${ch.inPerGroup}\u00b7g,o]` : `${sym("filter")}[kh,kw,c,o]`;
  if (rec.transposed) {
    const w = grouped ? `W[c,o\u2212${ch.inPerGroup}\u00b7g,kh,kw]` : "W[c,o,kh,kw]";
    return `y[n,o,h,w] = \u03a3 x[n,c,i,j]\u00b7${w} over c${grouped ? " of o's group" : ""} and every (i,kh), (j,kw) ` +
      `with ${rows} = h, ${cols} = w`;
  }
  const M = ch.multiplier, dwOut = M === 1 ? "c" : `c\u00b7${M}+m`, dwW = M === 1 ? "W[kh,kw,c,0]" : "W[kh,kw,c,m]";
  if (rec.result === "output") {
    if (ch.depthwise) return `y[n,i,j,${dwOut}] = \u03a3_{kh,kw} x[n, ${rows}, ${cols}, c]\u00b7${dwW}`;
    return `y[n,i,j,o] = \u03a3_{${cIn},kh,kw} x[n, ${rows}, ${cols}, c]\u00b7${wDense}`;
  }
  if (rec.result === "input") {
    const w = ch.depthwise ? dwW : wDense;
    const o = ch.depthwise ? dwOut : "o";
    const over = ch.depthwise ? (M === 1 ? "" : "m and ") : grouped ? "o of c's group and " : "o and ";
    return `dx[n,h,w,c] = \u03a3 dy[n,i,j,${o}]\u00b7${w} over ${over}every (i,kh), (j,kw) with ${rows} = h, ${cols} = w`;
  }
  if (ch.depthwise) return `dW[kh,kw,c,${M === 1 ? "0" : "m"}] = \u03a3_{n,i,j} x[n, ${rows}, ${cols}, c]\u00b7dy[n,i,j,${dwOut}]`;
  const c = grouped ? `c+${ch.inPerGroup}\u00b7g` : "c";
  return `dW[kh,kw,c,o] = \u03a3_{n,i,j} x[n, ${rows}, ${cols}, ${c}]\u00b7dy[n,i,j,o]` + (grouped ? " (g: o's group)" : "");
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
// The URL query: `input`, `kernel`, `stride`, `dilation` (and `output_padding`) as N or HxW;
// `padding` as SAME / VALID / EXPLICIT, with `pads` as top,bottom,left,right, or (PyTorch's,
// for conv_transpose2d) as N or HxW; `op`, `in_channels`, `out_channels`, `groups`,
// `multiplier`, `batch`, `seed`, `values`, `theme`.

const PAIRS = { input: ["input_h", "input_w"], kernel: ["kernel_h", "kernel_w"],
                stride: ["stride_h", "stride_w"], dilation: ["dilation_h", "dilation_w"],
                output_padding: ["output_padding_h", "output_padding_w"] };
const SINGLES = ["op", "in_channels", "out_channels", "groups", "multiplier", "batch", "seed", "values", "symbols",
                 "practice", "theme"];
const PAD_NAMES = ["pad_top", "pad_bottom", "pad_left", "pad_right"];

function splitPair(text) {
  const parts = String(text).toLowerCase().split(/[x,\u00d7]/);
  if (parts.length === 1) parts.push(parts[0]);
  return parts.length === 2 ? parts : null;
}

export function parseQuery(search) {
  const q = new URLSearchParams(search || "");
  const out = {};
  for (const [key, [h, w]] of Object.entries(PAIRS)) {
    const parts = q.has(key) ? splitPair(q.get(key)) : null;
    if (parts) { out[h] = coerce(h, parts[0]); out[w] = coerce(w, parts[1]); }
  }
  if (q.has("pads")) {
    const parts = q.get("pads").split(",");
    if (parts.length === 4) PAD_NAMES.forEach((name, i) => { out[name] = coerce(name, parts[i]); });
  }
  if (q.has("padding")) {
    const raw = q.get("padding"), parts = splitPair(raw);
    if (parts && parts.every((v) => /^\s*\d+\s*$/.test(v))) { // PyTorch's padding: both sides alike
      out.padding = "EXPLICIT";
      [out.pad_top, out.pad_left] = [coerce("pad_top", parts[0]), coerce("pad_left", parts[1])];
      [out.pad_bottom, out.pad_right] = [out.pad_top, out.pad_left];
    } else out.padding = coerce("padding", raw.toUpperCase());
  }
  for (const key of SINGLES) if (q.has(key)) out[key] = coerce(key, q.get(key));
  return out;
}

export function toQuery(params) {
  const p = canonical(params);
  const rec = OP_RECORDS[p.op];
  const pair = (h, w) => (p[h] === p[w] ? `${p[h]}` : `${p[h]}x${p[w]}`);
  const parts = ["input", "kernel", "stride", "dilation"].map((key) => `${key}=${pair(...PAIRS[key])}`);
  if (rec.transposed) {
    parts.push(`padding=${pair("pad_top", "pad_left")}`);
    if (p.output_padding_h || p.output_padding_w) parts.push(`output_padding=${pair("output_padding_h", "output_padding_w")}`);
  } else {
    parts.push(`padding=${p.padding}`);
    if (p.padding === "EXPLICIT") parts.push(`pads=${PAD_NAMES.map((n) => p[n]).join(",")}`);
  }
  parts.push(`op=${p.op}`);
  if (p.in_channels !== 1) parts.push(`in_channels=${p.in_channels}`);
  if (rec.depthwise) parts.push(`multiplier=${p.multiplier}`);
  else {
    if (p.out_channels !== 1) parts.push(`out_channels=${p.out_channels}`);
    if (p.groups !== 1) parts.push(`groups=${p.groups}`);
  }
  if (p.batch !== 1) parts.push(`batch=${p.batch}`);
  parts.push(`seed=${p.seed}`);
  if (p.values !== "integers") parts.push(`values=${p.values}`);
  if (p.symbols !== "off") parts.push(`symbols=${p.symbols}`);
  if (p.practice !== "off") parts.push(`practice=${p.practice}`);
  if (p.theme !== "auto") parts.push(`theme=${p.theme}`);
  return "?" + parts.join("&");
}

// Parameters that change how the numbers are shown, never the numbers.
export const VIEW_ONLY = ["symbols", "practice", "theme"];

// A key naming a setting's numbers (the kernel's reply in Jupyter carries it; a practice
// score belongs to it).
export function settingKey(params) {
  const p = normalize(params);
  return Object.keys(PARAMS).filter((k) => !VIEW_ONLY.includes(k)).map((k) => `${k}=${p[k]}`).join(";");
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

// ---------------------------------------------------------------------------------
// Code for what is on screen: the convviz, TensorFlow and PyTorch calls, with the arrays,
// that compute the numbers shown.  Each defines the op's given tensors in its own layout
// (tensorIndex) and leaves the result in the result panel's variable (y, dx or dW).

export const CODE_LANGUAGES = ["convviz", "tensorflow", "pytorch"];
const CODE_NAMES = { x: "x", w: "W", dy: "dy", dx: "dx", dw: "dW", y: "y" };
const TF_NAMES = {
  conv2d: "Conv2D", conv2d_backprop_input: "Conv2DBackpropInput", conv2d_backprop_filter: "Conv2DBackpropFilter",
  depthwise_conv2d_native: "DepthwiseConv2dNative",
  depthwise_conv2d_native_backprop_input: "DepthwiseConv2dNativeBackpropInput",
  depthwise_conv2d_native_backprop_filter: "DepthwiseConv2dNativeBackpropFilter",
};

// A panel's tensor in its op's own layout: shape and values in that layout's row-major order.
export function inLayout(g, role, t) {
  const shape = tensorIndex(g, role, [t.batch, t.channels, t.rows, t.cols]);
  const strides = [shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1];
  const values = new Array(t.data.length);
  for (let a = 0; a < t.batch; a++)
    for (let b = 0; b < t.channels; b++)
      for (let r = 0; r < t.rows; r++)
        for (let c = 0; c < t.cols; c++) {
          const index = tensorIndex(g, role, [a, b, r, c]);
          values[index.reduce((s, v, i) => s + v * strides[i], 0)] = at(t, r, c, b, a);
        }
  return { shape, values };
}

function pyList(values, indent) {
  const lines = [];
  let line = "";
  for (const v of values.map(exactNumber)) {
    if (line.length + v.length + 2 > 92) { lines.push(line); line = ""; }
    line += (line ? " " : "") + v + ",";
  }
  lines.push(line);
  return "[\n" + lines.map((l) => indent + "    " + l).join("\n") + "\n" + indent + "]";
}

function arrayLine(name, g, role, t, dtype, comment) {
  const { shape, values } = inLayout(g, role, t);
  return `${name} = np.array(${pyList(values, "")}, dtype=np.${dtype}).reshape(${shape.join(", ")})  # ${comment}`;
}

// Where TensorFlow 2.21's CPU kernels may refuse a setting or return other numbers (which
// depends on the path TensorFlow takes: oneDNN for SAME and VALID, its own kernels for
// EXPLICIT): the TensorFlow code says so first.  Measured by running the exported code on
// the cross-check's settings; tests/test_explorer_core.py holds that code without a caveat
// equal to convviz.
export function tensorflowCaveat(g) {
  const p = g.params, rec = g.record;
  if (rec.result === "output" && !rec.transposed) return null;
  const dilated = p.dilation_h > 1 || p.dilation_w > 1;
  if (rec.depthwise && dilated)
    return "TensorFlow's CPU depthwise gradients may ignore dilations (other numbers than these) or refuse them";
  if (rec.depthwise && p.stride_h !== p.stride_w)
    return "TensorFlow's CPU depthwise gradients may refuse unequal strides (InvalidArgumentError)";
  if (dilated) return "TensorFlow's CPU convolution gradients may refuse dilations > 1 (InvalidArgumentError)";
  if (g.channels.groups > 1 && p.stride_h !== p.stride_w)
    return "TensorFlow's CPU convolution gradients may refuse grouped convolution with unequal strides";
  return null;
}

function layoutWords(g, role) {
  return layoutNames(g, role).join(", ");
}

// The code, the variable holding the result, and the tensor layout it is in.
export function codeFor(g, tensors, lang) {
  const p = g.params, rec = g.record, { panelOf } = opPanels(p.op);
  const R = g.rows, C = g.cols;
  const resultName = CODE_NAMES[panelOf[rec.result]];
  const lines = ["import numpy as np"];
  const givenLines = (dtype) => rec.given.map((role) => arrayLine(CODE_NAMES[panelOf[role]], g, role,
    tensors[panelOf[role]], dtype, layoutWords(g, role)));
  const sizes = (role) => `[${tensorIndex(g, role, roleShape(g, role)).join(", ")}]`;
  const pads = `[0, 0, ${R.before}, ${R.after}, ${C.before}, ${C.after}, 0, 0]`;
  const tfWindow = `strides=[1, ${p.stride_h}, ${p.stride_w}, 1], padding="${p.padding}"` +
    (p.padding === "EXPLICIT" ? `, explicit_paddings=${pads}` : "") +
    (p.dilation_h !== 1 || p.dilation_w !== 1 ? `, dilations=[1, ${p.dilation_h}, ${p.dilation_w}, 1]` : "");
  // TensorFlow's argument names (convviz's are the same), and what each is given here
  const tfNames = rec.result === "input" ? ["input_sizes", "filter", "out_backprop"]
    : rec.result === "filter" ? ["input", "filter_sizes", "out_backprop"] : ["input", "filter"];
  const tfArgs = tfNames.map((n) => (n.endsWith("_sizes") ? sizes(rec.result) : { input: "x", filter: "W", out_backprop: "dy" }[n]));
  if (lang === "convviz") {
    lines.push("import convviz", "", ...givenLines("float64"), "");
    if (rec.transposed)
      lines.push(`y = convviz.conv_transpose2d(x, W, stride=(${p.stride_h}, ${p.stride_w}), padding=(${p.pad_top}, ${p.pad_left}),` +
        ` output_padding=(${p.output_padding_h}, ${p.output_padding_w}), groups=${p.groups}, dilation=(${p.dilation_h}, ${p.dilation_w}))`);
    else lines.push(`${resultName} = convviz.${p.op}(${tfArgs.join(", ")}, ${tfWindow})`);
    lines.push(`print(${resultName}.shape)  # ${layoutWords(g, rec.result)}`);
    return { code: lines.join("\n") + "\n", result: resultName };
  }
  if (lang === "tensorflow") {
    const caveat = tensorflowCaveat(g);
    lines.push("import tensorflow as tf", "");
    if (caveat) lines.push(`# NOTE: ${caveat} (TensorFlow 2.21; convviz computes it).`);
    lines.push("# float32: TensorFlow's CPU kernels take dilations and groups in float32 only (through oneDNN)",
      ...givenLines("float32"), "");
    if (rec.transposed) {
      const cropH = Math.max(0, -R.after), cropW = Math.max(0, -C.after);
      const N = g.channels.batch;
      lines.push("# conv_transpose2d is the input gradient of the convolution going the other way (NHWC, HWIO)",
        `x_nhwc, W_hwio = tf.transpose(x, [0, 2, 3, 1]), tf.transpose(W, [2, 3, 1, 0])`,
        `y = tf.raw_ops.Conv2DBackpropInput(input_sizes=[${N}, ${R.input - cropH}, ${C.input - cropW}, ${g.channels.convIn}],` +
        ` filter=W_hwio, out_backprop=x_nhwc, strides=[1, ${p.stride_h}, ${p.stride_w}, 1], padding="EXPLICIT",` +
        ` explicit_paddings=[0, 0, ${R.before}, ${Math.max(0, R.after)}, ${C.before}, ${Math.max(0, C.after)}, 0, 0],` +
        ` dilations=[1, ${p.dilation_h}, ${p.dilation_w}, 1])`);
      if (cropH || cropW) lines.push(`y = tf.pad(y, [[0, 0], [0, ${cropH}], [0, ${cropW}], [0, 0]])  # output_padding's rows no input reaches`);
      lines.push("y = tf.transpose(y, [0, 3, 1, 2]).numpy()  # N, C, H, W");
    } else {
      const kw = tfNames.map((n, i) => `${n}=${tfArgs[i]}`).join(", ");
      lines.push(`${resultName} = tf.raw_ops.${TF_NAMES[p.op]}(${kw}, ${tfWindow}).numpy()`);
    }
    lines.push(`print(${resultName}.shape)  # ${layoutWords(g, rec.result)}`);
    return { code: lines.join("\n") + "\n", result: resultName, caveat };
  }
  // PyTorch: NCHW and (out, in / groups, kH, kW); TensorFlow's pads made explicit with F.pad,
  // the gradients by autograd.
  lines.push("import torch", "import torch.nn.functional as F", "", ...givenLines("float64"), "");
  if (rec.transposed) {
    lines.push("x, W = torch.from_numpy(x), torch.from_numpy(W)",
      `y = F.conv_transpose2d(x, W, stride=(${p.stride_h}, ${p.stride_w}), padding=(${p.pad_top}, ${p.pad_left}),` +
      ` output_padding=(${p.output_padding_h}, ${p.output_padding_w}), groups=${p.groups}, dilation=(${p.dilation_h}, ${p.dilation_w}))`,
      "y = y.numpy()");
    lines.push(`print(y.shape)  # ${layoutWords(g, rec.result)}`);
    return { code: lines.join("\n") + "\n", result: "y" };
  }
  const ch = g.channels;
  const [kh, kw] = [R.kernel, C.kernel];
  const toTorchW = ch.depthwise ? `.reshape(${kh}, ${kw}, 1, ${ch.convOut}).permute(3, 2, 0, 1)` : ".permute(3, 2, 0, 1)";
  lines.push(`def conv(x, W):  # NCHW; W: (out, in / groups, kH, kW)`,
    `    x = F.pad(x, (${C.before}, ${C.after}, ${R.before}, ${R.after}))  # TensorFlow's ${p.padding} padding: left, right, top, bottom`,
    `    return F.conv2d(x, W, stride=(${p.stride_h}, ${p.stride_w}), dilation=(${p.dilation_h}, ${p.dilation_w}), groups=${ch.groups})`,
    "");
  const nchw = (name) => `torch.from_numpy(${name}).permute(0, 3, 1, 2)`;
  if (rec.result === "output") {
    lines.push(`y = conv(${nchw("x")}, torch.from_numpy(W)${toTorchW})`, "y = y.permute(0, 2, 3, 1).numpy()  # back to NHWC");
  } else if (rec.result === "input") {
    const [n, h, w, c] = tensorIndex(g, "input", roleShape(g, "input"));
    lines.push(`x = torch.zeros(${n}, ${c}, ${h}, ${w}, dtype=torch.float64, requires_grad=True)`,
      `conv(x, torch.from_numpy(W)${toTorchW}).backward(${nchw("dy")})`,
      "dx = x.grad.permute(0, 2, 3, 1).numpy()  # back to NHWC");
  } else {
    const shape = ch.depthwise ? `${ch.convOut}, 1, ${kh}, ${kw}` : `${ch.convOut}, ${ch.inPerGroup}, ${kh}, ${kw}`;
    lines.push(`W = torch.zeros(${shape}, dtype=torch.float64, requires_grad=True)`,
      `conv(${nchw("x")}, W).backward(${nchw("dy")})`,
      ch.depthwise ? `dW = W.grad.permute(2, 3, 1, 0).reshape(${kh}, ${kw}, ${ch.convIn}, ${ch.multiplier}).numpy()  # [kh, kw, c, m]`
        : "dW = W.grad.permute(2, 3, 1, 0).numpy()  # back to HWIO");
  }
  lines.push(`print(${resultName}.shape)  # ${layoutWords(g, rec.result)}`);
  return { code: lines.join("\n") + "\n", result: resultName };
}
