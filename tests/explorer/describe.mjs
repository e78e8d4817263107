// What core.js computes for a list of explorer settings, as plain JSON: geometry, inputs,
// output, and the worked-sum value of every output cell summed from its terms as the view
// writes them.  Shared by dump.mjs (Node) and tests/test_explorer_page.py (Chromium, with
// the page's own core); tests/explorer_cases.check_case compares it with convviz.
export function describe(core, settings) {
  const plain = (t) => (t ? { rows: t.rows, cols: t.cols, channels: t.channels, data: Array.from(t.data) } : null);
  const axis = (a) => ({ out: a.out, before: a.before, after: a.after, eff: a.eff, coverage: a.coverage, lost: a.lost });
  const results = settings.map((params) => {
    const { g, tensors, output } = core.compute(params);
    if (g.error) return { error: g.error, rows: axis(g.rows), cols: axis(g.cols) };
    const tensorsOut = {};
    for (const [name, t] of Object.entries(tensors)) tensorsOut[name] = plain(t);
    const sums = [];
    const t = tensors[output];
    for (let ch = 0; ch < t.channels; ch++)
      for (let r = 0; r < t.rows; r++)
        for (let c = 0; c < t.cols; c++) {
          let s = 0;
          if (output === "dx") for (const k of core.cellTerms(g, r, c)) s += core.at(tensors.dy, k.oh, k.ow) * core.at(tensors.w, k.kh, k.kw);
          else if (output === "dw") for (const k of core.filterTerms(g, r, c)) s += core.at(tensors.x, k.ih, k.iw) * core.at(tensors.dy, k.oh, k.ow, ch);
          else for (const k of core.windowTerms(g, r, c)) if (!k.pad) s += core.at(tensors.x, k.ih, k.iw) * core.at(tensors.w, k.kh, k.kw);
          sums.push(s);
        }
    return { rows: axis(g.rows), cols: axis(g.cols), output, tensors: tensorsOut, sums, key: core.settingKey(params),
             query: core.toQuery(params), reparsed: core.normalize(core.parseQuery(core.toQuery(params))) };
  });
  return { params: core.PARAMS, results };
}
