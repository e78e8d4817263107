// Reads explorer settings (JSON array) on stdin and writes what core.js computes for each
// (describe.mjs) as JSON.  Used by tests/test_explorer_core.py to hold core.js equal to convviz.
import * as core from "../../convviz/explorer/core.js";
import { describe } from "./describe.mjs";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
process.stdout.write(JSON.stringify(describe(core, JSON.parse(Buffer.concat(chunks).toString("utf8")))));
