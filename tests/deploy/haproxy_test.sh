#!/usr/bin/env bash
# deploy/haproxy/haproxy.cfg on loopback, as its user runs it: two `wgrt serve` replicas of the
# demo model behind HAProxy (run as this user: the committed file's global section, less what
# needs root), then
#   1. affinity: 12 conversations of 3 requests each (their key as the X-Conversation-Id
#      header, the body's prompt_cache_key or user) each stay on one replica; both are used;
#   2. throughput: the same 32 requests on one replica (directly) and on two (through HAProxy),
#      aggregate generated tok/s printed (not asserted: the machine's cores are shared);
#   3. failover: 64 clients send requests in a loop while replica r2 is killed (SIGKILL) and
#      started again; the clients stop once r2 is back in rotation and has answered again.
#      Every request gets a correct answer or a clear error (503, a cut stream); a request that
#      times out or ends without a finish_reason or error is lost, and none may be; requests
#      the kill met in flight are retried by HAProxy (at least one, and no 502).
# Figures (sent / answered / retried by HAProxy / 503 / cut / lost, tok/s) go to stdout.
# Usage: tests/deploy/haproxy_test.sh [WGRT_BINARY]   (default: build/wgrt)
# Every process it starts is stopped on exit, by its PID.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
wgrt=$(realpath "${1:-$root/build/wgrt}")
model="$root/models/wgrt-demo-q8_0.gguf"
cfg="$root/deploy/haproxy/haproxy.cfg"
clients="$root/tests/deploy/haproxy_clients.js"
export NODE_PATH="$root/.deps/server-openai/node_modules"

fail() { echo "haproxy_test: FAIL: $*" >&2; exit 1; }
for tool in haproxy node curl python3; do
  command -v "$tool" >/dev/null || fail "'$tool' is not installed (hint: bash tools/setup.sh)"
done
[ -x "$wgrt" ] || fail "no wgrt binary at $wgrt (hint: cmake --build build --target wgrt)"
[ -d "$NODE_PATH/openai" ] || fail "no openai client in $NODE_PATH (hint: bash tools/setup-test-data.sh)"

