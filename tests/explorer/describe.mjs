// What core.js computes for a list of explorer settings, as plain JSON: geometry, inputs,
// output, the worked-sum value of every result cell summed from its terms as the view
// writes them, and where each cell of each tensor sits in the tensor convviz takes or
// returns (data-index).  Shared by dump.mjs (Node) and tests/test_explorer_page.py
// (Chromium, with the page's own core); tests/explorer_cases.check_case compares it with convviz.
export function describe(core, settings) {
  const plain = (t) => ({ rows: t.rows, cols: t.cols, channels: t.channels, batch: t.batch, data: Array.from(t.data) });
  const axis = (a) => (a.error ? { error: a.error }
    : { out: a.out, before: a.before, after: a.after, eff: a.eff, coverage: a.coverage, lost: a.lost });
  const results = settings.map((params) => {
    const { g, tensors, output } = core.compute(params);
    const query = core.toQuery(params);
    const reparsed = core.canonical(core.parseQuery(query));
    if (g.error) return { error: g.error, rows: axis(g.rows), cols: axis(g.cols), query, reparsed };
    const { roleOf } = core.opPanels(g.op);
    const tensorsOut = {}, indices = {};
    for (const [name, t] of Object.entries(tensors)) {
      tensorsOut[name] = plain(t);
      const idx = [];
      for (let a = 0; a < t.batch; a++)
        for (let b = 0; b < t.channels; b++)
          for (let r = 0; r < t.rows; r++)
            for (let c = 0; c < t.cols; c++) idx.push(core.tensorIndex(g, roleOf[name], [a, b, r, c]));
      indices[name] = idx;
    }
    const sums = [], terms = [];
    const t = tensors[output];
    for (let a = 0; a < t.batch; a++)
      for (let b = 0; b < t.channels; b++)
        for (let r = 0; r < t.rows; r++)
          for (let c = 0; c < t.cols; c++) {
            const s = core.workedSum(g, tensors, [a, b, r, c]);
            sums.push(s.value);
            terms.push(s.terms.length);
          }
    return { rows: axis(g.rows), cols: axis(g.cols), output, tensors: tensorsOut, indices, sums, terms,
             key: core.settingKey(params), query, reparsed };
  });
  return { params: core.PARAMS, records: core.OP_RECORDS, results };
}
