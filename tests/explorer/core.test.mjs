// Unit tests of the explorer's numeric core, under Node's own runner (node --test).
import assert from "node:assert/strict";
import { test } from "node:test";
import * as core from "../../convviz/explorer/core.js";

test("SAME puts the odd padding cell after (TensorFlow)", () => {
  const a = core.axisGeometry(8, 3, 2, 1, "SAME");
  assert.deepEqual([a.out, a.before, a.after], [4, 0, 1]);
  const b = core.axisGeometry(7, 3, 1, 2, "SAME"); // eff 5, need 4
  assert.deepEqual([b.out, b.before, b.after, b.eff], [7, 2, 2, 5]);
});

test("VALID stride 3 on 8 loses the last two rows, and says why", () => {
  const g = core.geometry({ input_h: 8, input_w: 8, kernel_h: 3, kernel_w: 3, stride_h: 3, stride_w: 3, padding: "VALID" });
  assert.deepEqual(g.rows.lost, [6, 7]);
  assert.match(core.lostReason(g, "rows", 7), /stop at row 5/);
  assert.equal(core.lostReason(g, "rows", 0), null);
});

test("a stride wider than the kernel skips rows between windows", () => {
  const g = core.geometry({ input_h: 9, input_w: 9, kernel_h: 2, kernel_w: 2, stride_h: 3, stride_w: 3, padding: "VALID" });
  assert.deepEqual(g.rows.lost, [2, 5, 8]);
  assert.match(core.lostReason(g, "rows", 2), /skip/);
});

test("no window fits is an error, not an exception", () => {
  const g = core.geometry({ input_h: 2, kernel_h: 5, padding: "VALID" });
  assert.match(g.error, /No window fits/);
  assert.equal(core.compute({ input_h: 2, kernel_h: 5, padding: "VALID" }).output, null);
});

test("the input gradient is the adjoint of the forward pass", () => {
  const p = { input_h: 7, input_w: 6, kernel_h: 3, kernel_w: 2, stride_h: 2, stride_w: 3, dilation_h: 2, padding: "SAME", seed: 4 };
  const g = core.geometry(p);
  const x = core.exampleTensor(1, 1, 7, 6, 1, "integers");
  const w = core.exampleTensor(1, 2, 3, 2, 1, "integers");
  const dy = core.exampleTensor(1, 3, g.rows.out, g.cols.out, 1, "integers");
  const y = core.forward(g, x, w), dx = core.inputGrad(g, w, dy);
  const dot = (a, b) => a.data.reduce((s, v, i) => s + v * b.data[i], 0);
  assert.equal(dot(y, dy), dot(x, dx));
});

test("with channels, groups and batch, all three results are one bilinear form", () => {
  // <y, dy> = <x, dx> = <W, dW>: the three ops sum the same links.
  for (const [op, extra] of [["conv2d", { in_channels: 4, out_channels: 2, groups: 2, batch: 2 }],
                             ["depthwise_conv2d_native", { in_channels: 3, multiplier: 2, batch: 2 }]]) {
    const p = { op, input_h: 6, input_w: 5, kernel_h: 3, kernel_w: 2, stride_h: 2, stride_w: 1, padding: "SAME", seed: 9, ...extra };
    const g = core.geometry(p);
    const shape = (role) => core.roleShape(g, role);
    const make = (role, salt) => { const [a, b, r, c] = shape(role); return core.exampleTensor(2, salt, r, c, b, "integers", a); };
    const x = make("input", 1), w = make("filter", 2), dy = make("output", 3);
    const dot = (a, b) => a.data.reduce((s, v, i) => s + v * b.data[i], 0);
    const y = core.computeResult(g, { input: x, filter: w });
    const dx = core.inputGrad(g, w, dy), dw = core.filterGrad(g, x, dy);
    assert.equal(dot(y, dy), dot(x, dx), op);
    assert.equal(dot(y, dy), dot(w, dw), op);
  }
});

