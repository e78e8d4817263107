// convviz explorer: the view.  One ES module, two hosts:
//   * Jupyter: anywidget calls render({model, el}) with the widget's model; Python
//     answers each setting with the kernels' numbers (trait `kernel_result`);
//   * the standalone page: mountPage() makes a small model backed by a plain object
//     and the URL query, and everything is computed by core.js in the page.
// Python inlines core.js where the import line stands (convviz/explorer/_assets.py).
//
// DOM contract (stable; tests and course material rely on it):
//   numbered cell: [data-panel in x|w|dy|dx|dw|y][data-row][data-col][data-value]
//                  [data-index] (its full index in the tensor convviz takes or returns for
//                  the op, in that tensor's layout: core.tensorIndex) [data-plane] [aria-label],
//                  plus [data-channel] when a panel has several channels;
//   padding cell:  [data-panel][data-row][data-col][data-plane][data-pad] (its row/col lie
//                  outside the input; a transposed convolution's cropped rows and columns);
//   worked sum:    [data-role="sum"][data-value];
//   controls:      [name=<parameter>] (see core.PARAMS), and play / step / speed.
import * as core from "./core.js";

// Each panel's symbol, and its words by the role it plays.
const PANEL_SYMBOL = { x: "x", w: "W", dy: "dy", dx: "dx", dw: "dW", y: "y" };
function panelTitle(op, panel) {
  const rec = core.OP_RECORDS[op];
  if (rec.transposed)
    return { x: ["x", "input (N, C_in, H, W)"], w: ["W", "weight (C_in, C_out/groups, kH, kW)"],
             y: ["y", "output (N, C_out, H_out, W_out)"] }[panel];
  const dw = rec.depthwise ? "depthwise filter gradient" : "filter gradient";
  return { x: ["x", "input"], w: ["W", rec.depthwise ? "depthwise filter" : "filter"], dy: ["dL/dy", "output gradient"],
           dx: ["dL/dx", "input gradient"], dw: ["dL/dW", dw], y: ["y", "output"] }[panel];
}
const SPEEDS = [0.5, 1, 2, 4, 8];
const MAX_SHOWN_TERMS = 12;
const MAX_PRODUCT_LABELS = 64;
// Product labels go on cells at least this wide: their font (0.72 of the number's) is then
// 13 px (10 pt, VISUAL.md) or more beside the number; the info panel lists them always.
const PRODUCT_LABEL_CELL = 32;
const MAX_SHOWN_PRODUCTS = 12; // lines of a scatter's products in the info panel
const WIDE = 1000; // px: from here on the info column stands beside the panels (see explorer.css)
const INFO_WIDTH = 330;
const MIN_FONT = 13; // px (10 pt): no number on a cell is drawn smaller, the back row's limit (VISUAL.md)
const CELL_MARGIN = 3; // px a cell keeps around its widest number
// SVG's namespace, as the browser's own HTML parser gives it to an <svg> element: a name,
// never fetched, and the page itself holds no URL at all.
function svgNamespace() {
  const box = document.createElement("div");
  box.innerHTML = "<svg></svg>";
  return box.firstChild.namespaceURI;
}
const SLIDE_SPAN = 9; // rows and columns of a panel a slide shows at most (around the lit cells)

// Fieldsets of controls; a field with several names is one row of inputs (rows x cols, pads).
const CONTROL_GROUPS = [
  ["size", [[["input_h", "input_w"], "input rows \u00d7 cols"], [["kernel_h", "kernel_w"], "kernel rows \u00d7 cols"]]],
  ["step", [[["stride_h", "stride_w"], "stride rows \u00d7 cols"], [["dilation_h", "dilation_w"], "dilation rows \u00d7 cols"]]],
  ["padding", [[["padding"], "mode"], [["pad_top", "pad_bottom", "pad_left", "pad_right"], "pads top, bottom, left, right"],
               [["output_padding_h", "output_padding_w"], "output_padding rows \u00d7 cols"]]],
  ["channels", [[["in_channels"], "in channels"], [["out_channels"], "out channels"], [["groups"], "groups"],
                [["multiplier"], "multiplier"], [["batch"], "batch"]]],
  ["numbers", [[["op"], "op"], [["values"], "numbers"], [["seed"], "seed"], [["symbols"], "symbols"],
               [["practice"], "practice"], [["theme"], "theme"]]],
];
const ARIA_LABELS = {
  input_h: "input rows", input_w: "input cols", kernel_h: "kernel rows", kernel_w: "kernel cols",
  stride_h: "stride rows", stride_w: "stride cols", dilation_h: "dilation rows", dilation_w: "dilation cols",
  pad_top: "pad top", pad_bottom: "pad bottom", pad_left: "pad left", pad_right: "pad right",
  output_padding_h: "output_padding rows", output_padding_w: "output_padding cols",
};
const CHOICE_LABELS = {
  op: Object.fromEntries(core.OPS.map((op) => [op, core.OP_RECORDS[op].label])),
  values: { integers: "integers", decimals: "decimals" },
  symbols: { off: "off", on: "on" },
  practice: { off: "off", on: "on" },
  theme: { auto: "auto", light: "light", dark: "dark" },
  padding: { SAME: "SAME", VALID: "VALID", EXPLICIT: "EXPLICIT" },
};

