// The clients of tests/deploy/haproxy_test.sh: the real OpenAI client (npm openai, from
// .deps/server-openai) against wgrt replicas behind HAProxy. No client-side retries
// (maxRetries 0): what a request gets is what the load balancer and the replicas made of it.
// Usage: NODE_PATH=.deps/server-openai/node_modules node haproxy_clients.js MODE BASE_URL [...]
//   affinity BASE                 12 conversations x 3 requests, 1 in flight; all must answer
//   throughput BASE               32 requests, 16 in flight, max_tokens 16; prints tok/s
//   failover BASE PROGRESS STOP   64 clients loop until the file STOP exists; writes
//                                 "answered sent" to PROGRESS; exits 1 if a request is lost
//                                 or refused with another status than 503
'use strict';
const fs = require('node:fs');
const openai = require('openai');
const OpenAI = openai.OpenAI || openai.default || openai;

const [mode, base, progressFile, stopFile] = process.argv.slice(2);
const kRequestTimeoutMs = 60000;  // a request unanswered for this long is lost (hung)
const kTurnPauseMs = 200;  // between a conversation's requests in the affinity phase
const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'none', maxRetries: 0, timeout: kRequestTimeoutMs });
const prompts = ['Once upon a time', 'The little dog', 'In the morning', 'She said that', 'The sun was'];

// How a request names its conversation: one of the three keys the load balancer reads.
function keyed(i, key) {
  switch (i % 3) {
    case 0: return { params: {}, options: { headers: { 'X-Conversation-Id': key } } };
    case 1: return { params: { prompt_cache_key: key }, options: {} };
    default: return { params: { user: key }, options: {} };
  }
}

// One completion, streamed or not. Resolves to {outcome, tokens, detail}: outcome is 'ok' (a
// well-formed answer), 'status' (an HTTP error status with a message), 'cut' (a stream that
// began and then failed with an error the client saw) or 'lost' (no answer within the timeout,
// no status, or an answer that ends without a finish_reason or error).
async function complete({ prompt, maxTokens, stream, params = {}, options = {} }) {
  const body = { model: 'wgrt', prompt, max_tokens: maxTokens, ...params };
  if (!stream) {
    try {
      const r = await client.completions.create(body, options);
      const c = r.choices && r.choices[0];
      const n = r.usage && r.usage.completion_tokens;
      if (!c || typeof c.text !== 'string' || !['length', 'stop'].includes(c.finish_reason) || !(n >= 1 && n <= maxTokens))
        return { outcome: 'lost', detail: 'malformed answer: ' + JSON.stringify(r).slice(0, 200) };
      return { outcome: 'ok', tokens: n };
    } catch (e) {
      return failed(e, false);
    }
  }
  let started = false, finish = null, usage = null;
  try {
    const s = await client.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }, options);
    started = true;
    for await (const chunk of s) {
      if (chunk.usage) usage = chunk.usage;
      if (chunk.choices && chunk.choices.length && chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
    }
  } catch (e) {
    return failed(e, started);
  }
  if (!finish || !usage || !(usage.completion_tokens >= 1 && usage.completion_tokens <= maxTokens))
    return { outcome: 'lost', detail: `a stream ended without its finish_reason or usage (${finish})` };
  return { outcome: 'ok', tokens: usage.completion_tokens, streamed: true };
}

function failed(e, streamStarted) {
  if (e instanceof openai.APIConnectionTimeoutError) return { outcome: 'lost', detail: `no answer in ${kRequestTimeoutMs} ms` };
  if (e instanceof openai.APIError && e.status)
    return { outcome: 'status', status: e.status, detail: `${e.status} ${String(e.message).slice(0, 160)}` };
  if (streamStarted) return { outcome: 'cut', detail: `stream cut: ${e.name}: ${String(e.message).slice(0, 120)}` };
  return { outcome: 'lost', detail: `no status: ${e.name}: ${String(e.message).slice(0, 160)}` };
}

