// `wgrt serve`'s structured output driven by the real OpenAI client (npm openai@6.49.0) on a
// random-weight model: whatever the weights, a reply held to a JSON schema parses and satisfies
// it (checked here by a validator of the subset, written apart from the server's converter),
// streamed or not; a GBNF grammar holds completions; bad grammars and schemas are 400s;
// tool_choice "required" and a named function come back as tool_calls whose arguments satisfy
// the tool's parameters (argv[4]: the base URL of a server whose template has tools).
// Usage: NODE_PATH=.deps/server-openai/node_modules node structured_client_test.js BASE_URL API_KEY TOOLS_URL
// Prints "ok <check>" per check; exits 1 at the first failure.
'use strict';
const assert = require('node:assert/strict');
const openai = require('openai');
const OpenAI = openai.OpenAI || openai.default || openai;

const [base, key, toolsBase] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 0, timeout: 120000 });
const messages = [{ role: 'user', content: 'Describe a person as JSON.' }];

function valid(v, s) {
  if ('const' in s) return JSON.stringify(v) === JSON.stringify(s.const);
  if (s.enum) return s.enum.some((e) => JSON.stringify(e) === JSON.stringify(v));
  if (s.anyOf) return s.anyOf.some((x) => valid(v, x));
  const t = s.type;
  if (t === undefined) return true;
  if (Array.isArray(t)) return t.some((x) => valid(v, { ...s, type: x }));
  if (t === 'null') return v === null;
  if (t === 'boolean') return typeof v === 'boolean';
  if (t === 'integer') return Number.isInteger(v);
  if (t === 'number') return typeof v === 'number';
  if (t === 'string') {
    const n = [...(typeof v === 'string' ? v : '')].length;
    return typeof v === 'string' && n >= (s.minLength ?? 0) && n <= (s.maxLength ?? Infinity);
  }
  if (t === 'array') {
    return Array.isArray(v) && v.length >= (s.minItems ?? 0) && v.length <= (s.maxItems ?? Infinity) &&
           v.every((x) => !s.items || valid(x, s.items));
  }
  if (t !== 'object' || typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const props = s.properties ?? {};
  for (const r of s.required ?? []) if (!(r in v)) return false;
  for (const [k, x] of Object.entries(v)) {
    if (k in props) { if (!valid(x, props[k])) return false; }
    else if (typeof s.additionalProperties === 'object') { if (!valid(x, s.additionalProperties)) return false; }
    else if (!(s.additionalProperties ?? Object.keys(props).length === 0)) return false;
  }
  return true;
}

// Bounded (short strings, few items, enums) so a random model finishes within max_tokens.
const schema = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 8 },
    age: { type: 'integer' },
    role: { enum: ['admin', 'user', null] },
    tags: { type: 'array', items: { type: 'string', maxLength: 4 }, maxItems: 3 },
    ok: { type: 'boolean' },
  },
  required: ['name', 'age', 'role'],
  additionalProperties: false,
};

function checkJson(text, what) {
  let v;
  try { v = JSON.parse(text); } catch (e) { assert.fail(what + ': not JSON: ' + JSON.stringify(text)); }
  assert.ok(valid(v, schema), what + ': does not satisfy the schema: ' + text);
}

async function expect400(p, needle, what) {
  try {
    await p;
  } catch (e) {
    assert.equal(e.status, 400, what + ': ' + e.message);
    assert.ok(e.message.includes(needle), what + ': ' + e.message);
    return;
  }
  assert.fail(what + ': no error');
}