function esc(text) {
  return String(text).replace(/[&<>"]/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[ch]));
}

// Whether the explorer runs inside a frame of another page (a lesson of the course site).
function embedded() {
  try {
    return typeof window !== "undefined" && window.self !== window.top;
  } catch (err) { // a cross-origin parent: embedded all the same
    return true;
  }
}

// Words of `text` in lines of at most `width` characters (a longer word stands alone).
function wrapText(text, width) {
  const lines = [];
  let line = "";
  for (const word of String(text).split(" ")) {
    if (line && line.length + 1 + word.length > width) { lines.push(line); line = word; }
    else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}

// The font of a cell of `size` px: 40% of it, never under MIN_FONT.
function cellFont(size) {
  return Math.max(MIN_FONT, Math.round(size * 0.4));
}

// A cell of a panel: plane (a, b) -- (image, channel) of an activation, (a, b) of a filter
// (core.roleShape) -- then row and column.
function cellKey(panel, a, b, r, c) {
  return `${panel}|${a}|${b}|${r}|${c}`;
}

// The host's theme: JupyterLab, VS Code, or the system's preference.
function hostTheme() {
  const body = typeof document !== "undefined" ? document.body : null;
  if (body) {
    const jp = body.getAttribute("data-jp-theme-light");
    if (jp === "false") return "dark";
    if (jp === "true") return "light";
    if (body.classList.contains("vscode-dark") || body.classList.contains("vscode-high-contrast")) return "dark";
    if (body.classList.contains("vscode-light")) return "light";
  }
  return typeof matchMedia === "function" && matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

function fromWire(t) {
  return t ? core.tensor(t.rows, t.cols, t.channels, Float64Array.from(t.data), t.batch || 1) : null;
}

class ExplorerView {
  constructor(model, el) {
    this.model = model;
    this.el = el;
    this.params = this.readParams();
    this.hovered = null;
    this.pinned = null;
    this.lit = new Map(); // see clearLit
    this.labelled = new Set();
    this.playIndex = -1;
    this.timer = null;
    this.speed = 2;
    this.scores = new Map(); // setting key -> its answers: Map(cell key -> "right" | "wrong")
    this.showConvolution = false; // conv_transpose2d: draw the convolution it transposes
    this.shownPlanes = {}; // panel -> "a,b": the plane a panel shows when it shows one at a time
    this.planeMode = "auto"; // "auto", "all" or "one": the planes button's choice
    this.unsubscribe = [];
    this.build();
    this.refresh();
    this.listen();
  }

  readParams() {
    const p = {};
    for (const name of Object.keys(core.PARAMS)) p[name] = this.model.get(name);
    return core.normalize(p);
  }

  // -- skeleton -----------------------------------------------------------------
  build() {
    const root = document.createElement("div");
    root.className = "cvz-explorer";
    root.innerHTML = `
      <header class="cvz-head"><h2 class="cvz-title"></h2><p class="cvz-subtitle"></p></header>
      <div class="cvz-main">
        <div class="cvz-left">
          <details class="cvz-settings" open>
            <summary>settings</summary>
            <form class="cvz-controls" onsubmit="return false">${this.controlsHtml()}</form>
          </details>
          <div class="cvz-message" role="alert" hidden></div>
          <div class="cvz-notice" role="status" hidden></div>
          <div class="cvz-panels" role="application" aria-label="convolution panels"></div>
          <figure class="cvz-conv" data-role="convolution" hidden></figure>
        </div>
        <aside class="cvz-info">
          ${this.walkHtml()}
          <div class="cvz-practice" hidden>
            <div class="cvz-score" data-role="score" aria-live="polite"></div>
            <button type="button" name="practice_reset">start over</button>
            <form class="cvz-question" onsubmit="return false" hidden>
              <label><span class="cvz-ask"></span>
                <input name="answer" type="text" inputmode="decimal" autocomplete="off" size="8"></label>
              <button type="submit" name="check">check</button>
            </form>
            <div class="cvz-feedback" data-role="feedback" role="status"></div>
          </div>
          <div class="cvz-focus-title" aria-live="polite"></div>
          <div class="cvz-sum" data-role="sum" data-value=""></div>
          <div class="cvz-sum cvz-products" data-role="products" hidden></div>
          <div class="cvz-note"></div>
          <div class="cvz-hint">Hover or tab to a number to see where it comes from. Click or Enter pins it;
            arrow keys move; Escape clears.</div>
          <details class="cvz-code-box">
            <summary>Code for what is on screen</summary>
            <div class="cvz-code-bar">
              <select name="code_lang" aria-label="language">
                <option value="convviz">convviz</option><option value="tensorflow">TensorFlow</option>
                <option value="pytorch">PyTorch</option></select>
              <button type="button" name="copy_code">copy</button>
              <span class="cvz-copied" role="status"></span>
            </div>
            <pre class="cvz-code" data-role="code" tabindex="0"></pre>
          </details>
        </aside>
      </div>
      <footer class="cvz-source"></footer>`;
    this.el.replaceChildren(root);
    this.root = root;
    // Embedded in a course page (an iframe), the settings start folded: the panels and the worked
    // sum fill the frame, the subtitle says the setting, and one click unfolds the controls.
    if (embedded()) root.querySelector(".cvz-settings").open = false;
    this.q = (sel) => root.querySelector(sel);
    this.panelsEl = this.q(".cvz-panels");
    this.sumEl = this.q('[data-role="sum"]');
    this.productsEl = this.q('[data-role="products"]');
    this.controls = {};
    for (const input of root.querySelectorAll("[name]")) this.controls[input.name] = input;
    for (const [name, input] of Object.entries(this.controls)) {
      if (core.PARAMS[name]) {
        const handler = (e) => this.onControl(name, input, e);
        input.addEventListener("change", handler);
        if (input.type === "number") input.addEventListener("input", handler);
      }
    }
    this.q(".cvz-question").addEventListener("submit", (e) => { e.preventDefault(); this.checkAnswer(); });
    this.controls.practice_reset.addEventListener("click", () => this.startOver());
    this.controls.as_convolution.addEventListener("click", () => {
      this.showConvolution = !this.showConvolution;
      this.renderConvolution();
      this.showActive();
    });
    this.controls.save_svg.addEventListener("click", () => this.saveSlide("svg"));
    this.controls.save_png.addEventListener("click", () => this.saveSlide("png"));
    this.codeBox = this.q(".cvz-code-box");
    this.codeBox.addEventListener("toggle", () => this.renderCode());
    this.controls.code_lang.addEventListener("change", () => this.renderCode());
    this.controls.copy_code.addEventListener("click", () => this.copyCode());
    this.controls.play.addEventListener("click", () => (this.timer ? this.pause() : this.play()));
    this.controls.step.addEventListener("click", () => { this.pause(); this.step(); });
    this.controls.speed.addEventListener("change", () => {
      this.speed = Number(this.controls.speed.value);
      if (this.timer) { this.pause(); this.play(); }
    });
    this.controls.planes.addEventListener("click", () => {
      this.planeMode = this.onePlane ? "all" : "one";
      this.renderPanels();
      this.restoreFocus();
    });
    const p = this.panelsEl;
    p.addEventListener("click", (e) => this.onPlaneChoice(e));
    p.addEventListener("mouseover", (e) => this.onPointer(e));
    p.addEventListener("mouseleave", () => { this.hovered = null; this.showActive(); });
    p.addEventListener("focusin", (e) => this.onPointer(e));
    p.addEventListener("click", (e) => this.onClick(e));
    p.addEventListener("keydown", (e) => this.onKey(e));
    root.addEventListener("keydown", (e) => { if (e.key === "Escape") this.clearFocus(); });
  }

  controlsHtml() {
    return CONTROL_GROUPS.map(([legend, fields]) => {
      const html = fields.map(([names, label]) => {
        const inputs = names.map((name) => {
          const spec = core.PARAMS[name];
          const aria = ARIA_LABELS[name] ? ` aria-label="${ARIA_LABELS[name]}" title="${ARIA_LABELS[name]}"` : "";
          return spec.choices
            ? `<select name="${name}"${aria}>${spec.choices.map((c) => `<option value="${c}">${esc(CHOICE_LABELS[name][c])}</option>`).join("")}</select>`
            : `<input name="${name}" type="number" min="${spec.min}" max="${spec.max}" step="1" inputmode="numeric"${aria}>`;
        });
        const joiner = names.length === 2 ? `<span class="cvz-times">\u00d7</span>` : "";
        return `<label class="cvz-field"><span>${esc(label)}</span><span class="cvz-inputs">${inputs.join(joiner)}</span></label>`;
      }).join("");
      return `<fieldset><legend>${legend}</legend>${html}</fieldset>`;
    }).join("");
  }

  walkHtml() {
    const speeds = SPEEDS.map((s) => `<option value="${s}"${s === 2 ? " selected" : ""}>${s} cells/s</option>`).join("");
    return `<div class="cvz-walk" role="group" aria-label="walk through the output">
      <button type="button" name="play" aria-pressed="false">\u25b6 play</button>
      <button type="button" name="step">step \u2192</button>
      <select name="speed" aria-label="speed">${speeds}</select>
      <button type="button" name="planes" aria-pressed="false" hidden>one channel at a time</button>
      <button type="button" name="as_convolution" aria-pressed="false" hidden>the convolution it transposes</button>
      <button type="button" name="save_svg" title="what is on screen as an SVG for a slide (1280\u00d7720)">save SVG</button>
      <button type="button" name="save_png" title="what is on screen as a PNG for a slide (2560\u00d71440)">save PNG</button></div>`;
  }

  listen() {
    const on = (event, fn) => {
      this.model.on(event, fn);
      this.unsubscribe.push(() => this.model.off && this.model.off(event, fn));
    };
    for (const name of Object.keys(core.PARAMS))
      on(`change:${name}`, () => {
        const value = core.coerce(name, this.model.get(name));
        if (value !== this.params[name]) { this.params[name] = value; this.refresh(); }
      });
    on("change:kernel_result", () => this.applyKernelResult(true));
    on("change:arrays", () => this.refresh());
    on("change:locked", () => this.syncControls());
    on("change:error", () => this.showMessages());
    if (typeof matchMedia === "function") {
      const mq = matchMedia("(prefers-color-scheme: dark)");
      const fn = () => this.applyTheme();
      mq.addEventListener && mq.addEventListener("change", fn);
      this.unsubscribe.push(() => mq.removeEventListener && mq.removeEventListener("change", fn));
    }
  }

  destroy() {
    this.pause();
    this.unsubscribe.forEach((f) => f());
  }

  // -- state changes --------------------------------------------------------------
  onControl(name, input, event) {
    const raw = input.value;
    const typing = input.type === "number" && (raw === "" || !Number.isInteger(Number(raw))); // mid-typing
    const value = typing ? this.params[name] : core.coerce(name, raw);
    // once committed (change), the control shows the value in use: clamped to its range, or back from empty
    if (event && event.type === "change" && raw !== String(value)) input.value = String(value);
    if (typing || value === this.params[name]) return;
    this.params[name] = value;
    this.model.set(name, value);
    this.model.save_changes();
    this.refresh();
  }

  syncControls() {
    const p = this.params;
    const locked = new Set(this.model.get("locked") || []);
    const unused = core.unusedParams(p);
    const shown = core.normalize(p); // a transposed convolution's pads: the same on both sides
    for (const [name, input] of Object.entries(this.controls)) {
      if (!core.PARAMS[name]) continue;
      if (document.activeElement !== input || input.tagName === "SELECT") input.value = String(shown[name]);
      let disabled = locked.has(name), why = disabled ? "fixed by the array you passed" : "";
      if (unused[name]) { disabled = true; why = unused[name]; }
      input.disabled = disabled;
      input.title = why || ARIA_LABELS[name] || "";
      const field = input.closest(".cvz-field");
      field.classList.toggle("cvz-disabled", Array.from(field.querySelectorAll("[name]")).every((i) => i.disabled));
    }
  }

  refresh() {
    const start = performance.now();
    this.width = this.el.clientWidth || 1100; // read before any write: reading it later forces a layout
    this.stopWalk();
    const given = {};
    const arrays = this.model.get("arrays") || {};
    for (const [name, t] of Object.entries(arrays)) if (t) given[name] = fromWire(t);
    this.given = given;
    this.result = core.compute(this.params, given);
    this.roleOfPanel = core.opPanels(this.params.op).roleOf;
    this.root.dataset.numbers = "page"; // "kernel" once Python's reply for this setting is in
    this.applyTheme(false);
    this.syncControls();
    this.renderHead();
    this.applyKernelResult(false);
    this.renderPanels();
    this.showMessages();
    this.showScore();
    this.renderConvolution();
    if (!this.practiceOn()) this.q(".cvz-question").hidden = true;
    this.renderCode();
    this.restoreFocus();
    this.fitPanels(); // last: the one forced layout comes after every write
    this.root.dataset.renderMs = (performance.now() - start).toFixed(2);
  }

  applyTheme(rerender = true) {
    const theme = this.params.theme === "auto" ? hostTheme() : this.params.theme;
    if (this.root.dataset.theme !== theme) {
      this.root.dataset.theme = theme;
      if (rerender && this.result) { this.renderPanels(); this.restoreFocus(); this.fitPanels(); }
    }
  }

  renderHead() {
    const p = this.params, g = this.result.g, rec = core.OP_RECORDS[p.op];
    this.q(".cvz-title").textContent = core.OP_TITLES[p.op];
    const pair = (a, b) => (a === b ? `${a}` : `${a}\u00d7${b}`);
    const parts = [`input ${p.input_h}\u00d7${p.input_w}`, `kernel ${p.kernel_h}\u00d7${p.kernel_w}`,
      `stride ${pair(p.stride_h, p.stride_w)}`, `dilation ${pair(p.dilation_h, p.dilation_w)}`];
    if (rec.transposed) {
      parts.push(`padding ${pair(g.params.pad_top, g.params.pad_left)}`,
                 `output_padding ${pair(p.output_padding_h, p.output_padding_w)}`);
      if (!g.error) parts.push(`output ${g.rows.input}\u00d7${g.cols.input}`);
    } else {
      parts.push(`${p.padding} (pads top ${g.rows.before}, bottom ${g.rows.after}, left ${g.cols.before}, right ${g.cols.after})`);
      if (!g.error) parts.push(`output ${g.rows.out}\u00d7${g.cols.out}`);
    }
    const ch = g.channels;
    if (rec.depthwise) parts.push(`${ch.convIn} channel${ch.convIn === 1 ? "" : "s"} \u00d7 multiplier ${ch.multiplier}`);
    else if (p.in_channels > 1 || p.out_channels > 1 || p.groups > 1)
      parts.push(`channels ${p.in_channels} \u2192 ${p.out_channels}${p.groups > 1 ? `, groups ${p.groups}` : ""}`);
    if (p.batch > 1) parts.push(`batch ${p.batch}`);
    this.q(".cvz-subtitle").textContent = parts.join(" \u00b7 ");
  }

  showMessages() {
    const g = this.result.g;
    const error = g.error || this.model.get("error") || "";
    const msg = this.q(".cvz-message");
    msg.hidden = !error;
    msg.textContent = error;
    const notices = [];
    const arrays = this.model.get("arrays") || {};
    const shapes = g.error ? {} : core.inputShapes(g);
    for (const [name, t] of Object.entries(arrays)) {
      if (!t || !shapes[name]) continue;
      const [r, c, ch, n] = shapes[name];
      if (t.rows !== r || t.cols !== c || t.channels !== ch || (t.batch || 1) !== n)
        notices.push(`Your ${PANEL_SYMBOL[name]} is ${t.rows}\u00d7${t.cols}` + (t.channels > 1 ? `\u00d7${t.channels}` : "") +
          ` but this setting needs ${r}\u00d7${c}` + (ch > 1 ? `\u00d7${ch}` : "") + `: showing example numbers instead.`);
    }
    const notice = this.q(".cvz-notice");
    notice.hidden = notices.length === 0;
    notice.textContent = notices.join(" ");
  }

  // -- panels ---------------------------------------------------------------------
  // The theme's diverging palette: its name in core.PALETTES and its class prefix.
  palette() {
    return this.root.dataset.theme === "dark" ? ["diverging_dark", "cvz-pd"] : ["diverging_light", "cvz-pl"];
  }

  // The class prefix of the theme's palette, its rules added to the page once.
  paletteClass() {
    const [name, prefix] = this.palette();
    if (!this.root.querySelector(`style[data-palette="${prefix}"]`)) {
      const style = document.createElement("style");
      style.dataset.palette = prefix;
      style.textContent = core.paletteRules(core.PALETTES[name], prefix);
      this.root.prepend(style);
    }
    return prefix;
  }

  // Cells as large as the row of panels allows (24-54 px): the width left after the info
  // column, each panel's padding, index column and gutter, and the arrow, over the cells.
  cellSize(g) {
    const width = this.width || this.el.clientWidth || 1100;
    const infoWidth = width >= WIDE ? INFO_WIDTH + 16 : 0; // the info column (explorer.css's container query)
    const { layout, roleOf, padded } = core.opPanels(this.params.op);
    let cells = 0, overhead = 90; // arrow, explorer padding
    for (const panel of layout) {
      const isPadded = panel === padded;
      cells += core.roleShape(g, roleOf[panel])[3] + (isPadded ? Math.max(0, g.cols.before) + Math.max(0, g.cols.after) : 0);
      overhead += 68 + (isPadded && (g.rows.lost.length || g.cols.lost.length) ? 110 : 0); // planes stack vertically
    }
    return Math.max(24, Math.min(54, Math.floor((width - infoWidth - overhead) / cells) - 2));
  }

  // Draw the panels.  Each panel's DOM is kept while its structure (shape, pads, planes,
  // words) stays the same, and only its numbers, colours and labels are rewritten: a change
  // of one control rebuilds only the panels it reshapes (a kernel size: the filter alone).
  // A panel whose size or pads change keeps its frame and the cells it still has, in
  // place: only the rows and columns that come or go are added or removed (parsing and
  // styling every cell again took most of a redraw).  The cell size is a CSS variable,
  // so a new size rebuilds nothing.
  renderPanels() {
    const { g, tensors } = this.result;
    this.clearLit();
    if (g.error) {
      this.panelsEl.replaceChildren();
      this.panelsEl.style.removeProperty("--cell");
      this.panelState = new Map();
      this.cells = new Map();
      this.layoutKey = null;
      return;
    }
    const { layout, padded } = core.opPanels(this.params.op);
    this.choosePlaneMode(g, tensors);
    const frames = layout.map((panel) => this.panelFrame(panel));
    const keys = layout.map((panel, i) => this.panelKey(panel, frames[i]));
    const layoutKey = keys.join("\n");
    let cellSize = this.cellSize(g);
    if (this.fit && this.fit.base === layoutKey) cellSize = Math.min(cellSize, this.fit.size);
    this.layoutKey = layoutKey;
    this.setCellSize(cellSize);
    const state = this.panelState || new Map();
    const next = new Map(), reused = [];
    for (const [i, panel] of layout.entries()) {
      const old = state.get(panel);
      if (old && old.key === keys[i]) { next.set(panel, old); reused.push(panel); continue; }
      const inPlace = Boolean(old) && old.frame === frames[i];
      next.set(panel, this.buildPanel(panel, tensors[panel], panel === padded, keys[i], frames[i], inPlace ? old : null));
      if (inPlace) reused.push(panel);
    }
    this.panelState = next;
    this.fitLabels();
    const arrow = this.arrowEl || (this.arrowEl = Object.assign(document.createElement("div"),
      { className: "cvz-arrow", textContent: "\u2192" }));
    arrow.setAttribute("aria-hidden", "true");
    const nodes = layout.map((panel) => next.get(panel).el);
    nodes.splice(2, 0, arrow);
    const children = this.panelsEl.children;
    if (children.length !== nodes.length || nodes.some((node, i) => children[i] !== node)) this.panelsEl.replaceChildren(...nodes);
    this.cells = new Map();
    this.cellLists = {};
    for (const [panel, s] of next) {
      for (const [k, cell] of s.cells) this.cells.set(k, cell);
      this.cellLists[panel] = s.list;
    }
    if (reused.length) this.updateValues(reused);
  }

  // A panel's DOM: new, or (with `old`, a panel of the same frame) the old one with its
  // grids brought to the new size and pads.  Every grid child has a key naming its kind,
  // place and text; a child whose key the old grid has is kept where it is, the others
  // are parsed together, and the grid is merged in order (kept children keep their order).
  buildPanel(panel, t, padded, key, frame, old) {
    const have = old ? old.have : null;
    const fresh = [], planes = [];
    const look = { pads: this.padsOf(padded), vmax: this.scale(t), prefix: this.paletteClass(), lost: this.lostOf(panel) };
    for (const [a, b] of this.planes(t)) planes.push(this.planeNodes(panel, t, a, b, look, have, fresh));
    const template = document.createElement("template");
    template.innerHTML = (old ? "" : this.panelHtml(panel, t, padded)) + fresh.join("");
    const made = Array.from(template.content.children);
    const el = old ? old.el : made.shift();
    const grids = el.getElementsByClassName("cvz-grid");
    const cells = new Map(), list = [], nextHave = new Map();
    const entries = old ? new Map(old.list.map((entry) => [entry.el, entry])) : null; // what each kept cell shows
    planes.forEach((plane, k) => {
      const nodes = plane.nodes.map((node) => (typeof node === "number" ? made[node] : node));
      nodes.forEach((node, j) => nextHave.set(plane.keys[j], node));
      for (const [cell, j] of plane.cells) cells.set(cell, nodes[j]);
      for (const j of plane.numbered) {
        const cell = nodes[j];
        list.push((entries && entries.get(cell)) ||
                  { el: cell, cls: cell.className, value: cell.getAttribute("data-value"), text: cell.textContent });
      }
      const grid = grids[k];
      grid.style.gridTemplateColumns = `var(--idx) repeat(${plane.columns}, var(--cell)) auto`;
      if (!old) { grid.append(...nodes); return; }
      const keep = new Set(nodes);
      for (const child of Array.from(grid.children)) if (!keep.has(child)) child.remove();
      let at = grid.firstElementChild;
      for (const node of nodes) {
        if (node === at) at = at.nextElementSibling;
        else grid.insertBefore(node, at);
      }
    });
    if (old) this.panelLabels(panel, t, padded, el);
    return { key, frame, el, cells, list, have: nextHave };
  }

  setCellSize(size) {
    this.size = size;
    this.panelsEl.style.setProperty("--cell", `${size}px`);
    this.panelsEl.style.setProperty("--cell-font", `${cellFont(size)}px`);
  }

  // Each panel's cells wide enough for its widest number at MIN_FONT (a panel of long
  // numbers gets larger cells than the row's), and its numbers of 3 or more characters in one
  // font that fits them (--long-font): no number shrinks below MIN_FONT to fit its cell.
  fitLabels() {
    for (const [panel, state] of this.panelState || []) {
      const widest = this.widestLabel(panel);
      const size = Math.max(this.size, Math.ceil(widest) + CELL_MARGIN);
      state.cellSize = size; // (product labels only on cells wide enough for them)
      const long = Math.max(MIN_FONT, Math.min(cellFont(size), Math.floor(MIN_FONT * (size - CELL_MARGIN) / Math.max(widest, 1))));
      const fit = `${size}|${long}`;
      if (state.fit === fit) continue;
      state.fit = fit;
      const style = state.el.style;
      if (size > this.size) {
        style.setProperty("--cell", `${size}px`);
        style.setProperty("--cell-font", `${cellFont(size)}px`);
      } else {
        style.removeProperty("--cell");
        style.removeProperty("--cell-font");
      }
      style.setProperty("--long-font", `${long}px`);
    }
  }

  // The width in px of a panel's widest label at MIN_FONT, in the cells' font (a canvas
  // measures it): its largest and smallest numbers (all of them when not integers), or the
  // symbol of its last cell.
  widestLabel(panel) {
    const t = this.result.tensors[panel];
    let texts;
    if (this.params.symbols === "on") texts = [core.shortSymbol(PANEL_SYMBOL[panel], t.rows - 1, t.cols - 1)];
    else {
      let lo = Infinity, hi = -Infinity, integers = true;
      for (const v of t.data) {
        if (v < lo) lo = v;
        if (v > hi) hi = v;
        if (integers && !Number.isInteger(v)) integers = false;
      }
      texts = integers ? [core.formatNumber(lo), core.formatNumber(hi)] : Array.from(t.data, core.formatNumber);
    }
    const most = Math.max(...texts.map((text) => text.length));
    if (most <= 2) return 0; // one or two characters fit the smallest cell at MIN_FONT
    if (!this.measure) {
      this.measure = document.createElement("canvas").getContext("2d");
      this.measureFont = `600 ${MIN_FONT}px ${getComputedStyle(this.root).fontFamily}`;
    }
    if (!this.measure) return most * MIN_FONT * 0.85; // no canvas: a generous estimate
    this.measure.font = this.measureFont;
    let widest = 0;
    for (const text of new Set(texts)) if (text.length === most || text.length === most - 1)
      widest = Math.max(widest, this.measure.measureText(text).width);
    return widest;
  }

  // What a panel's DOM depends on, but for its numbers, colours and labels (which
  // updateValues rewrites in place): its frame (panelFrame), size and pads.
  panelKey(panel, frame) {
    const { g, tensors } = this.result;
    const t = tensors[panel], { padded } = core.opPanels(this.params.op);
    const axes = panel === padded ? [g.rows.before, g.rows.after, g.cols.before, g.cols.after, g.rows.lost, g.cols.lost] : [];
    return JSON.stringify([frame, t.rows, t.cols, axes]);
  }

  // What a panel's frame (caption, chooser, plane boxes, legend) and its cells' attributes
  // depend on, but for the panel's size and pads: panels of one frame are redrawn in place.
  panelFrame(panel) {
    const { g, tensors } = this.result;
    const t = tensors[panel], ch = g.channels, { roleOf } = core.opPanels(this.params.op);
    const arrays = this.model.get("arrays") || {};
    const caption = Boolean(arrays[panel]) && this.given[panel] === t;
    return JSON.stringify([this.params.op, panel, roleOf[panel], t.batch, t.channels, ch.groups, ch.inPerGroup,
                           ch.multiplier, this.onePlane, caption, this.root.dataset.theme]);
  }

  // All planes stacked while they stay short enough to scan; beyond that (or when asked)
  // one plane per panel, chosen with its tabs or the filter's block matrix.
  choosePlaneMode(g, tensors) {
    let most = 1, tallest = 0;
    for (const panel of core.opPanels(this.params.op).layout) {
      const t = tensors[panel];
      most = Math.max(most, t.batch * t.channels);
      tallest = Math.max(tallest, t.batch * t.channels * (t.rows + 2));
    }
    const auto = most > 4 || tallest > 44;
    this.onePlane = most > 1 && (this.planeMode === "one" || (this.planeMode === "auto" && auto));
    const button = this.controls.planes;
    button.hidden = most === 1;
    button.textContent = this.onePlane ? "show all channels" : "one channel at a time";
    button.setAttribute("aria-pressed", String(this.onePlane));
    for (const panel of core.opPanels(this.params.op).layout) {
      const t = tensors[panel];
      const [a, b] = (this.shownPlanes[panel] || "0,0").split(",").map(Number);
      if (!(a < t.batch && b < t.channels)) this.shownPlanes[panel] = "0,0";
    }
  }

  // A click on a plane's tab or filter block: show that plane (one at a time), or
  // scroll to it (all stacked).
  onPlaneChoice(e) {
    const button = e.target.closest("[data-plane-tab]");
    if (!button || !this.panelsEl.contains(button)) return;
    this.showPlane(button.dataset.panelTab, button.dataset.planeTab, true);
  }

  showPlane(panel, plane, scroll = false) {
    this.shownPlanes[panel] = plane;
    const box = this.panelsEl.querySelector(`[data-panel-box="${panel}"]`);
    if (!box) return;
    for (const el of box.querySelectorAll("[data-plane-box]"))
      el.classList.toggle("cvz-collapsed", this.onePlane && el.dataset.planeBox !== plane);
    for (const el of box.querySelectorAll("[data-plane-tab]")) el.setAttribute("aria-selected", String(el.dataset.planeTab === plane));
    if (scroll && !this.onePlane) {
      const target = box.querySelector(`[data-plane-box="${plane}"]`);
      if (target && target.scrollIntoView) target.scrollIntoView({ block: "nearest" });
    }
  }

  // Where a filter plane (a, b) sits in the channel matrix: the channel of x it reads and
  // the channel of the result's activation (y, or dx for an input gradient) it feeds.
  filterBlock(a, b) {
    const ch = this.result.g.channels;
    if (ch.depthwise) return [a, a * ch.multiplier + b];
    const ci = Math.floor(b / ch.outPerGroup) * ch.inPerGroup + a;
    return this.result.g.record.transposed ? [b, ci] : [ci, b];
  }

  // The plane chooser of a panel with several planes: tabs (image, channel) for an
  // activation; for a filter, its block matrix (x's channels down, the other activation's
  // across), where a grouped or depthwise filter is visibly block-diagonal.
  planeChooser(panel, t, role) {
    const tab = (a, b, label, extra = "") =>
      `<button type="button" class="cvz-tab${extra}" role="tab" data-panel-tab="${panel}" data-plane-tab="${a},${b}"` +
      ` aria-selected="${(this.shownPlanes[panel] || "0,0") === `${a},${b}`}" title="${esc(this.planeLabel(panel, a, b))}">${label}<span class="cvz-badge"></span></button>`;
    if (role !== "filter") {
      const tabs = this.planes(t).map(([a, b]) => tab(a, b, t.batch > 1 ? `n${a} c${b}` : `c${b}`)).join("");
      return `<div class="cvz-tabs" role="tablist" aria-label="${PANEL_SYMBOL[panel]} planes">${tabs}</div>`;
    }
    const g = this.result.g, ch = g.channels;
    const [rowsN, colsN] = g.record.transposed ? [ch.convOut, ch.convIn] : [ch.convIn, ch.convOut];
    const at = new Map(this.planes(t).map(([a, b]) => [this.filterBlock(a, b).join(","), [a, b]]));
    const [from, to] = g.record.transposed ? ["x", "y"] : ["x", g.record.result === "input" ? "dx" : "y"];
    let cells = `<div class="cvz-matrix-corner">${from}\\${to === "dx" ? "dy" : to}</div>`;
    for (let c = 0; c < colsN; c++) cells += `<div class="cvz-matrix-head">${c}</div>`;
    for (let r = 0; r < rowsN; r++) {
      cells += `<div class="cvz-matrix-head">${r}</div>`;
      for (let c = 0; c < colsN; c++) {
        const plane = at.get(`${r},${c}`);
        cells += plane ? tab(plane[0], plane[1], "", " cvz-block")
          : `<div class="cvz-block cvz-unlinked" title="no weight: channel ${r} does not feed channel ${c}"></div>`;
      }
    }
    const groups = ch.depthwise ? "depthwise: one group per channel" : `${ch.groups} group${ch.groups === 1 ? "" : "s"}`;
    return `<div class="cvz-matrix-box"><div class="cvz-matrix" role="tablist" aria-label="W planes: ${groups}"` +
      ` style="grid-template-columns: auto repeat(${colsN}, 1.6em)">${cells}</div>` +
      `<div class="cvz-matrix-note">${esc(groups)}</div></div>`;
  }

  // One plane at a time: the focused (hovered, pinned or walked) cell's plane is shown, and
  // each other panel whose shown plane holds none of its lit cells turns to the first plane
  // that does (planes of one panel have one size: nothing moves under the pointer).
  followPin(f, lit) {
    this.showPlane(f.panel, `${f.a || 0},${f.b || 0}`);
    for (const panel of core.opPanels(this.params.op).layout) {
      if (panel === f.panel) continue;
      const planes = lit.filter((h) => h.panel === panel).map((h) => `${h.a || 0},${h.b || 0}`);
      if (planes.length && !planes.includes(this.shownPlanes[panel] || "0,0")) this.showPlane(panel, planes[0]);
    }
  }

  // Each chooser's tab shows how many lit cells its plane holds (those of a hidden plane
  // are lit all the same).
  markPlanes(lit) {
    const counts = new Map();
    for (const h of lit) {
      const key = `${h.panel}|${h.a || 0},${h.b || 0}`;
      counts.set(key, (counts.get(key) || 0) + 1);
    }
    for (const el of this.panelsEl.querySelectorAll("[data-plane-tab]")) {
      const n = counts.get(`${el.dataset.panelTab}|${el.dataset.planeTab}`) || 0;
      el.classList.toggle("cvz-has-lit", n > 0);
      const badge = el.querySelector(".cvz-badge");
      if (badge) badge.textContent = n && !el.classList.contains("cvz-block") ? ` ${n}` : "";
    }
  }

  // The size estimate ignores captions and gaps: if the row of panels wrapped, shrink the
  // cells to the width there is (once), so inputs and output stay side by side.
  fitPanels() {
    const boxes = this.panelsEl.querySelectorAll(".cvz-panel");
    if (boxes.length < 2 || this.size <= 24) return;
    if (boxes[boxes.length - 1].offsetTop <= boxes[0].offsetTop + 4) return;
    const needed = Array.from(boxes).reduce((sum, b) => sum + b.offsetWidth + 18, 60);
    const smaller = Math.max(24, Math.floor(this.size * Math.min(1, this.panelsEl.clientWidth / needed)) - 1);
    if (smaller >= this.size) return;
    this.fit = { base: this.layoutKey, size: smaller }; // the next redraw of these panels starts there
    this.setCellSize(smaller);
    this.fitLabels();
  }

  // The rows and columns of `panel` that no window reads (only the padded panel shows
  // them), and the word for them: no gradient for dL/dx, never read for x.
  lostOf(panel) {
    const { g } = this.result;
    const { padded, roleOf } = core.opPanels(this.params.op);
    const isPadded = panel === padded;
    const word = g.record.transposed ? "nothing reaches" : g.record.result === "input" ? "no gradient" : "never read";
    return { rows: new Set(isPadded ? g.rows.lost : []), cols: new Set(isPadded ? g.cols.lost : []), word,
             role: roleOf[panel] };
  }

  scale(t) {
    let m = 0;
    for (const v of t.data) m = Math.max(m, Math.abs(v));
    return m > 0 ? m : 1;
  }

  // The planes of a panel's tensor: (a, b) pairs, row-major (core.roleShape).
  planes(t) {
    const out = [];
    for (let a = 0; a < t.batch; a++) for (let b = 0; b < t.channels; b++) out.push([a, b]);
    return out;
  }

  // A plane's name: image and channel of an activation, which input channel feeds which
  // output channel through a filter plane (absolute channel numbers, as the layers count them).
  planeLabel(panel, a, b) {
    const { g } = this.result;
    const role = core.opPanels(this.params.op).roleOf[panel];
    const ch = g.channels, rec = g.record;
    if (role !== "filter") return `${ch.batch > 1 ? `image ${a}, ` : ""}channel ${b}`;
    if (ch.depthwise) return `channel ${a} \u2192 out ${a * ch.multiplier + b} (m ${b})`;
    const co = b, ci = Math.floor(co / ch.outPerGroup) * ch.inPerGroup + a; // the convolution's channels
    return rec.transposed ? `in ${co} \u2192 out ${ci}` : `in ${ci} \u2192 out ${co}`;
  }

  // A numbered cell's name: its full index in the op's tensor when the setting has several
  // channels or images (every panel alike, as the formula writes them), else [row, col].
  cellName(panel, a, b, r, c) {
    const ch = this.result.g.channels;
    if (ch.batch * ch.convIn * ch.convOut === 1) return `${PANEL_SYMBOL[panel]}[${r},${c}]`;
    return `${PANEL_SYMBOL[panel]}[${core.indexText(this.result.g, this.roleOfPanel[panel], a, b, r, c)}]`;
  }

  // Class, value, colours and text of one numbered cell, and its label (a function: the
  // label is written only where the cell is drawn or its look changed).
  cellLook(panel, t, a, b, r, c, vmax, prefix, lost, lostWord) {
    const v = core.at(t, r, c, b, a);
    const answer = this.practiceState(panel, a, b, r, c);
    if (answer === "hidden") // practice: the result's number waits for the learner's answer
      return { cls: "cvz-cell cvz-hidden-cell", value: core.exactNumber(v), text: "?",
               label: () => `${this.cellName(panel, a, b, r, c)}: your answer?` };
    const text = this.params.symbols === "on" ? core.shortSymbol(PANEL_SYMBOL[panel], r, c) : core.formatNumber(v);
    const long = text.length > 2 ? " cvz-long" : ""; // drawn in the panel's --long-font (fitLabels)
    const value = core.exactNumber(v);
    const sym = this.params.symbols === "on" ? " cvz-sym" : "";
    const mark = answer ? ` cvz-${answer}` : ""; // practice: answered right or wrong
    return { cls: `cvz-cell ${prefix}-${core.paletteStep(v, vmax)}${lost ? " cvz-lost" : ""}${long}${sym}${mark}`, value, text,
             label: () => `${this.cellName(panel, a, b, r, c)} = ${value}${lost ? `, ${lostWord}` : ""}` };
  }

  // Rewrite every numbered cell's number, colour and label, and the legends, in place.
  updateValues(panels = core.opPanels(this.params.op).layout) {
    const { tensors } = this.result;
    const prefix = this.paletteClass();
    for (const panel of panels) {
      const t = tensors[panel];
      const vmax = this.scale(t);
      const { rows: lostRows, cols: lostCols, word: lostWord } = this.lostOf(panel);
      const list = this.cellLists[panel]; // the panel's numbered cells, in (a, b, row, col) order, as last drawn
      let i = 0;
      for (let a = 0; a < t.batch; a++)
        for (let b = 0; b < t.channels; b++)
          for (let r = 0; r < t.rows; r++)
            for (let c = 0; c < t.cols; c++, i++) {
              const entry = list[i];
              const look = this.cellLook(panel, t, a, b, r, c, vmax, prefix, lostRows.has(r) || lostCols.has(c), lostWord);
              const el = entry.el;
              const restyled = entry.cls !== look.cls; // the class follows everything the label says but the number
              if (restyled) { el.className = look.cls; entry.cls = look.cls; }
              if (!restyled && entry.value === look.value && entry.text === look.text) continue; // same look, same number
              el.setAttribute("data-value", look.value);
              el.setAttribute("aria-label", look.label());
              if (el.firstChild) el.firstChild.nodeValue = look.text;
              else el.textContent = look.text;
              entry.value = look.value;
              entry.text = look.text;
            }
      const ends = this.panelsEl.querySelectorAll(`[data-panel-box="${panel}"] .cvz-legend > span:not(.cvz-ramp)`);
      ends[0].textContent = core.formatNumber(-vmax);
      ends[1].textContent = core.formatNumber(vmax);
    }
  }

  // The pads drawn around a panel's planes (only the padded panel has them; a transposed
  // output's rows past the scatter have `after` < 0, drawn as none).
  padsOf(padded) {
    const { g } = this.result;
    const clip = (v) => Math.max(0, v);
    return padded ? { top: clip(g.rows.before), bottom: clip(g.rows.after), left: clip(g.cols.before), right: clip(g.cols.after) }
                  : { top: 0, bottom: 0, left: 0, right: 0 };
  }

  // The panel's frame: caption, plane chooser, a box and an empty grid per plane (filled
  // by buildPanel), legend and the padding's key.
  panelHtml(panel, t, padded) {
    const { g } = this.result;
    const [sym, words] = panelTitle(this.params.op, panel);
    const vmax = this.scale(t);
    const stops = core.PALETTES[this.palette()[0]];
    const role = this.roleOfPanel[panel];
    const arrays = this.model.get("arrays") || {};
    const caption = arrays[panel] && arrays[panel].caption && this.given[panel] === this.result.tensors[panel]
      ? `<div class="cvz-caption">${esc(arrays[panel].caption)}</div>` : "";
    const several = t.batch * t.channels > 1;
    const planes = [];
    for (const [a, b] of this.planes(t)) {
      const name = this.planeLabel(panel, a, b);
      const label = several ? `<div class="cvz-channel">${esc(name)}</div>` : "";
      const hidden = this.onePlane && (this.shownPlanes[panel] || "0,0") !== `${a},${b}` ? " cvz-collapsed" : "";
      planes.push(`<div class="cvz-plane${hidden}" data-plane-box="${a},${b}">${label}<div class="cvz-grid" role="grid"` +
        ` aria-label="${esc(sym)}${several ? ` ${esc(name)}` : ""}"></div></div>`);
    }
    const chooser = several ? this.planeChooser(panel, t, role) : "";
    const legend = `<div class="cvz-legend" aria-label="colour scale from ${-vmax} to ${vmax}">
        <span>${core.formatNumber(-vmax)}</span>
        <span class="cvz-ramp" style="background:linear-gradient(to right, ${stops.join(", ")})"></span>
        <span>${core.formatNumber(vmax)}</span></div>`;
    const padNote = padded
      ? `<div class="cvz-key"${this.hasPads(padded) ? "" : " hidden"}><span class="cvz-swatch cvz-pad"></span> ` +
        `${g.record.transposed ? "cropped by padding" : "padding"}</div>` : "";
    return `<figure class="cvz-panel" data-panel-box="${panel}"><figcaption><b>${esc(sym)}</b> ${esc(words)}` +
      `<span class="cvz-shape">${this.shapeText(panel, t)}</span></figcaption>${caption}` +
      `${chooser}<div class="cvz-planes">${planes.join("")}</div>${legend}${padNote}</figure>`;
  }

  hasPads(padded) {
    const pads = this.padsOf(padded);
    return Boolean(pads.top || pads.bottom || pads.left || pads.right);
  }

  // The shape in the caption: the tensor's, in its layout, with several planes.
  shapeText(panel, t) {
    if (t.batch * t.channels === 1) return `${t.rows}\u00d7${t.cols}`;
    return core.tensorIndex(this.result.g, this.roleOfPanel[panel], [t.batch, t.channels, t.rows, t.cols]).join("\u00d7");
  }

  // What a redraw in place changes outside the grids: the shape and the padding's key.
  panelLabels(panel, t, padded, el) {
    el.querySelector(".cvz-shape").textContent = this.shapeText(panel, t);
    const key = el.querySelector(".cvz-key");
    if (key) key.hidden = !this.hasPads(padded);
  }

  // One plane's grid children, in order: the element `have` holds under each child's key
  // where it has one, else the index of the child's HTML, pushed on `fresh`.  `look`: the
  // panel's pads, colour scale, palette and lost rows (buildPanel's, the same for every
  // plane).  Returns the nodes, their keys, (cell key, node) pairs for every cell and the
  // numbered cells' nodes, in (row, col) order.
  planeNodes(panel, t, a, b, look, have, fresh) {
    const { g } = this.result;
    const { pads, vmax, prefix } = look;
    const { rows: lostRows, cols: lostCols, word: lostWord, role } = look.lost;
    const transposed = g.record.transposed;
    const chAttr = (t.channels > 1 ? ` data-channel="${b}"` : "") + ` data-plane="${a},${b}"`;
    const nodes = [], keys = [], cells = [], numbered = [];
    const put = (name, html) => { // html: a function, called only for a child `have` lacks
      const key = `${a},${b}|${name}`;
      const kept = have && have.get(key);
      nodes.push(kept || fresh.push(html()) - 1);
      keys.push(key);
      return nodes.length - 1;
    };
    put("corner", () => `<div class="cvz-corner"></div>`);
    for (let c = -pads.left; c < t.cols + pads.right; c++) {
      const text = c >= 0 && c < t.cols ? c : "";
      put(`col|${c}|${text}`, () => `<div class="cvz-idx cvz-col-idx">${text}</div>`);
    }
    put("gutter", () => `<div class="cvz-gutter"></div>`);
    for (let r = -pads.top; r < t.rows + pads.bottom; r++) {
      const realRow = r >= 0 && r < t.rows;
      put(`row|${r}|${realRow ? r : ""}`, () => `<div class="cvz-idx cvz-row-idx">${realRow ? r : ""}</div>`);
      for (let c = -pads.left; c < t.cols + pads.right; c++) {
        const key = cellKey(panel, a, b, r, c);
        if (!(realRow && c >= 0 && c < t.cols)) {
          cells.push([key, put(`pad|${r}|${c}`, () => {
            const label = panel === "x" ? "0" : "";
            const word = panel === "x" ? "padding, value 0" : transposed ? "cropped by padding, not part of y"
              : "padding, not part of dL/dx";
            return `<div class="cvz-cell cvz-pad" data-panel="${panel}"${chAttr} data-row="${r}" data-col="${c}" data-pad="true"` +
              ` tabindex="-1" role="gridcell" aria-label="${PANEL_SYMBOL[panel]} row ${r} column ${c}: ${word}">${label}</div>`;
          })]);
          continue;
        }
        const j = put(`cell|${r}|${c}`, () => {
          const cell = this.cellLook(panel, t, a, b, r, c, vmax, prefix, lostRows.has(r) || lostCols.has(c), lostWord);
          return `<div class="${cell.cls}" data-panel="${panel}"${chAttr} data-row="${r}" data-col="${c}"` +
            ` data-index="${core.indexText(g, role, a, b, r, c)}" data-value="${cell.value}" tabindex="-1" role="gridcell"` +
            ` aria-label="${cell.label()}">${cell.text}</div>`;
        });
        cells.push([key, j]);
        numbered.push(j);
      }
      const lostRow = realRow && lostRows.has(r);
      put(`end|${r}|${lostRow}`, () => `<div class="cvz-gutter${lostRow ? " cvz-lost-label" : ""}"${lostRow ? ` data-lost-row="${r}"` : ""}>` +
        `${lostRow ? "\u2190 " + lostWord : ""}</div>`);
    }
    if (lostCols.size) {
      put("lost-corner", () => `<div class="cvz-corner"></div>`);
      for (let c = -pads.left; c < t.cols + pads.right; c++) {
        const lost = lostCols.has(c) && c >= 0 && c < t.cols;
        put(`lost|${c}|${lost}`, () => `<div class="cvz-idx${lost ? " cvz-lost-label cvz-lost-col" : ""}"` +
          `${lost ? ` data-lost-col="${c}" title="${lostWord}"` : ""}>${lost ? "\u2191" : ""}</div>`);
      }
      put("lost-end", () => `<div class="cvz-gutter cvz-lost-label">\u2191 ${lostWord}</div>`);
    }
    return { nodes, keys, cells, numbered, columns: t.cols + pads.left + pads.right };
  }

  // The code panel: written only while it is open (a redraw of a large setting skips it).
  renderCode() {
    const pre = this.q(".cvz-code");
    const { g, tensors } = this.result;
    const lang = this.controls.code_lang.value;
    pre.dataset.lang = lang;
    if (!this.codeBox.open || g.error) { // written again when opened
      if (g.error) pre.textContent = "";
      pre.dataset.stale = "true";
      delete pre.dataset.result;
      return;
    }
    const { code, result } = core.codeFor(g, tensors, lang);
    pre.textContent = code;
    pre.dataset.result = result;
    delete pre.dataset.stale;
    this.q(".cvz-copied").textContent = "";
  }

  copyCode() {
    const text = this.q(".cvz-code").textContent;
    const done = (ok) => { this.q(".cvz-copied").textContent = ok ? "copied" : "select the code and copy it"; };
    const fallback = () => {
      const area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.style.position = "fixed";
      area.style.opacity = "0";
      this.root.appendChild(area);
      area.select();
      let ok = false;
      try { ok = document.execCommand("copy"); } catch (err) { ok = false; }
      area.remove();
      done(ok);
    };
    // The clipboard API may wait on a permission that never comes (file://): fall back after 1 s.
    if (navigator.clipboard && navigator.clipboard.writeText) {
      let settled = false;
      const settle = (fn) => () => { if (!settled) { settled = true; fn(); } };
      navigator.clipboard.writeText(text).then(settle(() => done(true)), settle(fallback));
      setTimeout(settle(fallback), 1000);
    } else fallback();
  }

  // Swap in the kernel's numbers when Python's reply is for the setting on screen.
  applyKernelResult(fromEvent) {
    const reply = this.model.get("kernel_result") || {};
    const { g, output } = this.result;
    const source = this.q(".cvz-source");
    if (g.error || !output || reply.key !== core.settingKey(this.params) || reply.panel !== output || !reply.data) {
      source.textContent = this.model.get("kernel_result") === undefined
        ? "Numbers computed in this page (JavaScript, float64) by the same rules as convviz."
        : "Numbers computed in the browser; waiting for the convviz kernels\u2026";
      return;
    }
    const t = this.result.tensors[output];
    t.data = Float64Array.from(reply.data);
    source.textContent = `Numbers from ${reply.source}.`;
    this.root.dataset.numbers = "kernel";
    if (fromEvent) {
      this.renderPanels();
      this.restoreFocus();
      this.fitPanels();
    }
  }

  // -- focus: hover, pin, keyboard ------------------------------------------------
  cellInfo(el) {
    const d = el.dataset;
    const [a, b] = (d.plane || "0,0").split(",").map(Number);
    return { panel: d.panel, a, b, r: Number(d.row), c: Number(d.col), pad: d.pad === "true" };
  }

  onPointer(e) {
    const el = e.target.closest(".cvz-cell, .cvz-lost-label");
    if (!el || !this.panelsEl.contains(el)) return;
    if (el.classList.contains("cvz-lost-label") && !el.classList.contains("cvz-cell")) {
      if (el.dataset.lostRow === undefined && el.dataset.lostCol === undefined) return; // the "\u2191 no gradient" caption
      this.hovered = { lostRow: el.dataset.lostRow, lostCol: el.dataset.lostCol };
    } else {
      this.hovered = this.cellInfo(el);
    }
    this.showActive();
  }

  onClick(e) {
    const el = e.target.closest(".cvz-cell");
    if (!el) return;
    this.togglePin(this.cellInfo(el));
    el.focus({ preventScroll: true });
  }

  togglePin(info) {
    const same = this.pinned && ["panel", "a", "b", "r", "c"].every((k) => this.pinned[k] === info[k]);
    this.pinned = same ? null : info;
    this.showActive();
    this.ask(this.pinned);
  }

  // -- conv_transpose2d: the convolution it transposes, drawn beside it -------------------
  // Its input is y's grid, padded (padding, padding - output_padding) -- output_padding's
  // rows past the last window get nothing -- and its output is x's grid: the window the
  // convolution reads for an x cell is exactly where conv_transpose2d scatters that cell.
  renderConvolution() {
    const box = this.q(".cvz-conv");
    const { g } = this.result;
    const on = g.record.transposed && !g.error;
    this.controls.as_convolution.hidden = !g.record.transposed;
    this.controls.as_convolution.setAttribute("aria-pressed", String(on && this.showConvolution));
    this.controls.as_convolution.textContent = this.showConvolution ? "hide the convolution" : "the convolution it transposes";
    box.hidden = !(on && this.showConvolution);
    this.convCells = new Map();
    if (box.hidden) { box.innerHTML = ""; return; }
    const R = g.rows, C = g.cols, p = g.params;
    const grid = (kind, rows, cols, before, after, left, right) => {
      let cells = "";
      for (let r = -before; r < rows + after; r++)
        for (let c = -left; c < cols + right; c++) {
          const real = r >= 0 && r < rows && c >= 0 && c < cols;
          const beyond = kind === "in" && real && (R.coverage[r] === 0 || C.coverage[c] === 0);
          cells += `<div class="cvz-mini${real ? "" : " cvz-mini-pad"}${beyond ? " cvz-mini-lost" : ""}" data-conv-cell="${kind}|${r}|${c}"` +
            ` title="${kind === "in" ? "y" : "x"} row ${r}, column ${c}${real ? "" : " (padding)"}"></div>`;
        }
      return `<div class="cvz-mini-grid" style="grid-template-columns: repeat(${cols + left + right}, var(--mini))">${cells}</div>`;
    };
    const pair = (a, b) => (a === b ? `${a}` : `${a}, ${b}`);
    // a negative pad: output_padding's rows (columns) past the convolution's last window
    const padWords = (n, unit) => (n >= 0 ? `${n}` : `0 (and ${-n} ${unit}${n === -1 ? "" : "s"} past its last window)`);
    box.innerHTML = `<figcaption><b>The convolution it transposes</b>: conv2d with the same weights (as HWIO, ` +
      `in and out channels swapped), stride ${pair(p.stride_h, p.stride_w)}, dilation ${pair(p.dilation_h, p.dilation_w)}, ` +
      `pads top ${R.before}, bottom ${padWords(R.after, "row")}, left ${C.before}, right ${padWords(C.after, "column")}, ` +
      `maps y's ${R.input}\u00d7${C.input} to ` +
      `x's ${R.out}\u00d7${C.out}. conv_transpose2d is its input gradient: each x cell scatters through W into exactly ` +
      `the window the convolution reads for it.${R.after < 0 || C.after < 0 ? " output_padding's rows past the last window " +
      "(marked) get nothing." : ""}</figcaption>` +
      `<div class="cvz-mini-row"><div><div class="cvz-mini-title">its input: y's grid</div>` +
      `${grid("in", R.input, C.input, R.before, Math.max(0, R.after), C.before, Math.max(0, C.after))}</div>` +
      `<div class="cvz-arrow" aria-hidden="true">\u2192</div>` +
      `<div><div class="cvz-mini-title">its output: x's grid</div>${grid("out", R.out, C.out, 0, 0, 0, 0)}</div></div>`;
    for (const el of box.querySelectorAll("[data-conv-cell]")) this.convCells.set(el.dataset.convCell, el);
  }

  // The focused cell's window (an x cell) or readers (a y cell) on the convolution's grids.
  markConvolution(focus, lit) {
    for (const el of this.convLit || []) el.classList.remove("cvz-mini-in", "cvz-mini-focus");
    this.convLit = [];
    if (!this.convCells || !this.convCells.size || !focus || !focus.panel) return;
    const light = (kind, r, c, cls) => {
      const el = this.convCells.get(`${kind}|${r}|${c}`);
      if (el) { el.classList.add(cls); this.convLit.push(el); }
    };
    const kindOf = { y: "in", x: "out" };
    if (kindOf[focus.panel]) light(kindOf[focus.panel], focus.r, focus.c, "cvz-mini-focus");
    for (const h of lit) if (kindOf[h.panel]) light(kindOf[h.panel], h.r, h.c, "cvz-mini-in");
  }

  // -- practice: hidden result cells, the learner's answers, a score per setting ---------
  practiceOn() {
    return this.params.practice === "on" && !this.result.g.error;
  }

  // A setting's score, kept in the browser's localStorage for the page's own numbers (a
  // learner who reloads a linked exercise finds it as left; numbers passed from Python may
  // differ from one run to the next, so theirs lasts the session).
  score() {
    const key = core.settingKey(this.params);
    if (!this.scores.has(key)) this.scores.set(key, this.storedScore(key) || new Map());
    return this.scores.get(key);
  }

  scoreStorageKey(key) {
    return Object.keys(this.given || {}).length ? null : `convviz-practice|${key}`;
  }

  storedScore(key) {
    const name = this.scoreStorageKey(key);
    try {
      const text = name && window.localStorage && window.localStorage.getItem(name);
      if (!text) return null;
      const { answers } = JSON.parse(text);
      return new Map(answers.filter(([k, v]) => typeof k === "string" && (v === "right" || v === "wrong")));
    } catch (err) {
      return null; // storage off (a sandboxed frame) or an old entry: a fresh score
    }
  }

  storeScore() {
    const key = core.settingKey(this.params), name = this.scoreStorageKey(key), answers = this.scores.get(key);
    try {
      if (!name || !window.localStorage) return;
      if (answers && answers.size) window.localStorage.setItem(name, JSON.stringify({ answers: [...answers] }));
      else window.localStorage.removeItem(name);
    } catch (err) { /* storage full or off: the score lasts the session */ }
  }

  // The setting's answers forgotten: every result cell hidden again.
  startOver() {
    this.scores.set(core.settingKey(this.params), new Map());
    this.storeScore();
    this.q(".cvz-question").hidden = true;
    this.q(".cvz-feedback").textContent = "";
    this.asked = null;
    this.updateValues();
    this.clearFocus(); // (which draws the highlight again)
    this.showScore();
  }

  // "hidden" (unanswered), "right", "wrong", or null (not a practice cell).
  practiceState(panel, a, b, r, c) {
    if (!this.practiceOn() || panel !== this.result.output) return null;
    return this.score().get(cellKey(panel, a, b, r, c)) || "hidden";
  }

  // Ask for the pinned cell's value, if it is a hidden one.
  ask(cell) {
    const form = this.q(".cvz-question");
    const hidden = cell && !cell.pad && this.practiceState(cell.panel, cell.a || 0, cell.b || 0, cell.r, cell.c) === "hidden";
    form.hidden = !hidden;
    if (!hidden) return;
    this.asked = cell;
    this.q(".cvz-ask").textContent = `${this.cellName(cell.panel, cell.a || 0, cell.b || 0, cell.r, cell.c)} = `;
    this.controls.answer.value = "";
    this.q(".cvz-feedback").textContent = "";
    this.controls.answer.focus({ preventScroll: true });
  }

  checkAnswer() {
    const cell = this.asked;
    if (!cell) return;
    const feedback = this.q(".cvz-feedback");
    const typed = this.controls.answer.value;
    const answer = core.parseAnswer(typed);
    if (Number.isNaN(answer)) { feedback.textContent = "Type a number (\u22123, 0.5 or 2)."; feedback.dataset.result = "none"; return; }
    const value = this.value(cell.panel, cell.r, cell.c, cell.b || 0, cell.a || 0);
    const name = this.cellName(cell.panel, cell.a || 0, cell.b || 0, cell.r, cell.c);
    const right = core.isRight(answer, value);
    this.score().set(cellKey(cell.panel, cell.a || 0, cell.b || 0, cell.r, cell.c), right ? "right" : "wrong");
    this.storeScore();
    feedback.dataset.result = right ? "right" : "wrong";
    feedback.textContent = right ? `Right: ${name} = ${core.formatNumber(value)}.`
      : `Not quite: you wrote ${core.formatNumber(answer)}, and ${name} = ${core.formatNumber(value)}. ` +
        "Its worked sum and the cells that make it are lit.";
    this.q(".cvz-question").hidden = true;
    this.asked = null;
    this.updateValues(); // the answered cell shows its number, marked
    this.pinned = cell; // on a miss (and a hit) the worked sum shows how it is made
    this.showActive();
    this.showScore();
  }

  showScore() {
    const box = this.q(".cvz-practice");
    box.hidden = !this.practiceOn();
    this.controls.play.disabled = this.controls.step.disabled = !box.hidden; // a walk would show every answer
    if (box.hidden) return;
    const t = this.result.tensors[this.result.output];
    const total = t.batch * t.channels * t.rows * t.cols;
    const answers = this.score();
    const right = [...answers.values()].filter((v) => v === "right").length, left = total - answers.size;
    const el = this.q('[data-role="score"]');
    el.dataset.right = right;
    el.dataset.tried = answers.size;
    el.textContent = `Practice: ${right} right of ${answers.size} tried \u00b7 ${left} ` +
      `cell${left === 1 ? "" : "s"} left. Click a ? cell, type its value, check.`;
  }

  clearFocus() {
    this.pinned = null;
    this.hovered = null;
    this.stopWalk();
    if (this.root.contains(document.activeElement)) document.activeElement.blur();
    this.showActive();
  }

  onKey(e) {
    const el = e.target.closest(".cvz-cell");
    if (!el) return;
    const info = this.cellInfo(el);
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    if (moves[e.key]) {
      e.preventDefault();
      const [dr, dc] = moves[e.key];
      const next = this.cells.get(cellKey(info.panel, info.a, info.b, info.r + dr, info.c + dc));
      if (next) next.focus();
    } else if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      this.togglePin(info);
    } else if (e.key === "Escape") {
      e.preventDefault();
      e.stopPropagation();
      this.clearFocus();
    }
  }

  restoreFocus() {
    const f = this.pinned || this.hovered;
    if (f && f.panel && !this.cells.has(cellKey(f.panel, f.a, f.b, f.r, f.c))) {
      this.pinned = null;
      this.hovered = null;
    }
    // one tab stop per panel: its first cell
    for (const grid of this.panelsEl.querySelectorAll(".cvz-grid")) {
      const first = grid.querySelector(".cvz-cell:not(.cvz-pad)") || grid.querySelector(".cvz-cell");
      if (first) first.tabIndex = 0;
    }
    this.showActive();
  }

  active() {
    return this.hovered || this.pinned;
  }

  // this.lit: element -> the highlight classes it carries; this.labelled: the elements
  // that carry a product label.
  clearLit() {
    for (const [el, classes] of this.lit) el.classList.remove(...classes);
    for (const el of this.labelled) delete el.dataset.product;
    this.lit = new Map();
    this.labelled = new Set();
  }

  // The highlight of what is hovered or pinned.  Only the difference from the last one is
  // written: moving from a filter tap to the next relights a lattice of ~1,150 cells that
  // mostly stays (each class added or removed costs that cell a style recalculation).
  showActive() {
    const wanted = new Map(); // element -> classes
    const labels = new Map(); // element -> product label
    const mark = (cell, cls) => {
      const el = this.cells.get(cellKey(cell.panel, cell.a || 0, cell.b || 0, cell.r, cell.c));
      if (el) {
        const classes = wanted.get(el);
        if (!classes) wanted.set(el, [cls]);
        else if (!classes.includes(cls)) classes.push(cls);
      }
      return el;
    };
    const apply = () => {
      for (const [el, classes] of this.lit) {
        const keep = wanted.get(el);
        for (const cls of classes) if (!keep || !keep.includes(cls)) el.classList.remove(cls);
      }
      for (const [el, classes] of wanted) {
        const had = this.lit.get(el);
        for (const cls of classes) if (!had || !had.includes(cls)) el.classList.add(cls);
      }
      for (const el of this.labelled) if (!labels.has(el)) delete el.dataset.product;
      for (const [el, label] of labels) if (el.dataset.product !== label) el.dataset.product = label;
      this.lit = wanted;
      this.labelled = new Set(labels.keys());
    };
    if (this.pinned) mark(this.pinned, "cvz-pinned");
    const a = this.active();
    const info = a && !this.result.g.error ? this.explain(a) : null;
    this.info = info; // what a slide saved now shows
    this.q(".cvz-focus-title").textContent = info ? info.title : "";
    this.q(".cvz-note").textContent = (info && info.note) || "";
    const sum = info && info.sum;
    this.sumEl.hidden = !sum;
    this.sumEl.dataset.value = sum ? core.exactNumber(sum.value) : "";
    this.sumEl.innerHTML = sum ? this.sumHtml(sum) : "";
    const scatter = info && info.products;
    this.productsEl.hidden = !scatter;
    this.productsEl.innerHTML = scatter ? this.productsHtml(scatter) : "";
    this.markPlanes(info ? info.lit : []);
    this.markConvolution(a, info ? info.lit : []);
    if (!info) return apply();
    if (this.onePlane && a.panel) this.followPin(a, info.lit);
    // Products are written on the targets while they are few enough to read (a dy cell's
    // scatter); a tap lights a whole lattice, and writing hundreds of labels costs a layout.
    // Only on cells wide enough for a label of 13 px beside the number (the info panel
    // lists every product whatever the cells' size).
    const products = info.lit.filter((h) => h.product !== undefined).length <= MAX_PRODUCT_LABELS;
    const wide = (panel) => {
      const state = this.panelState && this.panelState.get(panel);
      return ((state && state.cellSize) || this.size) >= PRODUCT_LABEL_CELL;
    };
    for (const h of info.lit) {
      const el = mark(h, h.cls);
      if (el && products && h.product !== undefined && wide(h.panel) &&
          this.practiceState(h.panel, h.a || 0, h.b || 0, h.r, h.c) !== "hidden")
        labels.set(el, (h.product < 0 ? "" : "+") + core.formatNumber(h.product));
    }
    if (a.panel) mark(a, "cvz-source-cell");
    apply();
  }

  // The worked sum: symbols, then numbers, grouped by channel (or image) when the terms
  // come through several, with how many terms there are.
  sumHtml(sum) {
    const shown = sum.terms.slice(0, MAX_SHOWN_TERMS);
    const more = sum.terms.length - shown.length;
    const f = (v) => (v < 0 ? `(${core.formatNumber(v)})` : core.formatNumber(v));
    const name = (x) => this.cellName(x.panel, x.cell[0], x.cell[1], x.cell[2], x.cell[3]);
    const join = (fn, list = shown) => {
      const rest = sum.terms.length - list.length;
      const end = rest > 0 ? ` + \u2026 (${rest} more)` : "";
      if (sum.groups.length < 2) return list.map(fn).join(" + ") + end;
      const parts = [];
      for (const group of sum.groups) {
        const inGroup = group.terms.filter((t) => list.includes(t));
        if (inGroup.length) parts.push(`[${sum.groupedBy} ${group.key}: ${inGroup.map(fn).join(" + ")}]`);
      }
      return parts.join(" + ") + end;
    };
    const empty = sum.terms.length === 0;
    const n = sum.terms.length;
    const count = `${n} term${n === 1 ? "" : "s"}` + (sum.groups.length > 1 ? ` through ${sum.groups.length} ${sum.groupedBy}s` : "");
    let body;
    if (empty) body = `<div class="cvz-sum-terms">no terms (nothing reaches it)</div>`;
    else if (this.params.symbols === "on") { // the formula, then each term as symbols with its numbers beside it
      const rows = shown.map((t) => `<div class="cvz-sum-term">${esc(`${name(t.a)}\u00b7${name(t.b)}`)}` +
        `<span class="cvz-sum-nums">${esc(`${f(t.va)}\u00b7${f(t.vb)}`)}</span></div>`).join("");
      body = `<div class="cvz-formula">${esc(core.formula(this.result.g))}</div><div class="cvz-sum-count">${esc(count)}</div>` +
        rows + (more > 0 ? `<div class="cvz-sum-term">+ \u2026 (${more} more)</div>` : "");
    } else {
      // Full 4-D names fill a line of the column each: half as many, so that the sum's
      // value stays on a 720 px screen (4 channels: 36 terms).
      const longNames = !empty && name(shown[0].a).length > 8;
      const symbols = join((t) => `${name(t.a)}\u00b7${name(t.b)}`, longNames ? shown.slice(0, MAX_SHOWN_TERMS / 2) : shown);
      const numbers = join((t) => `${f(t.va)}\u00b7${f(t.vb)}`);
      body = `<div class="cvz-sum-count">${esc(count)}</div><div class="cvz-sum-terms">${esc(symbols)}</div>` +
        `<div class="cvz-sum-terms">= ${esc(numbers)}</div>`;
    }
    return `<div class="cvz-sum-lhs">${esc(sum.lhs)} =</div>${body}` +
      `<div class="cvz-sum-value">= <b>${esc(core.formatNumber(sum.value))}</b></div>`;
  }

  // A given cell's scatter: each product and the result cell it lands on, one a line
  // (those that land on padding or cropped cells marked dropped).
  productLines(scatter) {
    const f = (v) => (v < 0 ? `(${core.formatNumber(v)})` : core.formatNumber(v));
    const lines = scatter.list.slice(0, MAX_SHOWN_PRODUCTS).map((p) =>
      `${this.cellName(p.panel, p.a, p.b, p.r, p.c)} += ${f(scatter.value)}\u00b7${f(p.other)} = ` +
      `${core.formatNumber(p.product)}${p.dropped ? " (dropped)" : ""}`);
    const more = scatter.list.length - MAX_SHOWN_PRODUCTS;
    if (more > 0) lines.push(`\u2026 (${more} more)`);
    return lines;
  }

  productsHtml(scatter) {
    const n = scatter.list.length;
    return `<div class="cvz-sum-count">${n} product${n === 1 ? "" : "s"}, ${esc(scatter.from)}\u00b7${esc(scatter.by)}</div>` +
      this.productLines(scatter).map((line) => `<div class="cvz-product">${esc(line)}</div>`).join("");
  }

  value(panel, r, c, b = 0, a = 0) {
    return core.at(this.result.tensors[panel], r, c, b, a);
  }

  // What to light and say for the focused cell, from the links that reach it (core.linksOf):
  // a result cell's worked sum, or where a given cell's products go.
  explain(f) {
    const { g, tensors } = this.result;
    const { panelOf, roleOf, padded } = core.opPanels(this.params.op);
    if (f.lostRow !== undefined || f.lostCol !== undefined) {
      const axis = f.lostRow !== undefined ? "rows" : "cols";
      const i = Number(f.lostRow !== undefined ? f.lostRow : f.lostCol);
      const lit = [];
      const t = tensors[padded];
      for (const [a, b] of this.planes(t))
        for (let k = 0; k < (axis === "rows" ? t.cols : t.rows); k++)
          lit.push(axis === "rows" ? { panel: padded, a, b, r: i, c: k, cls: "cvz-in" } : { panel: padded, a, b, r: k, c: i, cls: "cvz-in" });
      return { title: `${axis === "rows" ? "Row" : "Column"} ${i} of ${PANEL_SYMBOL[padded]}`, note: core.lostReason(g, axis, i), lit };
    }
    const rec = g.record, role = roleOf[f.panel];
    const cellOf = (link, r, cls, extra = {}) => ({ panel: panelOf[r], a: link[r][0], b: link[r][1], r: link[r][2], c: link[r][3], cls, ...extra });
    const valueAt = (link, r) => (r === "input" && link.pad ? 0 : this.value(panelOf[r], link[r][2], link[r][3], link[r][1], link[r][0]));
    const links = core.linksOf(g, role, [f.a || 0, f.b || 0, f.r, f.c]);
    const lit = [];
    if (f.pad) {
      const notes = [];
      if (f.r < 0) notes.push(core.paddingReason(g, "rows", true));
      if (f.r >= g.rows.input) notes.push(core.paddingReason(g, "rows", false));
      if (f.c < 0) notes.push(core.paddingReason(g, "cols", true));
      if (f.c >= g.cols.input) notes.push(core.paddingReason(g, "cols", false));
      notes.push(rec.transposed ? "What the scatter puts there is cut off: it is not part of y." : core.PADDING_HOLDS);
      // the windows that read this zero (or the products that land on it and are dropped)
      for (const link of links)
        for (const r of core.ROLES) if (r !== "input") lit.push(cellOf(link, r, r === rec.result ? "cvz-target" : "cvz-in"));
      return { title: `${rec.transposed ? "Cropped" : "Padding"} cell (row ${f.r}, column ${f.c})`, note: notes.join(" "), lit };
    }
    if (this.practiceState(f.panel, f.a || 0, f.b || 0, f.r, f.c) === "hidden")
      return { title: `${this.cellName(f.panel, f.a || 0, f.b || 0, f.r, f.c)} = ?`, lit: [],
               note: "Click it (or Enter), type its value, then check." };
    const v = this.value(f.panel, f.r, f.c, f.b || 0, f.a || 0);
    const head = `${this.cellName(f.panel, f.a || 0, f.b || 0, f.r, f.c)} = ${core.formatNumber(v)}`;
    const lostNote = () => [core.lostReason(g, "rows", f.r), core.lostReason(g, "cols", f.c)].filter(Boolean).join(" ");
    if (role === rec.result) {
      const sum = core.workedSum(g, tensors, [f.a || 0, f.b || 0, f.r, f.c]);
      for (const link of links) {
        if (link.pad) { lit.push(cellOf(link, "input", "cvz-in")); continue; } // the padding it reads
        for (const r of rec.given) lit.push(cellOf(link, r, "cvz-in"));
      }
      const note = sum.padReads ? `${sum.padReads} of its products read padding (0) and add nothing.`
        : sum.terms.length ? "" : (role === "input" ? lostNote() : "");
      return { title: `${head}: the sum of ${sum.terms.length} product${sum.terms.length === 1 ? "" : "s"}`, lit, note,
               sum: { lhs: this.cellName(f.panel, f.a || 0, f.b || 0, f.r, f.c), terms: sum.terms, groups: sum.groups,
                      groupedBy: sum.groupedBy, value: v } };
    }
    // a given cell: each link multiplies it by one cell of the other given tensor into one result cell
    const other = rec.given.find((r) => r !== role);
    let dropped = 0;
    const targets = new Set(), list = [];
    for (const link of links) {
      const w = valueAt(link, other), product = v * w; // 0 where the other factor is padding
      const target = cellOf(link, rec.result, "cvz-target", { product });
      lit.push(cellOf(link, other, "cvz-in"));
      lit.push(target);
      const drop = Boolean(link.pad && rec.result === "input");
      if (drop) dropped++;
      else targets.add(link[rec.result].join(","));
      list.push({ ...target, other: w, dropped: drop });
    }
    const resultSym = PANEL_SYMBOL[panelOf[rec.result]];
    const notes = [];
    if (links.length) notes.push(`Each lit ${resultSym} cell gets ${PANEL_SYMBOL[f.panel]}\u00b7${PANEL_SYMBOL[panelOf[other]]} from it (listed above; on the cells too where they are wide enough).`);
    if (dropped) notes.push(`${dropped} of the products land on ${rec.transposed ? "cropped rows or columns" : "padding"} and are dropped.`);
    if (!links.length && role === "input") notes.push(lostNote());
    const products = links.length ? { value: v, from: PANEL_SYMBOL[f.panel], by: PANEL_SYMBOL[panelOf[other]], list } : null;
    return { title: `${head} reaches ${targets.size} ${resultSym} cell${targets.size === 1 ? "" : "s"}`, lit, note: notes.join(" "),
             products };
  }

  // -- slides: what is on screen as an SVG (and a PNG drawn from it), offline ---------
  // Drawn from the setting, not copied from the DOM: each panel's plane in view (with the
  // focused cell's), its numbers, padding and highlights, then the title and the worked sum.
  slideSvg() {
    const { g, tensors } = this.result;
    const W = 1280, H = 720, margin = 24, sumWidth = 400;
    const css = getComputedStyle(this.root);
    const v = (name) => css.getPropertyValue(name).trim();
    const colors = { bg: v("--bg"), fg: v("--fg"), muted: v("--muted"), panel: v("--panel"), padBg: v("--pad-bg"),
                     padLine: v("--pad-line"), in: v("--in"), target: v("--target"), source: v("--source") };
    const stops = core.PALETTES[this.palette()[0]];
    const text = (x, y, str, size, attrs = "") =>
      `<text x="${x}" y="${y}" font-size="${size}"${attrs}>${esc(str)}</text>`;
    const out = [];
    const title = core.OP_TITLES[this.params.op];
    out.push(text(margin, 40, title, 28, ` font-weight="700" fill="${colors.fg}"`));
    const subtitle = wrapText(this.q(".cvz-subtitle").textContent, 120).slice(0, 2);
    subtitle.forEach((line, i) => out.push(text(margin, 66 + 20 * i, line, 16, ` fill="${colors.muted}"`)));
    if (g.error) {
      out.push(text(margin, 110, g.error, 18, ` fill="${colors.fg}"`));
      return this.wrapSvg(out, W, H, colors);
    }
    const { layout, roleOf, padded } = core.opPanels(this.params.op);
    const focus = this.active();
    const lit = new Map(); // cell key -> [class, product]
    for (const h of (this.info && this.info.lit) || [])
      lit.set(cellKey(h.panel, h.a || 0, h.b || 0, h.r, h.c), [h.cls, h.product]);
    // each panel's plane: the focused cell's, else one holding lit cells, else the one shown
    const planeOf = (panel) => {
      if (focus && focus.panel === panel) return [focus.a || 0, focus.b || 0];
      const litPlane = ((this.info && this.info.lit) || []).find((h) => h.panel === panel);
      if (litPlane) return [litPlane.a || 0, litPlane.b || 0];
      return (this.shownPlanes[panel] || "0,0").split(",").map(Number);
    };
    // Each panel cropped to at most SLIDE_SPAN rows and columns around its lit cells (or the
    // focused cell), so that a slide of a large setting stays legible; row and column
    // numbers say where the window is.
    const boxes = layout.map((panel) => {
      const t = tensors[panel];
      const isPadded = panel === padded;
      const pads = isPadded ? [g.rows.before, g.rows.after, g.cols.before, g.cols.after].map((x) => Math.max(0, x)) : [0, 0, 0, 0];
      const plane = planeOf(panel);
      const marks = ((this.info && this.info.lit) || []).filter((h) => h.panel === panel && (h.a || 0) === plane[0] && (h.b || 0) === plane[1]);
      if (focus && focus.panel === panel) marks.push(focus);
      const window = (lo, hi, coords) => { // [from, to] within lo..hi, at most SLIDE_SPAN long
        if (hi - lo + 1 <= SLIDE_SPAN) return [lo, hi];
        if (!coords.length) return [lo, lo + SLIDE_SPAN - 1];
        let from = Math.max(lo, Math.min(...coords) - 1), to = Math.min(hi, Math.max(...coords) + 1);
        if (to - from + 1 > SLIDE_SPAN) { const mid = coords[0]; from = Math.max(lo, mid - (SLIDE_SPAN >> 1)); to = from + SLIDE_SPAN - 1; }
        while (to - from + 1 < SLIDE_SPAN) { if (from > lo) from--; else if (to < hi) to++; else break; if (to - from + 1 < SLIDE_SPAN && to < hi) to++; }
        if (to > hi) { from -= to - hi; to = hi; }
        return [Math.max(lo, from), to];
      };
      const [r0, r1] = window(-pads[0], t.rows + pads[1] - 1, marks.map((h) => h.r));
      const [c0, c1] = window(-pads[2], t.cols + pads[3] - 1, marks.map((h) => h.c));
      return { panel, t, plane, r0, r1, c0, c1, rows: r1 - r0 + 1, cols: c1 - c0 + 1 };
    });
    const gap = 40, top = 124 + 20 * (subtitle.length - 1), idx = 26;
    const cellW = (W - 2 * margin - sumWidth - 24 - gap * (boxes.length - 1) - idx * boxes.length) / boxes.reduce((s, b) => s + b.cols, 0);
    const cellH = (H - top - 60) / Math.max(...boxes.map((b) => b.rows));
    const cell = Math.max(24, Math.min(56, Math.floor(Math.min(cellW, cellH))));
    let x0 = margin;
    for (const box of boxes) {
      const { panel, t, r0, r1, c0, c1 } = box;
      const [a, b] = box.plane;
      const [sym, words] = panelTitle(this.params.op, panel);
      const several = t.batch * t.channels > 1;
      const gx = x0 + idx;
      const heading = wrapText(`${sym} ${words.split(" (")[0]}`, Math.max(6, Math.floor((idx + box.cols * cell + gap - 8) / 10)));
      out.push(text(x0, top - 34, heading[0], 18, ` font-weight="600" fill="${colors.fg}"`));
      if (several)
        wrapText(this.planeLabel(panel, a, b), Math.max(8, Math.floor((idx + box.cols * cell + gap - 8) / 8.5))).slice(0, 2)
          .forEach((line, i) => out.push(text(x0, top + box.rows * cell + 22 + 18 * i, line, 15, ` fill="${colors.muted}"`)));
      const vmax = this.scale(t);
      const font = Math.max(13, Math.round(cell * 0.4));
      for (let c = c0; c <= c1; c++) // column numbers, and ... where the window cuts the panel
        out.push(text(gx + (c - c0) * cell + cell / 2, top - 8, c >= 0 && c < t.cols ? String(c) : "", 13,
          ` text-anchor="middle" fill="${colors.muted}"`));
      // where the window cuts the panel: \u2026 beyond the column numbers, \u22ee beyond the row numbers
      const padOf = (i) => (panel === padded ? Math.max(0, [g.rows.before, g.rows.after, g.cols.before, g.cols.after][i]) : 0);
      const ink = ` fill="${colors.muted}"`;
      if (c0 > -padOf(2)) out.push(text(gx - 4, top - 8, "\u2026", 15, ` text-anchor="end"${ink}`));
      if (c1 < t.cols - 1 + padOf(3)) out.push(text(gx + box.cols * cell + 4, top - 8, "\u2026", 15, ink));
      if (r0 > -padOf(0)) out.push(text(x0 + idx - 6, top - 8 - 14, "\u22ee", 15, ` text-anchor="end"${ink}`));
      if (r1 < t.rows - 1 + padOf(1)) out.push(text(x0 + idx - 6, top + box.rows * cell + 4, "\u22ee", 15, ` text-anchor="end"${ink}`));
      for (let r = r0; r <= r1; r++) {
        out.push(text(x0 + idx - 6, top + (r - r0) * cell + cell / 2 + 5, r >= 0 && r < t.rows ? String(r) : "", 13,
          ` text-anchor="end" fill="${colors.muted}"`));
        for (let c = c0; c <= c1; c++) {
          const x = gx + (c - c0) * cell, y = top + (r - r0) * cell;
          const real = r >= 0 && r < t.rows && c >= 0 && c < t.cols;
          const key = cellKey(panel, a, b, r, c);
          if (!real) {
            out.push(`<rect x="${x + 1}" y="${y + 1}" width="${cell - 2}" height="${cell - 2}" rx="3" fill="${colors.padBg}"` +
              ` stroke="${colors.padLine}" stroke-width="1.5" stroke-dasharray="4 3"/>`);
            if (panel === "x") out.push(text(x + cell / 2, y + cell / 2 + font * 0.35, "0", font, ` text-anchor="middle" fill="${colors.fg}"`));
          } else {
            const value = core.at(t, r, c, b, a);
            const bg = core.paletteColor(stops, core.paletteStep(value, vmax) / core.PALETTE_STEPS);
            const label = this.params.symbols === "on" ? core.shortSymbol(PANEL_SYMBOL[panel], r, c) : core.formatNumber(value);
            out.push(`<rect x="${x + 1}" y="${y + 1}" width="${cell - 2}" height="${cell - 2}" rx="3" fill="${core.rgbCss(bg)}"/>`);
            out.push(text(x + cell / 2, y + cell / 2 + font * 0.35, label, label.length > 3 ? Math.max(13, Math.round(font * 0.8)) : font,
              ` text-anchor="middle" font-weight="600" fill="${core.rgbCss(core.textColorOn(bg))}"`));
          }
          const mark = lit.get(key);
          const isFocus = focus && focus.panel === panel && (focus.a || 0) === a && (focus.b || 0) === b && focus.r === r && focus.c === c;
          if (mark || isFocus) {
            const color = isFocus ? colors.source : mark[0] === "cvz-target" ? colors.target : colors.in;
            out.push(`<rect x="${x + 2.5}" y="${y + 2.5}" width="${cell - 5}" height="${cell - 5}" rx="2" fill="none"` +
              ` stroke="${color}" stroke-width="${isFocus ? 4 : 3}" data-lit="${isFocus ? "focus" : mark[0].slice(4)}"/>`);
          }
        }
      }
      x0 += idx + box.cols * cell + gap;
    }
    // the worked sum (or the focused cell's words) in the right-hand column
    const sx = W - sumWidth - margin + 12;
    let y = top - 14;
    out.push(`<rect x="${sx - 12}" y="${y - 24}" width="${sumWidth}" height="${H - y + 8 - 24}" rx="8" fill="${colors.panel}"/>`);
    const lines = [];
    if (this.info) {
      lines.push([this.info.title, 18, "700"]);
      const sum = this.info.sum;
      if (sum) {
        const f = (x) => (x < 0 ? `(${core.formatNumber(x)})` : core.formatNumber(x));
        const name = (x) => this.cellName(x.panel, x.cell[0], x.cell[1], x.cell[2], x.cell[3]);
        if (this.params.symbols === "on") lines.push([core.formula(g), 15, "400"]);
        for (const t of sum.terms.slice(0, 12)) lines.push([`${name(t.a)}\u00b7${name(t.b)} = ${f(t.va)}\u00b7${f(t.vb)}`, 16, "400"]);
        if (sum.terms.length > 12) lines.push([`+ \u2026 (${sum.terms.length - 12} more)`, 16, "400"]);
        lines.push([`= ${core.formatNumber(sum.value)}`, 24, "700"]);
      } else if (this.info.products) {
        for (const line of this.productLines(this.info.products)) lines.push([line, 16, "400"]);
      } else if (this.info.note) lines.push([this.info.note, 16, "400"]);
    } else lines.push(["Point at a number to see the cells and the sum that make it.", 16, "400"]);
    for (const [str, size, weight] of lines)
      for (const part of wrapText(str, Math.floor((sumWidth - 24) / (size * 0.6)))) {
        y += size * 1.35;
        if (y > H - 12) break;
        out.push(text(sx, y, part, size, ` font-weight="${weight}" fill="${colors.fg}"` +
          (size <= 16 ? ` font-family="DejaVu Sans Mono, Menlo, Consolas, monospace"` : "")));
      }
    return this.wrapSvg(out, W, H, colors);
  }

  wrapSvg(parts, width, height, colors) {
    return `<svg xmlns="${svgNamespace()}" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}"` +
      ` font-family="DejaVu Sans, system-ui, sans-serif"><rect width="100%" height="100%" fill="${colors.bg}"/>` +
      `${parts.join("")}</svg>`;
  }

  // Save the slide: the SVG as it is, or a PNG at twice 1280x720, drawn in the page.
  saveSlide(kind) {
    const svg = this.slideSvg();
    const name = `convviz-${this.params.op}`;
    const download = (blob, file) => {
      const a = document.createElement("a");
      a.href = URL.createObjectURL(blob);
      a.download = file;
      this.root.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 10000);
    };
    const svgBlob = new Blob([svg], { type: "image/svg+xml" });
    this.root.dataset.slide = svg.length; // for tests: the size of the slide last made
    if (kind === "svg") { download(svgBlob, `${name}.svg`); return; }
    // a data: URL, not a blob: one, so that a page opened from file:// may read the canvas back
    const image = new Image();
    image.onload = () => {
      const canvas = document.createElement("canvas");
      canvas.width = 2560;
      canvas.height = 1440;
      const ctx = canvas.getContext("2d");
      ctx.scale(2, 2);
      ctx.drawImage(image, 0, 0, 1280, 720);
      try {
        canvas.toBlob((blob) => download(blob, `${name}.png`), "image/png");
      } catch (err) { // a browser that will not let a page read its canvas: the SVG instead
        this.root.dataset.slideError = String(err);
        download(svgBlob, `${name}.svg`);
      }
    };
    image.onerror = () => { this.root.dataset.slideError = "the browser could not draw the SVG"; download(svgBlob, `${name}.svg`); };
    image.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(svg);
  }

  // -- walking the computation ----------------------------------------------------
  walkCells() {
    const { output, tensors } = this.result;
    if (!output) return [];
    const t = tensors[output];
    const list = [];
    for (const [a, b] of this.planes(t))
      for (let r = 0; r < t.rows; r++) for (let c = 0; c < t.cols; c++) list.push({ panel: output, a, b, r, c, pad: false });
    return list;
  }

  step() {
    if (this.practiceOn()) return;
    const list = this.walkCells();
    if (!list.length) return;
    this.playIndex = (this.playIndex + 1) % list.length;
    list.forEach((cell, i) => {
      const el = this.cells.get(cellKey(cell.panel, cell.a, cell.b, cell.r, cell.c));
      if (el) el.classList.toggle("cvz-pending", i > this.playIndex);
    });
    this.root.classList.add("cvz-walking");
    this.pinned = list[this.playIndex];
    this.hovered = null;
    this.showActive();
    if (this.playIndex === list.length - 1 && this.timer) this.pause();
  }

  play() {
    if (this.practiceOn()) return; // walking would show every answer
    const list = this.walkCells();
    if (!list.length) return;
    if (this.playIndex >= list.length - 1) this.playIndex = -1;
    this.controls.play.textContent = "\u25a0 pause";
    this.controls.play.setAttribute("aria-pressed", "true");
    this.step();
    this.timer = setInterval(() => this.step(), 1000 / this.speed);
  }

  pause() {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    if (this.controls) {
      this.controls.play.textContent = "\u25b6 play";
      this.controls.play.setAttribute("aria-pressed", "false");
    }
  }

  stopWalk() {
    this.pause();
    this.playIndex = -1;
    if (this.root) {
      this.root.classList.remove("cvz-walking");
      for (const el of this.root.querySelectorAll(".cvz-pending")) el.classList.remove("cvz-pending");
    }
  }
}

function render({ model, el }) {
  const view = new ExplorerView(model, el);
  return () => view.destroy();
}

// -- the standalone page's model: a plain object, mirrored in the URL query ---------
export function pageModel(initial, search) {
  const state = { ...core.defaults(), ...(initial || {}), ...core.parseQuery(search) };
  const handlers = new Map();
  let urlPending = false;
  const writeUrl = () => {
    if (!urlPending) return;
    urlPending = false;
    try {
      history.replaceState(null, "", core.toQuery(state) + location.hash);
    } catch (err) {
      // some browsers refuse to rewrite file:// URLs; the page still works
    }
  };
  return {
    get: (name) => state[name],
    set(name, value) {
      if (state[name] === value) return;
      state[name] = value;
      for (const fn of handlers.get(`change:${name}`) || []) fn();
    },
    on(event, fn) {
      if (!handlers.has(event)) handlers.set(event, []);
      handlers.get(event).push(fn);
    },
    off(event, fn) {
      handlers.set(event, (handlers.get(event) || []).filter((f) => f !== fn));
    },
    // The URL follows the controls after the redraw is painted (a replaceState took ~3 ms
    // of a change's 35 on a 2-core machine); changes within a frame write it once.
    save_changes() {
      if (urlPending) return;
      urlPending = true;
      requestAnimationFrame(() => setTimeout(writeUrl, 0));
    },
    // Write a pending URL now (a test reading location.search at once).
    flushUrl: () => writeUrl(),
  };
}

export function mountPage(el, initial) {
  const model = pageModel(initial, location.search);
  const dispose = render({ model, el });
  return { model, dispose, core };
}

export { core, render };
export default { render };
