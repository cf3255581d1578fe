#!/usr/bin/env python3
"""Aggregate generation speed of `wgrt serve` under N concurrent clients (standard library only).

Each client thread sends `--requests` greedy `POST /v1/completions` one after another
(`max_tokens` = --tokens, its own prompt); the figure is the completion tokens of all responses
(their `usage`) over the wall time from the first request to the last response, so prefill, HTTP
and JSON are inside it. Every response is checked (status 200, a choice, usage); any failure
ends the run with exit status 1.

  bench/serve_load.py --url http://127.0.0.1:8080 --clients 8 --requests 2 --tokens 256
"""
import argparse
import json
import sys
import threading
import time
import urllib.request


def complete(url, prompt, tokens, timeout):
    body = json.dumps({"prompt": prompt, "max_tokens": tokens, "temperature": 0}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        out = json.load(r)
    if not out.get("choices") or "usage" not in out:
        raise ValueError(f"a response without choices or usage: {str(out)[:200]}")
    return int(out["usage"]["completion_tokens"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--requests", type=int, default=1, help="per client, one after another")
    ap.add_argument("--tokens", type=int, default=128, help="max_tokens of each request")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per request")
    a = ap.parse_args()
    if a.clients < 1 or a.requests < 1 or a.tokens < 1:
        ap.error("--clients, --requests and --tokens must be at least 1")

    done, errors, lock = [], [], threading.Lock()

    def client(c):
        for i in range(a.requests):
            try:
                n = complete(a.url, f"Client {c}, request {i}: once upon a time", a.tokens, a.timeout)
                with lock:
                    done.append(n)
            except Exception as e:  # reported below, the run fails
                with lock:
                    errors.append(f"client {c} request {i}: {e}")

    threads = [threading.Thread(target=client, args=(c,)) for c in range(a.clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    for e in errors:
        print(f"serve_load: {e}", file=sys.stderr)
    tokens = sum(done)
    print(json.dumps({"clients": a.clients, "requests": len(done), "failed": len(errors), "completion_tokens": tokens,
                      "wall_s": round(wall, 3), "tok_s": round(tokens / wall, 1) if wall > 0 else 0.0}))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
