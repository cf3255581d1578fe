// `wgrt serve` driven by the real OpenAI client (npm openai@6.49.0, .deps/server-openai), as
// users would: chat and completions, streaming and not, usage, stop strings, an abort mid-stream
// (the slot is freed and the next request works), 401 with a wrong key, the model's alias and
// models.retrieve, fields refused by name (embeddings: embeddings_client_test.js), the prompt
// cache's usage and metrics, and the chat context shift's usage.
// Usage: NODE_PATH=.deps/server-openai/node_modules node client_test.js BASE_URL API_KEY ALIAS
// Prints "ok <check>" per check; exits 1 at the first failure.
'use strict';
const assert = require('node:assert/strict');
const openai = require('openai');
const OpenAI = openai.OpenAI || openai.default || openai;

const [base, key, alias] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 0, timeout: 120000 });
const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }];

async function streamed(stream) {
  const out = { text: '', finish: null, usage: null, chunks: 0, role: null };
  for await (const chunk of stream) {
    out.chunks++;
    assert.ok(chunk.id && chunk.created > 0 && typeof chunk.model === 'string');
    if (chunk.usage) {
      assert.deepEqual(chunk.choices, [], 'the usage chunk has no choices');
      out.usage = chunk.usage;
      continue;
    }
    assert.equal(chunk.choices.length, 1);
    const c = chunk.choices[0];
    assert.equal(out.finish, null, 'nothing after the finish_reason but the usage');
    if (chunk.object === 'chat.completion.chunk') {
      if (c.delta.role) out.role = c.delta.role;
      out.text += c.delta.content || '';
    } else {
      assert.equal(chunk.object, 'text_completion');
      out.text += c.text;
    }
    out.finish = c.finish_reason;
  }
  return out;
}

async function metrics() {
  const r = await fetch(base + '/metrics', { headers: { Authorization: 'Bearer ' + key } });
  assert.equal(r.status, 200);
  const m = {};
  for (const line of (await r.text()).split('\n')) {
    const [name, value] = line.split(' ');
    if (name && !name.startsWith('#')) m[name] = Number(value);
  }
  return m;
}

// The same counts (the prompt cache may serve a repeated request: its cached_tokens differ).
function sameCounts(a, b) {
  for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens']) assert.equal(a[k], b[k], k);
}

function checkUsage(u, maxTokens) {
  assert.ok(u.prompt_tokens > 0);
  assert.ok(u.completion_tokens >= 1 && u.completion_tokens <= maxTokens, JSON.stringify(u));
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
}

