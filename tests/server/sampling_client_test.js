// `wgrt serve`'s sampling fields driven by the real OpenAI client (npm openai@6.49.0): logprobs in
// both endpoints' shapes, streamed and not; logit_bias banning and forcing a token; penalties;
// n > 1 choices with seeds.
// Usage: NODE_PATH=.deps/server-openai/node_modules node sampling_client_test.js BASE_URL API_KEY
// Prints "ok <check>" per check; exits 1 at the first failure.
'use strict';
const assert = require('node:assert/strict');
const openai = require('openai');
const OpenAI = openai.OpenAI || openai.default || openai;

const [base, key] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 0, timeout: 120000 });
const messages = [{ role: 'user', content: 'Tell me a story.' }];
const prompt = 'Once upon a time';

async function tokenize(content) {
  const r = await fetch(base + '/tokenize', {
    method: 'POST', headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' },
    body: JSON.stringify({ content, add_special: false }),
  });
  assert.equal(r.status, 200);
  return (await r.json()).tokens;
}

// The text a list of chat logprobs entries spells (their bytes, joined).
const spelled = (content) => Buffer.from(content.flatMap((t) => t.bytes)).toString('utf8');

function checkChatLogprobs(lp, n) {
  assert.equal(lp.refusal, null);
  for (const t of lp.content) {
    assert.equal(typeof t.token, 'string');
    assert.ok(t.logprob <= 0 && t.logprob > -9999, JSON.stringify(t));
    assert.ok(Array.isArray(t.bytes));
    assert.equal(t.top_logprobs.length, n);
    for (let i = 1; i < n; i++) assert.ok(t.top_logprobs[i - 1].logprob >= t.top_logprobs[i].logprob);
    // Greedy: the chosen token is the most likely one.
    if (n > 0) {
      assert.deepEqual(t.top_logprobs[0].bytes, t.bytes);
      assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6);
    }
  }
}

// Log-probability entries of the same tokens: equal but for the values' last bits (a request whose
// prompt came from the prompt cache ran its prefill in other steps, and sums round differently).
function sameEntries(a, b) {
  assert.equal(a.length, b.length);
  for (let i = 0; i < a.length; i++) {
    assert.equal(a[i].token, b[i].token);
    assert.deepEqual(a[i].bytes, b[i].bytes);
    assert.ok(Math.abs(a[i].logprob - b[i].logprob) < 1e-3, a[i].token + ': ' + a[i].logprob + ' vs ' + b[i].logprob);
    if (a[i].top_logprobs) sameEntries(a[i].top_logprobs, b[i].top_logprobs);
  }
}

