// POST /v1/embeddings driven by the real OpenAI client (npm openai@6.49.0), as users call it:
// client.embeddings.create with a string, a list of strings, token ids and lists of them; the
// client's default base64 transport against encoding_format float; dimensions on a
// Matryoshka-trained model; errors naming the field; an embedding while a chat streams.
// Usage: NODE_PATH=.deps/server-openai/node_modules node embeddings_client_test.js BASE_URL API_KEY MODEL N_EMBD
// Prints "ok <check>" per check and the vector of 'hello world' as "vector <json>"; exits 1 at the
// first failure.
'use strict';
const assert = require('node:assert/strict');
const openai = require('openai');
const OpenAI = openai.OpenAI || openai.default || openai;

const [base, key, model, n_embd_arg] = process.argv.slice(2);
const n_embd = Number(n_embd_arg);
const client = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 0, timeout: 120000 });

function norm(v) {
  return Math.sqrt(v.reduce((s, x) => s + x * x, 0));
}
function close(a, b, tol, what) {
  assert.equal(a.length, b.length, what);
  for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i] - b[i]) <= tol, `${what}: [${i}] ${a[i]} vs ${b[i]}`);
}
async function refused(body, param, code) {
  try {
    await client.embeddings.create({ model, ...body });
    assert.fail(JSON.stringify(body) + ' was accepted');
  } catch (e) {
    assert.ok(e instanceof openai.BadRequestError, String(e));
    assert.equal(e.param, param, String(e));
    if (code) assert.equal(e.code, code, String(e));
  }
}

async function main() {
  // One string, as floats: OpenAI's shape, unit length, usage.
  const one = await client.embeddings.create({ model, input: 'hello world', encoding_format: 'float' });
  assert.equal(one.object, 'list');
  assert.equal(one.model, model);
  assert.equal(one.data.length, 1);
  assert.equal(one.data[0].object, 'embedding');
  assert.equal(one.data[0].index, 0);
  const v = one.data[0].embedding;
  assert.equal(v.length, n_embd);
  assert.ok(Math.abs(norm(v) - 1) < 1e-5, 'unit length: ' + norm(v));
  assert.ok(one.usage.prompt_tokens > 0 && one.usage.total_tokens === one.usage.prompt_tokens, JSON.stringify(one.usage));
  console.log('ok one string');

  // The client's default: base64 on the wire, decoded by the client to the same floats.
  const b64 = await client.embeddings.create({ model, input: 'hello world' });
  assert.deepEqual(b64.data[0].embedding, v);
  console.log('ok base64');

  // A list: one vector per input, in order; the same text gives the same vector.
  const list = await client.embeddings.create({ model, input: ['a', 'the sea', 'hello world'], encoding_format: 'float' });
  assert.deepEqual(list.data.map((d) => d.index), [0, 1, 2]);
  close(list.data[2].embedding, v, 1e-6, 'hello world in a list');
  assert.ok(Math.abs(list.data[0].embedding[0] - list.data[1].embedding[0]) > 0 ||
            Math.abs(list.data[0].embedding[1] - list.data[1].embedding[1]) > 0, 'different texts, different vectors');
  console.log('ok list of strings');

  // Token ids: the text's own tokens (from /tokenize) give its vector, flat or nested.
  const tok = await fetch(base + '/tokenize', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + key },
    body: JSON.stringify({ content: 'hello world', add_special: true }),
  }).then((r) => r.json());
  const ids = tok.tokens;
  assert.equal(one.usage.prompt_tokens, ids.length, 'usage counts the tokens embedded');
  const flat = await client.embeddings.create({ model, input: ids, encoding_format: 'float' });
  close(flat.data[0].embedding, v, 1e-6, 'token ids');
  const nested = await client.embeddings.create({ model, input: [ids, ids.slice(0, 2)], encoding_format: 'float' });
  assert.equal(nested.data.length, 2);
  close(nested.data[0].embedding, v, 1e-6, 'lists of token ids');
  assert.equal(nested.usage.prompt_tokens, ids.length + 2);
  console.log('ok token ids');

  // dimensions (the model declares Matryoshka training): the first values, renormalized.
  const small = await client.embeddings.create({ model, input: 'hello world', dimensions: 16, encoding_format: 'float' });
  const head = v.slice(0, 16);
  close(small.data[0].embedding, head.map((x) => x / norm(head)), 1e-6, 'dimensions 16');
  const full = await client.embeddings.create({ model, input: 'hello world', dimensions: n_embd });
  assert.equal(full.data[0].embedding.length, n_embd);
  console.log('ok dimensions');

  // Errors name the field.
  await refused({ input: '' }, 'input', 'invalid_value');
  await refused({ input: [] }, 'input', 'invalid_value');
  await refused({ input: ['a', 3] }, 'input', 'invalid_type');
  await refused({ input: [999999] }, 'input', 'invalid_value');
  await refused({ input: 'x'.repeat(1) + ' word'.repeat(1200) }, 'input', 'context_length_exceeded');
  await refused({ input: 'a', dimensions: n_embd + 1 }, 'dimensions', 'invalid_value');
  await refused({ input: 'a', encoding_format: 'int8' }, 'encoding_format', 'invalid_value');
  await refused({ input: 'a', truncate: true }, 'truncate', 'unknown_parameter');
  console.log('ok errors');

  // An embedding while a chat completion streams on another slot.
  const stream = await client.completions.create({ model, prompt: 'Once', max_tokens: 24, temperature: 0, stream: true });
  const [text, during] = await Promise.all([
    (async () => {
      let t = '';
      for await (const c of stream) t += c.choices.length ? c.choices[0].text : '';
      return t;
    })(),
    client.embeddings.create({ model, input: 'hello world', encoding_format: 'float' }),
  ]);
  assert.ok(text.length > 0);
  close(during.data[0].embedding, v, 1e-6, 'during a generation');
  console.log('ok beside a generation');
  console.log('vector ' + JSON.stringify(v));
}

main().then(() => console.log('all ok'), (e) => {
  console.error('FAILED:', e && e.stack ? e.stack : e);
  process.exit(1);
});