async function main() {
  const model = (await client.models.list()).data[0].id;
  const rf = { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } };
  for (let seed = 1; seed <= 4; seed++) {
    const r = await client.chat.completions.create({ model, messages, response_format: rf, seed, max_tokens: 600 });
    assert.equal(r.choices[0].finish_reason, 'stop', JSON.stringify(r.choices[0]));
    checkJson(r.choices[0].message.content, 'chat seed ' + seed);
  }
  console.log('ok chat json_schema');

  let text = '';
  const stream = await client.chat.completions.create({ model, messages, response_format: rf, seed: 9, max_tokens: 600,
                                                         stream: true });
  for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
  checkJson(text, 'streamed chat');
  console.log('ok chat json_schema streamed');

  const c = await client.completions.create({ model, prompt: 'A person: ', seed: 3, max_tokens: 600,
                                              response_format: rf });
  checkJson(c.choices[0].text, 'completions');
  console.log('ok completions json_schema');

  // json_object: the reply is an object. A random model may nest deeply, so only a reply that
  // finished (stop) is required to parse.
  const o = await client.chat.completions.create({ model, messages, response_format: { type: 'json_object' }, seed: 5,
                                                   max_tokens: 600, temperature: 0.2 });
  if (o.choices[0].finish_reason === 'stop') {
    const v = JSON.parse(o.choices[0].message.content);
    assert.ok(typeof v === 'object' && v !== null && !Array.isArray(v), o.choices[0].message.content);
  } else {
    assert.ok(o.choices[0].message.content.startsWith('{'), o.choices[0].message.content);
  }
  console.log('ok json_object');

  const grammar = 'root ::= ("yes" | "no") ", " [0-9]{1,3} " " [a-z]{2,5} "."';
  for (let seed = 1; seed <= 3; seed++) {
    const g = await client.completions.create({ model, prompt: 'Answer: ', seed, max_tokens: 50, grammar });
    assert.match(g.choices[0].text, /^(yes|no), [0-9]{1,3} [a-z]{2,5}\.$/);
    assert.equal(g.choices[0].finish_reason, 'stop');
  }
  console.log('ok grammar');

  await expect400(client.completions.create({ model, prompt: 'x', grammar: 'root ::= "a" | ' + '\n' + 'b ::= c' }),
                  'line 2', 'undefined rule');
  await expect400(client.chat.completions.create({ model, messages, response_format:
                    { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: 'a+' } } } }),
                  'pattern', 'unsupported keyword');
  await expect400(client.chat.completions.create({ model, messages, grammar: 'root ::= "a"',
                    response_format: { type: 'json_object' } }), 'one of', 'two constraints');
  console.log('ok bad constraints are 400');

  // Tools: the arguments of a forced call satisfy the tool's parameters.
  const tc = new OpenAI({ baseURL: toolsBase + '/v1', apiKey: key, maxRetries: 0, timeout: 120000 });
  const params = { type: 'object', properties: { city: { enum: ['Paris', 'Oslo'] }, days: { type: 'integer' } },
                   required: ['city', 'days'], additionalProperties: false };
  const tools = [
    { type: 'function', function: { name: 'weather', parameters: params } },
    { type: 'function', function: { name: 'time', parameters: { type: 'object', properties: {
      zone: { type: 'string', maxLength: 5 } }, required: ['zone'] } } },
  ];
  const toolsModel = (await tc.models.list()).data[0].id;
  for (const [choice, want] of [['required', null], [{ type: 'function', function: { name: 'weather' } }, 'weather']]) {
    for (let seed = 1; seed <= 3; seed++) {
      const r = await tc.chat.completions.create({ model: toolsModel, messages: [{ role: 'user', content: 'Weather?' }],
                                                   tools, tool_choice: choice, seed, max_tokens: 300 });
      const calls = r.choices[0].message.tool_calls;
      assert.ok(calls && calls.length >= 1, JSON.stringify(r.choices[0]));
      for (const call of calls) {
        if (want) assert.equal(call.function.name, want);
        const t = tools.find((x) => x.function.name === call.function.name);
        assert.ok(t, call.function.name);
        assert.ok(valid(JSON.parse(call.function.arguments), t.function.parameters), call.function.arguments);
      }
      assert.equal(r.choices[0].finish_reason, 'tool_calls');
    }
  }
  console.log('ok tool_choice required and named');

  // Streamed: the call comes as OpenAI's tool_calls deltas, its arguments joined per index.
  const st = await tc.chat.completions.create({ model: toolsModel, messages: [{ role: 'user', content: 'Weather?' }],
                                               tools, tool_choice: 'required', seed: 4, max_tokens: 300, stream: true });
  const acc = [];
  let finish = null;
  for await (const chunk of st) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    for (const d of ch.delta?.tool_calls ?? []) {
      acc[d.index] ??= { name: '', arguments: '' };
      if (d.function?.name) acc[d.index].name += d.function.name;
      if (d.function?.arguments) acc[d.index].arguments += d.function.arguments;
    }
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  assert.ok(acc.length >= 1, 'no streamed tool call');
  for (const call of acc) {
    const t = tools.find((x) => x.function.name === call.name);
    assert.ok(t, call.name);
    assert.ok(valid(JSON.parse(call.arguments), t.function.parameters), call.arguments);
  }
  assert.equal(finish, 'tool_calls');
  console.log('ok tool_choice required streamed');
  await expect400(tc.chat.completions.create({ model: toolsModel, messages, tools,
                    tool_choice: { type: 'function', function: { name: 'nope' } } }), 'nope', 'unknown tool');
  console.log('all ok');
}

main().catch((e) => { console.error(e); process.exit(1); });
