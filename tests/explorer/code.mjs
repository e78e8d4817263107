// Reads explorer settings (JSON array) on stdin and writes, for each, the code the page
// exports for it (core.codeFor) in every language, with the variable holding the result.
import * as core from "../../convviz/explorer/core.js";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const settings = JSON.parse(Buffer.concat(chunks).toString("utf8"));
process.stdout.write(JSON.stringify(settings.map((params) => {
  const { g, tensors } = core.compute(params);
  if (g.error) return null;
  return Object.fromEntries(core.CODE_LANGUAGES.map((lang) => [lang, core.codeFor(g, tensors, lang)]));
})));