async function affinity() {
  const convs = Array.from({ length: 12 }, (_, i) => i);
  let answered = 0;
  async function worker() {
    for (let i = convs.shift(); i !== undefined; i = convs.shift()) {
      const k = keyed(i, `aff-${i}`);
      for (let turn = 0; turn < 3; ++turn) {
        const r = await complete({ prompt: prompts[turn], maxTokens: 2, ...k });
        if (r.outcome !== 'ok') throw new Error(`conversation aff-${i}, request ${turn}: ${r.detail}`);
        ++answered;
        await new Promise((done) => setTimeout(done, kTurnPauseMs));
      }
    }
  }
  // One request in flight: the backend's bounded load (hash-balance-factor) lets a conversation
  // spill to the other replica when its own is busier than 1.5x the average, so affinity is strict
  // only where no request waits beside it (the throughput and failover phases load it). A turn
  // follows the last one's end by a pause, as a user's would: a request sent the moment the
  // previous answer was read can find that stream still open in HAProxy, its replica's load at 1
  // against an average of 0.5, and spill (2 of 36 requests did in two CI runs).
  await worker();
  console.log(`affinity: ${answered} answered`);
}

async function throughput() {
  let next = 0, tokens = 0;
  const t0 = performance.now();
  async function worker() {
    for (let i = next++; i < 32; i = next++) {
      const r = await complete({ prompt: prompts[i % prompts.length] + ` (${i})`, maxTokens: 16 });
      if (r.outcome !== 'ok') throw new Error(`request ${i}: ${r.detail}`);
      tokens += r.tokens;
    }
  }
  await Promise.all(Array.from({ length: 16 }, worker));
  const s = (performance.now() - t0) / 1000;
  console.log(`summary ${tokens} tokens in ${s.toFixed(1)} s`);
  console.log(`tok/s ${(tokens / s).toFixed(1)}`);
}

async function failover() {
  const counts = { sent: 0, ok: 0, streamed: 0, status: 0, cut: 0, lost: 0 };
  const statuses = {}, examples = {};
  const writeProgress = () => {  // whole or not at all, for the script that polls it
    fs.writeFileSync(progressFile + '.tmp', `${counts.ok} ${counts.sent}\n`);
    fs.renameSync(progressFile + '.tmp', progressFile);
  };
  const timer = setInterval(writeProgress, 200);
  async function clientLoop(i) {
    const k = keyed(i, `fail-${i}`);
    for (let n = 0; !fs.existsSync(stopFile); ++n) {
      ++counts.sent;
      const r = await complete({ prompt: prompts[(i + n) % prompts.length], maxTokens: 4, stream: i % 4 === 3, ...k });
      ++counts[r.outcome];
      if (r.streamed) ++counts.streamed;
      if (r.status) statuses[r.status] = (statuses[r.status] || 0) + 1;
      if (r.detail && !examples[r.outcome + (r.status || '')]) examples[r.outcome + (r.status || '')] = r.detail;
    }
  }
  await Promise.all(Array.from({ length: 64 }, (_, i) => clientLoop(i)));
  clearInterval(timer);
  writeProgress();
  const by = Object.entries(statuses).map(([s, n]) => `${s}: ${n}`).join(', ') || 'none';
  console.log(`failover: 64 clients sent ${counts.sent}: answered ${counts.ok} (${counts.streamed} streamed), ` +
              `error statuses ${counts.status} (${by}), streams cut ${counts.cut}, lost ${counts.lost}`);
  for (const [kind, detail] of Object.entries(examples)) console.log(`failover: first ${kind}: ${detail}`);
  const total = counts.ok + counts.status + counts.cut + counts.lost;
  if (total !== counts.sent) throw new Error(`${counts.sent} sent but ${total} accounted for`);
  if (counts.lost > 0) throw new Error(`${counts.lost} requests lost`);
  // A request that reached a dying replica is retried elsewhere (retry-on empty-response): the
  // only refusal left is 503 (no replica free), never a 502 for a request cut off unanswered.
  const other = Object.keys(statuses).filter((s) => s !== '503');
  if (other.length) throw new Error(`error statuses other than 503: ${other.join(', ')}`);
  if (counts.ok === 0) throw new Error('no request answered');
}

const modes = { affinity, throughput, failover };
if (!modes[mode]) {
  console.error(`unknown mode '${mode}' (affinity, throughput or failover)`);
  process.exit(2);
}
modes[mode]().catch((e) => {
  console.error(`${mode}: ${e.message}`);
  process.exit(1);
});
