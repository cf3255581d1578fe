// Set-up helper: writes each distinct GGUF chat template of @huggingface/ollama-utils'
// mapping table (src/chat-template-automap.ts, a TypeScript array literal) to OUT_DIR/NNN-<model>.jinja.
// Usage: node extract_ollama_templates.js AUTOMAP.ts OUT_DIR
"use strict";
const fs = require("fs");
const path = require("path");
const vm = require("vm");

const [automap, outDir] = process.argv.slice(2);
let src = fs.readFileSync(automap, "utf8");
src = src.replace(/^import type .*$/m, "");
src = src.replace(/export const OLLAMA_CHAT_TEMPLATE_MAPPING\s*:\s*[A-Za-z]+\[\]\s*=/, "result =");
const box = { result: null };
vm.runInNewContext(src, box);
if (!Array.isArray(box.result)) throw new Error(`${automap}: no OLLAMA_CHAT_TEMPLATE_MAPPING array found`);
fs.mkdirSync(outDir, { recursive: true });
const seen = new Set();
let n = 0;
for (const entry of box.result) {
  if (typeof entry.gguf !== "string" || seen.has(entry.gguf)) continue;
  seen.add(entry.gguf);
  const name = entry.model.replace(/^library\//, "").replace(/[^A-Za-z0-9._-]+/g, "_");
  fs.writeFileSync(path.join(outDir, `${String(n).padStart(3, "0")}-${name}.jinja`), entry.gguf);
  ++n;
}
console.log(`extract_ollama_templates: ${n} distinct templates in ${outDir}`);
