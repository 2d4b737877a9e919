"""Raw HTTP checks against `deepinfer serve` that a well-behaved client library never makes:
malformed JSON and HTTP, wrong methods and routes, missing auth, and a client that disconnects
mid-stream (its sequences must leave the engine). usage: raw_http_test.py PORT API_KEY MODEL"""
import json
import socket
import sys
import time

port, key, model = int(sys.argv[1]), sys.argv[2], sys.argv[3]
failed = 0


def check(name, cond, detail=""):
    global failed
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else f": {detail}"))
    failed |= not cond


def raw(data: bytes, timeout=30):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        pass
    s.close()
    return out


def request(method, path, body=None, auth=True, extra=""):
    payload = body.encode() if isinstance(body, str) else (body or b"")
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    if auth:
        head += f"Authorization: Bearer {key}\r\n"
    head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n{extra}\r\n"
    resp = raw(head.encode() + payload)
    status = int(resp.split(b" ", 2)[1]) if resp.startswith(b"HTTP/1.1 ") else 0
    return status, resp.split(b"\r\n\r\n", 1)[-1]


def is_openai_error(body):
    try:
        e = json.loads(body)["error"]
        return isinstance(e["message"], str) and isinstance(e["type"], str) and "code" in e
    except Exception:
        return False


chat = "/v1/chat/completions"
for name, body in [("truncated JSON", '{"model": "%s", "messages": [' % model),
                   ("not an object", "[1, 2, 3]"),
                   ("invalid UTF-8", b'{"messages": "\xff\xfe"}'),
                   ("empty body", "")]:
    st, b = request("POST", chat, body)
    check(f"400 for {name}", st == 400 and is_openai_error(b), (st, b[:200]))

st, b = request("POST", chat, json.dumps({"model": model, "messages": [{"role": "wizard", "content": "x"}]}))
check("400 for an unknown role", st == 400 and is_openai_error(b), (st, b[:200]))
st, b = request("POST", chat, json.dumps({"model": model, "messages": [{"role": "user", "content": "x"}],
                                           "stream_options": {"include_usage": True, "bogus": 1}, "stream": True}))
check("400 for an unknown stream_options field", st == 400 and b"bogus" in b, (st, b[:200]))
st, b = request("POST", "/v1/completions", json.dumps({"model": model, "prompt": [1, 2], "max_tokens": -3}))
check("400 for negative max_tokens", st == 400 and is_openai_error(b), (st, b[:200]))
st, b = request("POST", chat, json.dumps({"model": model, "messages": [{"role": "user", "content": "x"}]}), auth=False)
check("401 without a key", st == 401 and is_openai_error(b), (st, b[:200]))
st, b = request("GET", chat)
check("405 for GET on a POST route", st == 405 and is_openai_error(b), (st, b[:200]))
st, b = request("GET", "/v1/nothing")
check("404 for an unknown route", st == 404 and is_openai_error(b), (st, b[:200]))
resp = raw(b"\x16\x03\x01garbage that is not HTTP\r\n\r\n")
check("400 or a close for non-HTTP bytes", resp == b"" or resp.startswith(b"HTTP/1.1 400"), resp[:100])
st, b = request("POST", "/tokenize", json.dumps({"prompt": "hello world"}))
toks = json.loads(b)["tokens"] if st == 200 else []
st2, b2 = request("POST", "/detokenize", json.dumps({"tokens": toks}))
check("tokenize / detokenize round trip", st2 == 200 and json.loads(b2)["prompt"] == "hello world", b2)
st, b = request("GET", "/health", auth=False)
check("health", st == 200, st)


def metric(name):
    st, b = request("GET", "/metrics", auth=False)
    for line in b.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


# A streaming client that reads two events and hangs up: its sequences must leave the engine.
body = json.dumps({"model": model, "prompt": "count", "max_tokens": 3000, "stream": True, "n": 2,
                   "ignore_eos": True}).encode()
s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
          f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
got = b""
while got.count(b"data: ") < 4:
    got += s.recv(4096)
running = metric("deepinfer_num_requests_running")
check("the stream runs", running == 2, running)
s.close()
deadline = time.time() + 20
while time.time() < deadline and metric("deepinfer_num_requests_running") != 0:
    time.sleep(0.05)
check("a disconnect frees the sequences", metric("deepinfer_num_requests_running") == 0,
      metric("deepinfer_num_requests_running"))
check("kv usage back to 0", metric("deepinfer_kv_cache_usage_perc") == 0)

# A non-streaming client that hangs up while its request runs: the server notices the EOF while
# waiting (no write is due until the end) and frees the sequence within a few steps.
body = json.dumps({"model": model, "prompt": "count", "max_tokens": 3000, "ignore_eos": True}).encode()
s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
          f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
deadline = time.time() + 20
while time.time() < deadline and metric("deepinfer_num_requests_running") != 1:
    time.sleep(0.05)
check("the non-streaming request runs", metric("deepinfer_num_requests_running") == 1)
s.close()
t0 = time.time()
while time.time() < t0 + 5 and metric("deepinfer_num_requests_running") != 0:
    time.sleep(0.05)
check("a non-streaming client hanging up frees its sequence within 5 s",
      metric("deepinfer_num_requests_running") == 0, time.time() - t0)
st, b = request("GET", "/metrics", auth=False)
text = b.decode()
for m in ["deepinfer_time_to_first_token_seconds_bucket", "deepinfer_inter_token_latency_seconds_count",
          "deepinfer_e2e_request_latency_seconds_sum", "deepinfer_prompt_tokens_total",
          "deepinfer_generation_tokens_total", 'deepinfer_http_requests_total{route="/v1/chat/completions",status="400"}',
          "deepinfer_num_requests_waiting", "deepinfer_prefix_cache_hit_rate"]:
    check(f"metrics has {m}", m in text)
sys.exit(failed)
