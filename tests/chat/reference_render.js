// The reference rendering of chat templates, for tests/chat/templates_test.cpp: renders every
// template of JOB.json with every case's variables through @huggingface/jinja and writes the
// results (or the reference's error) to OUT.json.
// Usage: node reference_render.js JINJA_PREFIX JOB.json OUT.json
//   JOB.json: {"now_ms": N, "templates": [{"name", "text", "contexts": [{variables}, ...]}]}
//   OUT.json: [[{"ok": true, "text": "..."} | {"ok": false, "error": "..."}, ...per context], ...per template]
"use strict";
const fs = require("fs");

const [prefix, jobPath, outPath] = process.argv.slice(2);
const { Template } = require(require.resolve("@huggingface/jinja", { paths: [`${prefix}/node_modules`] }));
const job = JSON.parse(fs.readFileSync(jobPath, "utf8"));

// strftime_now reads the clock: pin it to the time wgrt renders with.
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(job.now_ms);
    else super(...args);
  }
  static now() {
    return job.now_ms;
  }
};

const out = job.templates.map((t) => {
  let tmpl;
  try {
    tmpl = new Template(t.text);
  } catch (e) {
    return t.contexts.map(() => ({ ok: false, error: `parse: ${e.message}` }));
  }
  return t.contexts.map((context) => {
    try {
      return { ok: true, text: tmpl.render(context) };
    } catch (e) {
      return { ok: false, error: String(e && e.message ? e.message : e) };
    }
  });
});
fs.writeFileSync(outPath, JSON.stringify(out));
