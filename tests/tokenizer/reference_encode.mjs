// The reference side of the normalizer tests: an independent implementation of Hugging Face
// tokenizer.json (the npm package @huggingface/tokenizers, fetched into .deps/tok-ref by
// tools/setup-test-data.sh) encodes texts for the C++ tests to compare against.
//
// Usage: node reference_encode.mjs <library .mjs> <request.json>
//   request: {"tokenizer": <tokenizer.json object> | "tokenizer_path": "<file>",
//             "config": <tokenizer_config.json object> (optional), "texts": ["...", ...]}
// Prints one JSON array, per text: {"ids": [...], "normalized": "<text after the normalizer>"}.
// Added tokens are always parsed (this implementation has no switch for it).
import { readFileSync } from "node:fs";

const [libPath, requestPath] = process.argv.slice(2);
const { Tokenizer } = await import(libPath);
const request = JSON.parse(readFileSync(requestPath, "utf8"));
const json = request.tokenizer ?? JSON.parse(readFileSync(request.tokenizer_path, "utf8"));
const tok = new Tokenizer(json, request.config ?? {});
const results = request.texts.map((text) => ({
  ids: tok.encode(text, { add_special_tokens: false }).ids,
  normalized: tok.normalizer ? tok.normalizer(text) : text,
}));
process.stdout.write(JSON.stringify(results));