async function main() {
  const model = (await client.models.list()).data[0].id;

  // Chat logprobs, greedy: one entry per generated token, spelling the content.
  const chat = await client.chat.completions.create(
    { model, messages, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3 });
  const lp = chat.choices[0].logprobs;
  assert.equal(lp.content.length, chat.usage.completion_tokens);
  checkChatLogprobs(lp, 3);
  assert.equal(spelled(lp.content), chat.choices[0].message.content);
  const plain = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
  assert.equal(plain.choices[0].logprobs, null, 'no logprobs unless asked');
  assert.equal(plain.choices[0].message.content, chat.choices[0].message.content);
  // Streamed: the same entries, spread over the chunks.
  const stream = await client.chat.completions.create(
    { model, messages, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3, stream: true });
  const got = [];
  for await (const chunk of stream)
    for (const c of chunk.choices) if (c.logprobs) got.push(...c.logprobs.content);
  sameEntries(got, lp.content);
  console.log('ok chat logprobs, streamed and not:', lp.content.map((t) => t.logprob.toFixed(3)).join(' '));

  // Completions logprobs: the legacy shape, offsets into the text.
  const text = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0, logprobs: 2 });
  const tl = text.choices[0].logprobs;
  assert.equal(tl.tokens.length, text.usage.completion_tokens);
  assert.equal(tl.token_logprobs.length, tl.tokens.length);
  assert.equal(tl.top_logprobs.length, tl.tokens.length);
  assert.equal(tl.text_offset[0], 0);
  for (let i = 0; i < tl.tokens.length; i++) {
    assert.ok(tl.token_logprobs[i] <= 0);
    const alts = Object.values(tl.top_logprobs[i]);
    assert.ok(alts.length >= 1 && alts.length <= 2);
    assert.ok(Math.abs(Math.max(...alts) - tl.token_logprobs[i]) < 1e-6, 'greedy takes the best');
    if (i > 0) assert.ok(tl.text_offset[i] >= tl.text_offset[i - 1]);
  }
  const echoed = await client.completions.create(
    { model, prompt, max_tokens: 8, temperature: 0, logprobs: 0, echo: true });
  assert.equal(echoed.choices[0].logprobs.text_offset[0], Buffer.byteLength(prompt));
  console.log('ok completions logprobs', JSON.stringify(tl.tokens));

  // logit_bias: +100 forces a token (greedy: every token is it); +8 makes it common at
  // temperature 1; -100 bans it (it never comes, greedy or sampled with the same seeds).
  const [x] = await tokenize('e');
  const forced = await client.chat.completions.create(
    { model, messages, max_tokens: 4, temperature: 0, logprobs: true, logit_bias: { [x]: 100 } });
  const xb = forced.choices[0].logprobs.content[0].bytes;
  assert.equal(forced.choices[0].logprobs.content.length, 4);
  for (const t of forced.choices[0].logprobs.content) assert.deepEqual(t.bytes, xb, 'forced token');
  const count = (c) => c.choices[0].logprobs.content.filter((t) => JSON.stringify(t.bytes) === JSON.stringify(xb)).length;
  let boosted = 0;
  for (let seed = 0; seed < 3; seed++) {
    const sampled = { model, messages, max_tokens: 12, temperature: 1, seed, logprobs: true };
    boosted += count(await client.chat.completions.create({ ...sampled, logit_bias: { [x]: 8 } }));
    assert.equal(count(await client.chat.completions.create({ ...sampled, logit_bias: { [x]: -100 } })), 0,
      'a banned token came');
  }
  assert.ok(boosted > 0, 'the boosted token never came');
  const bannedGreedy = await client.chat.completions.create(
    { model, messages, max_tokens: 16, temperature: 0, logprobs: true, logit_bias: { [x]: -100 } });
  assert.equal(count(bannedGreedy), 0);
  try {
    await client.completions.create({ model, prompt, max_tokens: 2, logit_bias: { 99999999: 5 } });
    assert.fail('a token past the vocabulary was accepted');
  } catch (e) {
    assert.ok(e instanceof openai.BadRequestError, String(e));
    assert.equal(e.param, 'logit_bias');
  }
  console.log('ok logit_bias forces, boosts', boosted, 'times and bans token', x);

  // Penalties: the greedy reply above repeats a token in a row (the test model's habit); presence
  // and frequency penalties of 2 (-4 for a token just seen) over the last token break every such
  // run, and over the whole context leave fewer repeats.
  const key = (t) => JSON.stringify(t.bytes);
  const inRow = (c) => c.slice(1).filter((t, i) => key(t) === key(c[i])).length;
  const repeats = (c) => c.length - new Set(c.map(key)).size;
  assert.ok(inRow(lp.content) > 0, 'the greedy reply repeats no token in a row: ' + lp.content.map(key).join(' '));
  const penalized = (extra) => client.chat.completions.create(
    { model, messages, max_tokens: 8, temperature: 0, logprobs: true, ...extra }).then((r) => r.choices[0].logprobs.content);
  const last = await penalized({ presence_penalty: 2, frequency_penalty: 2, repeat_last_n: 1 });
  assert.equal(inRow(last), 0, last.map(key).join(' '));
  const wide = await penalized({ presence_penalty: 2, frequency_penalty: 2, repeat_penalty: 2, repeat_last_n: -1 });
  assert.ok(repeats(wide) < repeats(lp.content), wide.map(key).join(' '));
  for (const extra of [{ presence_penalty: 2 }, { frequency_penalty: 2 }])
    assert.notDeepEqual((await penalized(extra)).map(key), lp.content.map(key), JSON.stringify(extra));
  console.log('ok penalties:', repeats(lp.content), 'repeats plain,', repeats(wide), 'penalized');

  // n = 2: two choices by index; with a seed, choice i samples as a request of seed + i would.
  const two = { model, prompt, max_tokens: 12, temperature: 1, seed: 11, n: 2 };
  const a = await client.completions.create(two);
  assert.equal(a.choices.length, 2);
  assert.deepEqual(a.choices.map((c) => c.index), [0, 1]);
  assert.notEqual(a.choices[0].text, a.choices[1].text);
  const b = await client.completions.create(two);
  assert.deepEqual(b.choices.map((c) => c.text), a.choices.map((c) => c.text), 'same seed, same choices');
  for (let i = 0; i < 2; i++) {
    const one = await client.completions.create({ ...two, n: 1, seed: 11 + i });
    assert.equal(one.choices[0].text, a.choices[i].text, 'choice ' + i + ' = seed + ' + i);
  }
  const chatTwo = await client.chat.completions.create(
    { model, messages, max_tokens: 12, temperature: 1, seed: 3, n: 2, stream: true, stream_options: { include_usage: true } });
  const texts = ['', ''];
  let usage = null, finishes = 0;
  for await (const chunk of chatTwo) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      texts[c.index] += c.delta.content || '';
      if (c.finish_reason) finishes++;
    }
  }
  assert.equal(finishes, 2);
  const whole = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 1, seed: 3, n: 2 });
  assert.deepEqual(texts, whole.choices.map((c) => c.message.content));
  for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens']) assert.equal(usage[k], whole.usage[k], k);
  assert.ok(usage.completion_tokens <= 24 && usage.completion_tokens >= 2);
  console.log('ok n = 2, streamed and not:', JSON.stringify(texts));
}

main().then(() => console.log('all ok'), (e) => {
  console.error('FAILED:', e && e.stack ? e.stack : e);
  process.exit(1);
});