async function main() {
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  const model = models.data[0].id;
  assert.equal(model, alias, 'the model is listed under its --alias');
  assert.equal((await client.models.retrieve(alias)).id, alias);
  try {
    await client.models.retrieve('no-such-model');
    assert.fail('an unknown model id was found');
  } catch (e) {
    assert.ok(e instanceof openai.NotFoundError, String(e));
    assert.equal(e.code, 'model_not_found');
  }
  console.log('ok models', model);

  // Chat, not streamed, greedy: the reference for the streamed run of the same request.
  const chat = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
  assert.equal(chat.object, 'chat.completion');
  assert.equal(chat.choices.length, 1);
  assert.equal(chat.choices[0].message.role, 'assistant');
  assert.equal(typeof chat.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(chat.choices[0].finish_reason));
  checkUsage(chat.usage, 12);
  if (chat.choices[0].finish_reason === 'length') assert.equal(chat.usage.completion_tokens, 12);
  console.log('ok chat', JSON.stringify(chat.choices[0].message.content));

  const chatStream = await streamed(await client.chat.completions.create(
    { model, messages, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true } }));
  assert.equal(chatStream.role, 'assistant');
  assert.equal(chatStream.text, chat.choices[0].message.content, 'streamed text = the whole reply');
  assert.equal(chatStream.finish, chat.choices[0].finish_reason);
  sameCounts(chatStream.usage, chat.usage);
  console.log('ok chat stream', chatStream.chunks, 'chunks');

  // Without include_usage no usage chunk comes.
  const noUsage = await streamed(await client.chat.completions.create(
    { model, messages, max_tokens: 3, temperature: 0, stream: true }));
  assert.equal(noUsage.usage, null);
  console.log('ok chat stream without usage');

  const prompt = 'Once upon a time';
  const text = await client.completions.create({ model, prompt, max_tokens: 16, temperature: 0 });
  assert.equal(text.object, 'text_completion');
  assert.equal(typeof text.choices[0].text, 'string');
  checkUsage(text.usage, 16);
  const full = text.choices[0].text;
  const textStream = await streamed(await client.completions.create(
    { model, prompt, max_tokens: 16, temperature: 0, stream: true, stream_options: { include_usage: true } }));
  assert.equal(textStream.text, full);
  sameCounts(textStream.usage, text.usage);
  const echoed = await client.completions.create({ model, prompt, max_tokens: 16, temperature: 0, echo: true });
  assert.equal(echoed.choices[0].text, prompt + full);
  const echoStream = await streamed(await client.completions.create(
    { model, prompt, max_tokens: 16, temperature: 0, echo: true, stream: true }));
  assert.equal(echoStream.text, prompt + full);
  console.log('ok completions, streamed and not, with echo', JSON.stringify(full));

  // Stop strings: a piece of an unstopped reply cuts it right before the piece's first
  // occurrence, streamed or not (the piece spans several byte-level tokens, so several chunks).
  // Seeded sampling gives the same tokens up to the cut, and text varied enough to pick from.
  const sampled = { model, prompt, max_tokens: 24, temperature: 1, seed: 7 };
  const ref = (await client.completions.create(sampled)).choices[0].text;
  const chars = Array.from(ref);
  let stop = null;
  for (let i = 3; i + 2 <= chars.length && !stop; i++) {
    const piece = chars.slice(i, i + 2).join('');
    if (!piece.includes('\uFFFD') && ref.indexOf(piece) >= 3) stop = piece;
  }
  assert.ok(stop, 'no piece to cut at in ' + JSON.stringify(ref));
  const want = ref.slice(0, ref.indexOf(stop));
  const cut = await client.completions.create({ ...sampled, stop: [stop, 'never'] });
  assert.equal(cut.choices[0].text, want);
  assert.equal(cut.choices[0].finish_reason, 'stop');
  const cutStream = await streamed(await client.completions.create({ ...sampled, stop, stream: true }));
  assert.equal(cutStream.text, want);
  assert.equal(cutStream.finish, 'stop');
  console.log('ok stop strings', JSON.stringify(stop), 'in', JSON.stringify(ref));

  // Sampling with a seed is repeatable.
  const seeded = { model, prompt, max_tokens: 8, temperature: 1, top_p: 0.9, seed: 42 };
  const s1 = await client.completions.create(seeded), s2 = await client.completions.create(seeded);
  assert.equal(s1.choices[0].text, s2.choices[0].text);
  console.log('ok seeded sampling');

  // Abort mid-stream: the server stops that generation (far short of its budget) and frees the slot.
  const before = await metrics();
  const controller = new AbortController();
  const long = await client.chat.completions.create(
    { model, messages, max_tokens: 400, temperature: 0, stream: true }, { signal: controller.signal });
  let seen = 0;
  try {
    for await (const chunk of long) {
      if (chunk.choices[0] && chunk.choices[0].delta.content) seen++;
      if (seen >= 2) controller.abort();
    }
    assert.fail('the stream should have been aborted');
  } catch (e) {
    assert.ok(e.name === 'AbortError' || e instanceof openai.APIUserAbortError || /abort/i.test(String(e)), String(e));
  }
  let after;
  for (let i = 0; i < 200; i++) {
    after = await metrics();
    if (after['wgrt_requests_running'] === 0 &&
        after['wgrt_requests_total{result="cancelled"}'] > before['wgrt_requests_total{result="cancelled"}']) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(after['wgrt_requests_running'], 0, 'the slot is free');
  assert.equal(after['wgrt_requests_total{result="cancelled"}'], before['wgrt_requests_total{result="cancelled"}'] + 1);
  const spent = after['wgrt_generated_tokens_total'] - before['wgrt_generated_tokens_total'];
  assert.ok(spent < 400, `the aborted request stopped early (${spent} tokens generated)`);
  const again = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
  assert.equal(again.choices[0].message.content, chat.choices[0].message.content);
  console.log('ok abort mid-stream after', spent, 'tokens; the next request works');

  // The prompt cache: a long prompt sent thrice is prefilled once (the metrics count what is
  // evaluated), usage says how much came from the cache, and greedy text is the same each time,
  // with cache_prompt false too.
  const story = 'The lighthouse keeper climbed the stairs each night, counting the steps out loud, and the gulls ' +
    'circled the lamp while ships far out at sea blinked back their answers in the dark.';
  const runs = [];
  for (const cache_prompt of [true, true, true, false]) {
    const m0 = await metrics();
    const r = await client.completions.create({ model, prompt: story, max_tokens: 8, temperature: 0, cache_prompt });
    const m1 = await metrics();
    runs.push({ r, evaluated: m1['wgrt_prompt_tokens_total'] - m0['wgrt_prompt_tokens_total'] });
  }
  const n = runs[0].r.usage.prompt_tokens;
  assert.equal(n, 180, 'BOS and one token per byte');
  assert.ok(runs[0].r.usage.prompt_tokens_details.cached_tokens <= 1, 'at most BOS was cached before');
  assert.equal(runs[0].evaluated, n - runs[0].r.usage.prompt_tokens_details.cached_tokens);
  for (const k of [1, 2]) {
    assert.equal(runs[k].r.usage.prompt_tokens_details.cached_tokens, n - 1, 'all but the last prompt token');
    assert.equal(runs[k].evaluated, 1);
  }
  assert.equal(runs[3].r.usage.prompt_tokens_details.cached_tokens, 0, 'cache_prompt false');
  assert.equal(runs[3].evaluated, n);
  for (const k of [1, 2, 3]) assert.equal(runs[k].r.choices[0].text, runs[0].r.choices[0].text);
  console.log('ok prompt cache:', runs.map((x) => x.evaluated).join(', '), 'prompt tokens evaluated');

  // Context shift: a conversation past the context (1,024) loses its oldest turns, whole, and
  // the usage says so; the reply is the kept conversation's.
  const history = [{ role: 'system', content: 'Be brief.' }];
  for (let t = 0; t < 6; t++) {
    history.push({ role: 'user', content: `Question ${t}: ` + 'q'.repeat(180) });
    history.push({ role: 'assistant', content: `Answer ${t}: ` + 'r'.repeat(180) });
  }
  history.push({ role: 'user', content: 'And now?' });
  const shifted = await client.chat.completions.create({ model, messages: history, max_tokens: 8, temperature: 0 });
  const cs = shifted.usage.context_shift;
  assert.ok(cs, 'usage.context_shift: ' + JSON.stringify(shifted.usage));
  assert.ok(cs.dropped_messages > 0 && cs.dropped_messages % 2 === 0, JSON.stringify(cs));
  assert.ok(cs.dropped_tokens > 0);
  assert.ok(shifted.usage.prompt_tokens + 8 <= 1024);
  const kept = [history[0], ...history.slice(1 + cs.dropped_messages)];
  const direct = await client.chat.completions.create({ model, messages: kept, max_tokens: 8, temperature: 0 });
  assert.equal(direct.usage.context_shift, undefined);
  assert.equal(direct.usage.prompt_tokens, shifted.usage.prompt_tokens);
  assert.equal(direct.choices[0].message.content, shifted.choices[0].message.content);
  console.log('ok context shift:', JSON.stringify(cs));

  // A wrong key: 401, OpenAI's error object, and the server keeps serving.
  const wrong = new OpenAI({ baseURL: base + '/v1', apiKey: 'not-' + key, maxRetries: 0 });
  try {
    await wrong.chat.completions.create({ model, messages, max_tokens: 2 });
    assert.fail('a wrong key was accepted');
  } catch (e) {
    assert.ok(e instanceof openai.AuthenticationError, String(e));
    assert.equal(e.status, 401);
    assert.equal(e.code, 'invalid_api_key');
    assert.equal(e.type, 'invalid_request_error');
  }
  const r = await fetch(base + '/v1/models');
  assert.equal(r.status, 401, 'no key at all');
  assert.equal((await r.json()).error.code, 'invalid_api_key');
  console.log('ok 401');

  // Any model name is served (one model), and the response names the served one.
  const other = await client.chat.completions.create({ model: 'gpt-4o', messages, max_tokens: 12, temperature: 0 });
  assert.equal(other.model, alias);
  assert.equal(other.choices[0].message.content, chat.choices[0].message.content);
  // Errors the client maps to its own types: a field wgrt does not do is refused by name.
  const refused = [
    [{ prediction: { type: 'content', content: 'x' } }, 'prediction'],
    [{ store: true }, 'store'],
    [{ reasoning_effort: 'low' }, 'reasoning_effort'],
  ];
  for (const [extra, param] of refused) {
    try {
      await client.chat.completions.create({ model, messages, max_tokens: 2, ...extra });
      assert.fail(param + ' was accepted');
    } catch (e) {
      assert.ok(e instanceof openai.BadRequestError, String(e));
      assert.equal(e.param, param);
      assert.equal(e.code, 'unsupported_parameter');
    }
  }
  const last = await client.completions.create({ model, prompt, max_tokens: 16, temperature: 0 });
  assert.equal(last.choices[0].text, full);
  console.log('ok errors; still serving');
}

main().then(() => console.log('all ok'), (e) => {
  console.error('FAILED:', e && e.stack ? e.stack : e);
  process.exit(1);
});