tmp=$(mktemp -d /tmp/wgrt-haproxy-test.XXXXXX)
declare -A pids=()
cleanup() {
  local rc=$? name
  for name in "${!pids[@]}"; do kill -9 "${pids[$name]}" 2>/dev/null || true; done
  for name in "${!pids[@]}"; do wait "${pids[$name]}" 2>/dev/null || true; done
  if [ $rc -ne 0 ]; then
    for f in "$tmp"/*.log "$tmp"/*.out; do [ -f "$f" ] && { echo "--- $f (tail)"; tail -n 15 "$f"; }; done
    # The replicas' state changes (health checks, errors observed on requests) over the whole run.
    [ -f "$tmp/haproxy.log" ] && { echo "--- replica state changes"; grep -E ' is (UP|DOWN)' "$tmp/haproxy.log" || echo none; }
  fi
  rm -rf "$tmp"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Four free loopback ports, held together while they are picked.
read -r port_r1 port_r2 port_lb port_admin < <(python3 -c '
import socket
s = [socket.socket() for _ in range(4)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
export WGRT_REPLICA_1=127.0.0.1:$port_r1 WGRT_REPLICA_2=127.0.0.1:$port_r2
export WGRT_LB_BIND=127.0.0.1:$port_lb WGRT_LB_ADMIN_BIND=127.0.0.1:$port_admin
lb=http://127.0.0.1:$port_lb admin=http://127.0.0.1:$port_admin

# The committed file as it ships must parse; it then runs with a global section of its own
# limits (maxconn, tune.*) and a log on stdout instead of syslog, chroot and user switch.
haproxy -c -q -f "$cfg" || fail "haproxy -c rejects $cfg"
{
  echo "global"
  echo "    log stdout format raw local0"
  sed -n '/^global/,/^defaults/p' "$cfg" | grep -E '^\s+(maxconn|tune\.)'
  echo
  sed -n '/^defaults/,$p' "$cfg"
} > "$tmp/haproxy.cfg"

start_replica() {  # name port
  "$wgrt" serve --model "$model" --host 127.0.0.1 --port "$2" --parallel 4 --queue-size 64 \
    >> "$tmp/$1.log" 2>&1 &
  pids[$1]=$!
}
start_replica r1 "$port_r1"
start_replica r2 "$port_r2"
haproxy -db -f "$tmp/haproxy.cfg" > "$tmp/haproxy.log" 2>&1 &
pids[haproxy]=$!

# HAProxy's view of a server: UP, DOWN, ... (its stats page as CSV: column 18 is the status).
server_status() { curl -fsS "$admin/stats;csv" 2>/dev/null | awk -F, -v s="$1" '$1=="wgrt_replicas" && $2==s {print $18}'; }
wait_for() {  # seconds description command...
  local limit=$1 until=$((SECONDS + $1)) what=$2; shift 2
  until "$@"; do
    [ $SECONDS -lt $until ] || fail "timed out after ${limit} s waiting for $what"
    for name in "${!pids[@]}"; do
      kill -0 "${pids[$name]}" 2>/dev/null || fail "$name (pid ${pids[$name]}) exited while waiting for $what"
    done
    sleep 0.2
  done
}
up() { [ "$(server_status "$1")" = UP ]; }
replica_done() { curl -fsS "$admin/replicas/$1/metrics" | awk '/^wgrt_requests_total\{result="done"\}/ {print $2}'; }
t0=$SECONDS
wait_for 120 "/health through HAProxy" curl -fs -o /dev/null "$lb/health"
wait_for 30 "r1 in rotation" up r1
wait_for 30 "r2 in rotation" up r2
echo "haproxy_test: 2 replicas up behind HAProxy in $((SECONDS - t0)) s"

# /metrics: each replica's own on the admin port; refused on the API port with a pointer there.
for r in r1 r2; do
  grep -q '^wgrt_slots 4$' <<< "$(curl -fsS "$admin/replicas/$r/metrics")" || fail "no wgrt metrics at /replicas/$r/metrics"
done
grep -q '^haproxy_backend_active_servers{proxy="wgrt_replicas"} 2$' <<< "$(curl -fsS "$admin/metrics")" \
  || fail "HAProxy's Prometheus exporter does not count 2 active replicas"
[ "$(curl -sS -o /dev/null -w '%{http_code}' "$lb/metrics")" = 404 ] || fail "/metrics on the API port is not 404"

# The log's request lines: server, status, retries (%rc, "+N" when redispatched), conversation
# key (the captured variable). Fields as `option httplog` writes them.
log_requests() {  # key-prefix
  awk -v p="{$1" '$0 ~ /wgrt_api/ && index($0, p) {
    split($4, srv, "/"); split($11, conns, "/"); print srv[2], $6, conns[5], $13 }' "$tmp/haproxy.log"
}

# 1. Affinity, one request in flight (so the balance factor never steps in: haproxy_clients.js).
node "$clients" affinity "$lb" > "$tmp/affinity.out" || { cat "$tmp/affinity.out"; fail "affinity clients"; }
cat "$tmp/affinity.out"
sleep 0.5  # the log line follows the response
log_requests aff- | awk '{print $1, $4}' | sort -u > "$tmp/affinity.map"
spread=$(awk '{print $2}' "$tmp/affinity.map" | sort | uniq -d | wc -l)
[ "$spread" = 0 ] || { cat "$tmp/affinity.map"; fail "$spread conversations went to more than one replica"; }
[ "$(wc -l < "$tmp/affinity.map")" = 12 ] || { cat "$tmp/affinity.map"; fail "not 12 conversations in the log"; }
[ "$(awk '{print $1}' "$tmp/affinity.map" | sort -u | wc -l)" = 2 ] || fail "12 conversations all hashed to one replica"
echo "haproxy_test: affinity: 12 conversations x 3 requests, each on one replica" \
  "(r1: $(awk '$1 == "r1"' "$tmp/affinity.map" | wc -l) conversations, r2: $(awk '$1 == "r2"' "$tmp/affinity.map" | wc -l))"

# 2. Throughput: one replica directly, then two through HAProxy (no key: round robin).
node "$clients" throughput "http://$WGRT_REPLICA_1" > "$tmp/tput1.out" || { cat "$tmp/tput1.out"; fail "throughput on one"; }
node "$clients" throughput "$lb" > "$tmp/tput2.out" || { cat "$tmp/tput2.out"; fail "throughput on two"; }
tps1=$(awk '/^tok\/s/ {print $2}' "$tmp/tput1.out") tps2=$(awk '/^tok\/s/ {print $2}' "$tmp/tput2.out")
echo "haproxy_test: throughput (32 requests, 16 at once, max_tokens 16): one replica $(sed -n 's/^summary //p' "$tmp/tput1.out")"
echo "haproxy_test: throughput through HAProxy on two replicas $(sed -n 's/^summary //p' "$tmp/tput2.out")"
echo "haproxy_test: aggregate generated tok/s: one replica $tps1, two replicas $tps2" \
  "(x$(python3 -c "print(f'{$tps2/$tps1:.2f}')"))"

# 3. Failover: r2 is killed once the clients have had answers from both replicas, started
# again at once; the clients stop once it is back in rotation and has answered 8 more requests.
node "$clients" failover "$lb" "$tmp/progress" "$tmp/stop" > "$tmp/failover.out" 2>&1 &
pids[clients]=$!
answered() { local n; n=$(awk '{print $1}' "$tmp/progress" 2>/dev/null || true); echo "${n:-0}"; }
answered_64() { [ "$(answered)" -ge 64 ]; }
wait_for 120 "64 answers before the kill" answered_64
before=$(answered)
kill -9 "${pids[r2]}"; wait "${pids[r2]}" 2>/dev/null || true
t_kill=$SECONDS
echo "haproxy_test: killed r2 (SIGKILL) after $before answers; starting it again"
[ "$(curl -sS -o /dev/null -w '%{http_code}' "$admin/replicas/r2/metrics")" = 503 ] \
  || fail "a killed replica's /replicas/r2/metrics is not 503"
start_replica r2 "$port_r2"
wait_for 120 "the restarted r2's /health" curl -fs -o /dev/null "http://$WGRT_REPLICA_2/health"
wait_for 30 "r2 back in rotation" up r2
echo "haproxy_test: r2 back in rotation $((SECONDS - t_kill)) s after the kill"
r2_answers() { local n; n=$(replica_done r2 || true); [ "${n:-0}" -ge 8 ]; }
wait_for 120 "8 answers from the restarted r2" r2_answers
touch "$tmp/stop"
until ! kill -0 "${pids[clients]}" 2>/dev/null; do
  [ $((SECONDS - t_kill)) -lt 300 ] || fail "the clients did not stop"
  sleep 0.2
done
clients_rc=0; wait "${pids[clients]}" || clients_rc=$?
unset 'pids[clients]'
cat "$tmp/failover.out"
sleep 0.5
retried_ok=$(log_requests fail- | awk '$2 == 200 && $3 != "0"' | wc -l)
redispatched=$(log_requests fail- | awk '$3 ~ /^\+/' | wc -l)
echo "haproxy_test: failover: HAProxy retried $retried_ok answered requests on another try" \
  "($redispatched redispatched to the other replica)"
# Every time HAProxy took a replica out of rotation, and why (the kill's, and any other).
grep -E '^Server wgrt_replicas/r[0-9]+ is DOWN' "$tmp/haproxy.log" | sed -E 's/, check duration.*//; s/^/haproxy_test: /' || true
[ "$clients_rc" = 0 ] || fail "failover clients (exit $clients_rc): see the counts above"
[ "$retried_ok" -gt 0 ] || fail "no request was retried: the kill met no request in flight on r2"
echo "haproxy_test: ok in $((SECONDS - t0)) s"