test("conv_transpose2d is PyTorch's: sizes, output_padding's rows, weight layout", () => {
  const p = { op: "conv_transpose2d", input_h: 3, input_w: 3, kernel_h: 3, kernel_w: 3, stride_h: 2, stride_w: 2,
              pad_top: 1, pad_left: 0, output_padding_h: 1, in_channels: 2, out_channels: 4, groups: 2 };
  const g = core.geometry(p);
  assert.deepEqual([g.rows.input, g.cols.input], [(3 - 1) * 2 - 2 + 2 + 1 + 1, 7]);
  assert.deepEqual([g.rows.out, g.cols.out], [3, 3]);
  assert.deepEqual(core.roleShape(g, "filter"), [2, 2, 3, 3]); // (out per group, in) planes
  assert.deepEqual(core.tensorIndex(g, "filter", [1, 0, 2, 1]), [0, 1, 2, 1]); // (C_in, C_out / groups, kH, kW)
  assert.deepEqual(core.opPanels("conv_transpose2d").layout, ["x", "w", "y"]);
  const q = core.parseQuery(core.toQuery(p));
  assert.deepEqual([q.pad_top, q.pad_bottom, q.pad_left, q.output_padding_h, q.output_padding_w], [1, 1, 0, 1, 0]);
  assert.match(core.toQuery(p), /padding=1x0&output_padding=1x0/);
  assert.match(core.geometry({ ...p, output_padding_h: 2 }).error, /output_padding must be smaller/);
  // padding 0, output_padding 1: the last row lies past the scatter, and the words say so
  const lost = core.geometry({ ...p, pad_top: 0 });
  assert.deepEqual(lost.rows.lost, [lost.rows.input - 1]);
  assert.match(core.lostReason(lost, "rows", lost.rows.input - 1), /output_padding 1/);
});

test("the hash is fixed (Python mirrors these values)", () => {
  // Pinned: changing the hash changes every example in every course that links a seed.
  assert.deepEqual([0, 1, 2, 3].map((i) => core.hash32(0, 1, i)), [3338833744, 273988755, 81517689, 741570629]);
  assert.equal(core.hash32(7, 2, 5), 3014653492);
  assert.notEqual(core.hash32(7, 2, 5), core.hash32(7, 2, 6));
  const values = new Set(Array.from({ length: 200 }, (_, i) => core.exampleValue(3, 1, i, "integers")));
  assert.deepEqual([...values].sort(), [-1, -2, 1, 2, 3].sort());
  for (let i = 0; i < 200; i++) assert.notEqual(core.exampleValue(3, 1, i, "decimals"), 0);
});

test("the URL query round-trips and bad values fall back to defaults", () => {
  const p = core.normalize({ input_h: 7, input_w: 9, stride_h: 2, stride_w: 3, padding: "EXPLICIT",
                             pad_top: 1, pad_bottom: 0, pad_left: 2, pad_right: 1, op: "depthwise_conv2d_native_backprop_filter", multiplier: 2, seed: 5 });
  assert.deepEqual(core.normalize(core.parseQuery(core.toQuery(p))), p);
  const q = core.parseQuery("?input=5&kernel=2x4&padding=valid&op=nonsense&stride=999");
  assert.deepEqual([q.input_h, q.input_w, q.kernel_h, q.kernel_w, q.padding, q.op, q.stride_h],
                   [5, 5, 2, 4, "VALID", "conv2d_backprop_input", 6]);
});

test("the first explorer's short op names still open their ops", () => {
  assert.deepEqual(core.OP_ALIASES, { forward: "conv2d", input_grad: "conv2d_backprop_input",
    depthwise_filter_grad: "depthwise_conv2d_native_backprop_filter", filter_grad: "depthwise_conv2d_native_backprop_filter" });
  const q = core.parseQuery("?op=filter_grad&multiplier=2");
  assert.deepEqual([q.op, q.multiplier], ["depthwise_conv2d_native_backprop_filter", 2]);
  assert.equal(core.normalize({ op: "forward" }).op, "conv2d");
  assert.match(core.toQuery(q), /op=depthwise_conv2d_native_backprop_filter&multiplier=2/);
  const old = core.compute({ op: "filter_grad", multiplier: 2, seed: 3 });
  const now = core.compute({ op: "depthwise_conv2d_native_backprop_filter", multiplier: 2, seed: 3 });
  assert.equal(old.output, "dw");
  assert.deepEqual(old.tensors.dw, now.tensors.dw);
  for (const alias of Object.keys(core.OP_ALIASES)) assert.ok(!core.OPS.includes(alias));
});

test("text on any palette colour meets WCAG AA (4.5:1)", () => {
  for (const stops of Object.values(core.PALETTES))
    for (let i = 0; i <= 200; i++) {
      const bg = core.paletteColor(stops, i / 200);
      assert.ok(core.contrastRatio(bg, core.textColorOn(bg)) >= 4.5, `${bg}`);
    }
});

test("numbers are written with a real minus sign, and exactly in data-value", () => {
  assert.equal(core.formatNumber(-3), "\u22123");
  assert.equal(core.formatNumber(0.30000000000000004), "0.3");
  assert.equal(core.exactNumber(0.30000000000000004), "0.30000000000000004");
  assert.equal(core.exactNumber(-0), "0");
});

test("palette steps: -vmax, 0 and +vmax are the ends and the middle; every rule meets AA", () => {
  assert.deepEqual([core.paletteStep(-7, 7), core.paletteStep(0, 7), core.paletteStep(7, 7)], [0, 256, 512]);
  const rules = core.paletteRules(core.PALETTES.diverging_light, "p").split("\n");
  assert.equal(rules.length, core.PALETTE_STEPS + 1);
  for (const rule of rules) {
    const [bg, fg] = [...rule.matchAll(/rgb\((\d+), (\d+), (\d+)\)/g)].map((m) => m.slice(1).map(Number));
    assert.ok(core.contrastRatio(bg, fg) >= 4.5, rule);
  }
});

test("symbols: short names and the op's sum as a formula with the setting's numbers", () => {
  assert.equal(core.shortSymbol("x", 1, 2), "x\u2081\u2082");
  assert.equal(core.shortSymbol("dW", 10, 3), "dW\u2081\u2080,\u2083");
  const g = core.geometry({ op: "conv2d", input_h: 7, kernel_h: 3, stride_h: 2, stride_w: 1, dilation_w: 2, padding: "SAME" });
  assert.equal(core.formula(g), `y[n,i,j,o] = \u03a3_{c,kh,kw} x[n, 2i+kh\u22121, j+2kw\u22122, c]\u00b7W[kh,kw,c,o]`);
  const t = core.geometry({ op: "conv_transpose2d", in_channels: 4, out_channels: 2, groups: 2, stride_h: 2, pad_top: 1 });
  assert.match(core.formula(t), /^y\[n,o,h,w\] = \u03a3 x\[n,c,i,j\]\u00b7W\[c,o\u22121\u00b7g,kh,kw\] over c of o's group/);
  assert.match(core.toQuery({ symbols: "on" }), /symbols=on/);
  assert.equal(core.parseQuery("?symbols=on").symbols, "on");
});

test("indexText writes tensorIndex as the DOM does, for every op and role", () => {
  for (const op of core.OPS) {
    const g = core.geometry({ op, in_channels: 2, out_channels: 2, multiplier: 2, batch: 2 });
    for (const role of core.ROLES)
      for (const cell of [[0, 1, 2, 0], [1, 0, 0, 2], [1, 1, 1, 1]])
        assert.equal(core.indexText(g, role, ...cell), core.tensorIndex(g, role, cell).join(","), `${op} ${role}`);
  }
});
