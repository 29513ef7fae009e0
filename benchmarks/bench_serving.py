#!/usr/bin/env python3
"""Serving benchmark for an SGLang server: throughput, TTFT and acceptance length vs concurrency.

Start a server with real weights (any algorithm: none, EAGLE/MTP, DFLASH, DDTREE), then:

    python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B ... --port 30000
    python benchmarks/bench_serving.py --label DFLASH --out bench_results
    python benchmarks/bench_serving.py --compare bench_results/MTP.json bench_results/DFLASH.json \\
        bench_results/DDTREE.json --out bench_results

For each concurrency level C (default 1,2,4,8,16,32,64) the benchmark sends --num-prompts
streaming requests (default max(16, 4 C)) with at most C in flight at once (a closed loop: a new
request starts as soon as one finishes), cycling through the prompt set in a fixed order, so
every run and every level sees the same prompts. It writes LABEL.json (settings, server
arguments, per-level summary and every request) and LABEL.md (the summary table) under --out.
`--compare A.json B.json ...` needs no server: it writes compare.md and compare.png (matplotlib).

Metrics per level (over the requests that completed):
  aggregate tok/s    output tokens of all requests / wall time of the level (first send to
                     last byte)
  tok/s per request  median over requests of output tokens / end-to-end latency (what one
                     user sees, queueing and prefill included)
  decode tok/s       median over requests of (output tokens - 1) / (latency - TTFT): the
                     per-request decode speed after the first token (1 / TPOT)
  TTFT               time from sending the request to the first streamed chunk carrying an
                     output token; median and p90
  accept length      output tokens per target verify step, pooled over the level's requests:
                     sum(completion_tokens) / sum(spec_verify_ct) (SGLang's own per-request
                     definition; the first token, from prefill, is counted too, which adds
                     1 / spec_verify_ct to the per-step mean)

Where acceptance comes from (SGLang's tokenizer manager). Only SGLang's native /generate endpoint
returns per-request speculative metrics: when a request finishes, the tokenizer manager adds
to its meta_info `spec_verify_ct` (target verify steps), `spec_accept_token_num`,
`spec_draft_token_num`, `spec_accept_rate` and `spec_accept_length` = completion_tokens /
spec_verify_ct (sglang/srt/managers/tokenizer_manager.py, _calculate_spec_decoding_metrics,
called for finished requests only). The OpenAI-compatible endpoints (/v1/completions,
/v1/chat/completions) return none of these fields. The server-wide `avg_spec_accept_length` in
/server_info's internal_states (sglang/srt/managers/scheduler.py, get_internal_state) is
cumulative since the server started (warm-up and earlier levels included) and is only updated
when the scheduler logs decode stats (every --decode-log-interval = 40 decode batches), so it
cannot be attributed to one level. Hence the default --api generate, which measures acceptance
exactly per request and per level; --api chat / completions measure throughput and TTFT the same
way and report the server-wide cumulative value as acceptance (marked "server, cumulative").
The JSON records the server-wide value after every level in all modes.

Note that /generate sends the prompt text as is (no chat template); pass --chatml to wrap each
prompt in a ChatML user turn (the Qwen template), or use --api chat to let the server apply the
model's own template.

Exit status: 0 all requests completed; 1 some requests failed (results are still written);
2 bad arguments, server unreachable or warm-up failed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import re
import socket
import statistics
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from tqdm import tqdm

DEFAULT_CONCURRENCY = "1,2,4,8,16,32,64"

# The embedded default prompt set: short questions, medium tasks and long inputs (code to review,
# a passage to summarise, a specification to implement), across code, maths, prose and facts,
# since acceptance depends on the domain.
_LONG_CODE = '''\
Review the following Python module. List every bug you find with the line it is on, explain why it
is a bug, and then give a corrected version of the whole module.

```python
import time


class RateLimiter:
    """Token bucket: allows `rate` calls per second with bursts of up to `burst` calls."""

    def __init__(self, rate, burst):
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.last = time.time()
        self.lock = threading.Lock()

    def _refill(self):
        now = time.time()
        elapsed = now - self.last
        self.tokens = self.tokens + elapsed * self.rate
        self.last = now

    def try_acquire(self, n=1):
        self._refill()
        with self.lock:
            if self.tokens > n:
                self.tokens -= n
                return True
            return False

    def acquire(self, n=1, timeout=None):
        start = time.time()
        while not self.try_acquire(n):
            if timeout and time.time() - start > timeout:
                return False
            time.sleep(n / self.rate)
        return True


class LRUCache:
    def __init__(self, capacity):
        self.capacity = capacity
        self.data = {}
        self.order = []

    def get(self, key, default=None):
        if key in self.data:
            self.order.remove(key)
            self.order.append(key)
        return self.data.get(key, default)

    def put(self, key, value):
        if len(self.data) >= self.capacity:
            oldest = self.order.pop()
            del self.data[oldest]
        self.data[key] = value
        self.order.append(key)
```
'''

_LONG_PASSAGE = """\
Summarise the following passage in five bullet points, then write one paragraph on what it leaves
out.

The history of the lighthouse is, in large part, the history of trying to see a small light from
very far away. Early towers burned wood or coal in open braziers at the top, which consumed huge
amounts of fuel, smoked badly and could be seen only a few miles out on a clear night. Oil lamps
with wicks were an improvement, but a bare flame sends its light in every direction, and most of it
goes up into the sky or down into the ground where no sailor will ever see it. The first real
advance was the parabolic reflector: a polished metal bowl behind the lamp that gathered light
thrown backwards and sent it out towards the horizon. Reflectors made lights brighter, but they
tarnished quickly, absorbed a large share of the light that struck them, and a keeper had to polish
them daily.

The decisive change came in the 1820s with the lens designed by Augustin Fresnel. Instead of one
thick glass lens, which would have been impossibly heavy and would have cracked as it heated,
Fresnel built his lens from concentric rings of glass prisms, each ring shaped so that it bent the
light by the same amount as the corresponding part of a thick lens would have done. Rings above and
below the centre used total internal reflection to catch light that would otherwise escape
vertically. The result captured most of the lamp's light and sent it out in a flat, intense beam.
Lenses were graded into orders by their size, from the huge first-order lenses of major coastal
lights to small sixth-order lenses for harbours and rivers.

Rotating the lens assembly turned the steady beam into a series of flashes, and the pattern of
flashes, each light with its own characteristic period, let sailors identify which lighthouse they
were looking at. Clockwork driven by falling weights turned the lens, and many keepers spent their
nights winding it. Later, the whole assembly floated on a bath of mercury, which let a lens
weighing several tonnes turn with a push of a finger. Electric lamps, automatic lamp changers and
finally solar panels and LED beacons made keepers unnecessary, and by the end of the twentieth
century almost every light in the world had been automated. Many of the old lenses now sit in
museums, while the towers themselves are kept as landmarks.
"""

_LONG_SPEC = """\
Implement the following specification in Python 3 as a single module with type hints and
docstrings, then write pytest tests that cover every rule.

An inventory service keeps stock levels for items identified by a string SKU. It supports these
operations:
1. add_item(sku, name, quantity, reorder_level): registers a new item. The SKU must match the
   pattern of three upper-case letters, a dash and four digits. Quantity and reorder level are
   non-negative integers. Adding an existing SKU is an error.
2. receive(sku, quantity): increases stock. Quantity must be positive.
3. ship(sku, quantity): decreases stock. Shipping more than is in stock is an error and leaves
   the stock unchanged. When stock falls to or below the reorder level, the item is added to the
   reorder list unless it is already on it.
4. reorder_list(): returns the SKUs that need reordering, in the order they first crossed the
   reorder level.
5. history(sku): returns every change to the item as (timestamp, delta, resulting quantity)
   tuples, oldest first. Timestamps come from a clock object passed to the service constructor so
   that tests can control time.
6. All errors raise a custom InventoryError with a message that names the SKU and the rule that
   was broken.
The service must be safe to call from several threads at once.
"""

DEFAULT_PROMPTS: list[str] = [
    "What is the capital of Australia?",
    "Write a haiku about autumn rain.",
    "Explain in one sentence what a hash table is.",
    "What is 17 multiplied by 23? Show your working.",
    "Write a Python function that returns the n-th Fibonacci number iteratively, with a docstring and type hints.",
    "Explain the difference between TCP and UDP, and give two examples of applications that use each.",
    "A train leaves a station at 9:00 travelling at 80 km/h. A second train leaves the same station at 10:00 "
    "travelling at 100 km/h on a parallel track in the same direction. At what time does the second train "
    "catch up with the first? Explain each step.",
    "Write a short story of about 300 words about a robot who learns to paint, told from the point of view "
    "of the robot's first painting.",
    "Write a SQL schema for a library lending system (books, copies, members, loans) and three queries: "
    "overdue loans, the most borrowed books this year, and members with more than three active loans.",
    "Prove that the square root of 2 is irrational, then explain why the same argument fails for the square root of 4.",
    _LONG_CODE,
    _LONG_PASSAGE,
    _LONG_SPEC,
    "Translate into French, then explain any idioms you had to adapt: 'It's raining cats and dogs, so "
    "let's call it a day and grab a bite to eat.'",
    "Give a step-by-step plan to migrate a monolithic web application to microservices, with the risks of each step.",
    "List the planets of the solar system in order from the Sun, with one notable fact about each.",
]


# ----------------------------------------------------------------------------------------------
# Prompts


def load_prompts(path: str | None) -> list:
    """A list of prompts: each a string, or a list of chat messages ({"role", "content"}).

    .jsonl (or .json) lines: a JSON string, or an object with "prompt" or "text" (a string) or
    "messages" (a chat message list); a .json file may also be one JSON array of such items.
    Any other file: one prompt per non-empty line.
    """
    if path is None:
        return list(DEFAULT_PROMPTS)
    with open(path, encoding="utf-8") as f:
        raw = f.read()
    lines = raw.splitlines()
    prompts: list = []
    if path.endswith(".json") and raw.lstrip().startswith("["):  # one JSON array of such items
        lines = [json.dumps(x) for x in json.loads(raw)]
    if path.endswith((".jsonl", ".json")):
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON ({e})") from None
            if isinstance(obj, str):
                prompts.append(obj)
            elif isinstance(obj, dict) and isinstance(obj.get("messages"), list):
                prompts.append(obj["messages"])
            elif isinstance(obj, dict) and isinstance(obj.get("prompt", obj.get("text")), str):
                prompts.append(obj.get("prompt", obj.get("text")))
            else:
                raise ValueError(f'{path}:{n}: expected a string or an object with "prompt", "text" or "messages"')
    else:
        prompts = [line for line in lines if line.strip()]
    if not prompts:
        raise ValueError(f"{path}: no prompts")
    return prompts


def chatml(messages: list) -> str:
    """ChatML (the Qwen chat format) for a message list, ending with an open assistant turn."""
    turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return turns + "<|im_start|>assistant\n"


def as_text(prompt, use_chatml: bool) -> str:
    messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
    if use_chatml:
        return chatml(messages)
    if isinstance(prompt, str):
        return prompt
    return "\n\n".join(str(m["content"]) for m in messages)


# ----------------------------------------------------------------------------------------------
# HTTP


class Unreachable(Exception):
    pass


@dataclass
class Endpoint:
    scheme: str
    host: str
    port: int
    prefix: str
    api_key: str | None

    @classmethod
    def parse(cls, base_url: str, api_key: str | None) -> "Endpoint":
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"--base-url must look like http://HOST:PORT, got {base_url!r}")
        port = u.port or (443 if u.scheme == "https" else 80)
        return cls(u.scheme, u.hostname, port, u.path.rstrip("/"), api_key)

    def connect(self, timeout: float) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=timeout)

    def headers(self) -> dict:
        h = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    def get_json(self, path: str, timeout: float):
        """(status, parsed body or None). Raises Unreachable when no connection can be made."""
        conn = self.connect(timeout)
        try:
            conn.request("GET", self.prefix + path, headers=self.headers())
            resp = conn.getresponse()
            body = resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise Unreachable(f"{type(e).__name__}: {e}") from None
        finally:
            conn.close()
        try:
            return resp.status, json.loads(body)
        except ValueError:
            return resp.status, None


def server_info(ep: Endpoint, timeout: float) -> dict | None:
    """SGLang's /server_info (server arguments + internal states), or None (not SGLang, or older)."""
    for path in ("/server_info", "/get_server_info"):
        try:
            status, body = ep.get_json(path, timeout)
        except Unreachable:
            return None
        if status == 200 and isinstance(body, dict):
            return body
    return None


def server_accept_length(info: dict | None) -> float | None:
    """Mean of internal_states[*].avg_spec_accept_length (one state per DP rank), if present."""
    if not info:
        return None
    vals = [s.get("avg_spec_accept_length") for s in info.get("internal_states") or [] if isinstance(s, dict)]
    vals = [float(v) for v in vals if isinstance(v, (int, float))]
    return sum(vals) / len(vals) if vals else None


SERVER_KEYS = (
    "model_path",
    "served_model_name",
    "version",
    "tp_size",
    "dp_size",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "max_running_requests",
    "cuda_graph_max_bs",
    "attention_backend",
    "disable_overlap_schedule",
)


# ----------------------------------------------------------------------------------------------
# One streamed request


@dataclass
class RequestResult:
    index: int
    prompt_index: int
    ok: bool = False
    error: str | None = None
    start_s: float = 0.0  # from the start of the level
    ttft_s: float | None = None
    latency_s: float | None = None
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    spec_verify_ct: int | None = None
    spec_accept_token_num: int | None = None
    spec_draft_token_num: int | None = None
    spec_accept_length: float | None = None
    extra: dict = field(default_factory=dict)


def build_request(api: str, prompt, args) -> tuple[str, dict]:
    """(path, JSON body) of one streaming request."""
    if api == "generate":
        params = {"max_new_tokens": args.max_new_tokens, "temperature": args.temperature, "ignore_eos": args.ignore_eos}
        if args.top_p is not None:
            params["top_p"] = args.top_p
        return "/generate", {"text": as_text(prompt, args.chatml), "sampling_params": params, "stream": True}
    body = {
        "model": args.model,
        "max_tokens": args.max_new_tokens,
        "temperature": args.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": args.ignore_eos,
    }
    if args.top_p is not None:
        body["top_p"] = args.top_p
    if api == "chat":
        body["messages"] = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        return "/v1/chat/completions", body
    body["prompt"] = as_text(prompt, args.chatml)
    return "/v1/completions", body


def _chunk_text(api: str, chunk: dict) -> str:
    """The output text a streamed OpenAI chunk carries (content and reasoning content)."""
    out = []
    for choice in chunk.get("choices") or []:
        if api == "chat":
            delta = choice.get("delta") or {}
            out.append(delta.get("content") or "")
            out.append(delta.get("reasoning_content") or "")
        else:
            out.append(choice.get("text") or "")
    return "".join(out)


def stream_one(ep: Endpoint, api: str, path: str, body: dict, timeout: float, res: RequestResult, t_level: float) -> None:
    """Sends one streaming request and fills `res` (ok or error); never raises."""
    payload = json.dumps(body).encode()
    conn = ep.connect(timeout)
    t0 = time.perf_counter()
    res.start_s = t0 - t_level
    try:
        conn.request("POST", ep.prefix + path, body=payload, headers=ep.headers())
        resp = conn.getresponse()
        if resp.status != 200:
            text = resp.read(2000).decode("utf-8", "replace").strip()
            raise RuntimeError(f"HTTP {resp.status}: {text}")
        first = None  # perf_counter time of the first chunk with an output token
        last = None  # last data payload (native: the one with the final meta_info)
        usage = None
        n_text_chunks = 0
        done = False
        while True:
            line = resp.readline()
            if not line:
                break
            now = time.perf_counter()
            if now - t0 > timeout:
                raise TimeoutError(f"request took longer than --timeout {timeout:g} s")
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            last = data
            if api == "generate":
                # /generate chunks repeat the whole output so far: parse only until the first token,
                # then keep the raw last chunk (cheap even at 64 streams of long outputs).
                if first is None:
                    chunk = json.loads(data)
                    if "error" in chunk:
                        raise RuntimeError(f"server error: {chunk['error']}")
                    if ((chunk.get("meta_info") or {}).get("completion_tokens") or 0) > 0 or chunk.get("output_ids"):
                        first = now
            else:
                chunk = json.loads(data)
                if "error" in chunk:
                    raise RuntimeError(f"server error: {chunk['error']}")
                if chunk.get("usage"):
                    usage = chunk["usage"]
                if _chunk_text(api, chunk):
                    n_text_chunks += 1
                    if first is None:
                        first = now
                for choice in chunk.get("choices") or []:
                    if choice.get("finish_reason"):
                        res.finish_reason = choice["finish_reason"]
        end = time.perf_counter()
        if not done:
            raise RuntimeError("stream ended without [DONE]")
        if api == "generate":
            if last is None:
                raise RuntimeError("empty stream")
            final = json.loads(last)
            if "error" in final:
                raise RuntimeError(f"server error: {final['error']}")
            meta = final.get("meta_info") or {}
            res.completion_tokens = int(meta.get("completion_tokens", 0))
            res.prompt_tokens = meta.get("prompt_tokens")
            fr = meta.get("finish_reason")
            res.finish_reason = fr.get("type") if isinstance(fr, dict) else fr
            if meta.get("spec_verify_ct"):
                res.spec_verify_ct = int(meta["spec_verify_ct"])
                res.spec_accept_token_num = meta.get("spec_accept_token_num")
                res.spec_draft_token_num = meta.get("spec_draft_token_num")
                res.spec_accept_length = meta.get("spec_accept_length")
        else:
            if usage and usage.get("completion_tokens") is not None:
                res.completion_tokens = int(usage["completion_tokens"])
                res.prompt_tokens = usage.get("prompt_tokens")
            else:  # no usage chunk: count text chunks (exact only when each chunk is one token)
                res.completion_tokens = n_text_chunks
                res.extra["tokens_counted_from_chunks"] = True
        res.latency_s = end - t0
        res.ttft_s = (first - t0) if first is not None else None
        if res.completion_tokens and res.ttft_s is None:
            raise RuntimeError("no streamed chunk carried an output token")
        res.ok = True
    except Exception as e:  # one failed request must not stop the benchmark
        res.ok = False
        if isinstance(e, (socket.timeout, TimeoutError)):
            res.error = f"timed out after {time.perf_counter() - t0:.1f} s ({e})"
        elif isinstance(e, RuntimeError):
            res.error = str(e)
        else:
            res.error = f"{type(e).__name__}: {e}"
    finally:
        conn.close()


# ----------------------------------------------------------------------------------------------
# Statistics


def percentile(xs: list[float], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    if not xs:
        return None
    s = sorted(xs)
    k = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _median(xs):
    return statistics.median(xs) if xs else None


def _mean(xs):
    return statistics.fmean(xs) if xs else None


def summarize(concurrency: int, results: list[RequestResult], duration_s: float, server_acc: float | None) -> dict:
    ok = [r for r in results if r.ok]
    tokens = [r.completion_tokens or 0 for r in ok]
    per_req = [r.completion_tokens / r.latency_s for r in ok if r.latency_s and r.completion_tokens]
    decode = [
        (r.completion_tokens - 1) / (r.latency_s - r.ttft_s)
        for r in ok
        if r.completion_tokens and r.completion_tokens > 1 and r.ttft_s is not None and r.latency_s > r.ttft_s
    ]
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    lat = [r.latency_s for r in ok]
    spec = [r for r in ok if r.spec_verify_ct]
    if spec:
        accept = sum(r.completion_tokens for r in spec) / sum(r.spec_verify_ct for r in spec)
        acc_src = "meta_info"
        drafts = sum(r.spec_draft_token_num or 0 for r in spec)
        accept_rate = sum(r.spec_accept_token_num or 0 for r in spec) / drafts if drafts else None
    else:
        accept, acc_src, accept_rate = server_acc, ("server_info" if server_acc is not None else None), None
    prompt_tokens = [r.prompt_tokens for r in ok if isinstance(r.prompt_tokens, int)]
    return {
        "concurrency": concurrency,
        "num_requests": len(results),
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "duration_s": duration_s,
        "output_tokens": sum(tokens),
        "prompt_tokens": sum(prompt_tokens) if prompt_tokens else None,
        "output_tok_s": sum(tokens) / duration_s if duration_s > 0 else None,
        "request_per_s": len(ok) / duration_s if duration_s > 0 else None,
        "per_request_tok_s_median": _median(per_req),
        "per_request_tok_s_mean": _mean(per_req),
        "per_request_decode_tok_s_median": _median(decode),
        "per_request_decode_tok_s_mean": _mean(decode),
        "ttft_median_s": _median(ttft),
        "ttft_p90_s": percentile(ttft, 90),
        "ttft_mean_s": _mean(ttft),
        "latency_median_s": _median(lat),
        "latency_p90_s": percentile(lat, 90),
        "accept_length": accept,
        "accept_length_source": acc_src,
        "accept_rate": accept_rate,
        "requests_with_spec_metrics": len(spec),
        "server_avg_accept_length_cumulative": server_acc,
        "errors": sorted({r.error for r in results if not r.ok})[:10],
        "requests": [asdict(r) for r in results],
    }


# ----------------------------------------------------------------------------------------------
# Running


def run_level(ep: Endpoint, prompts: list, concurrency: int, n: int, args, progress: bool) -> tuple[list, float]:
    jobs = []
    for i in range(n):
        pi = i % len(prompts)
        path, body = build_request(args.api, prompts[pi], args)
        jobs.append((RequestResult(index=i, prompt_index=pi), path, body))
    bar = tqdm(total=n, desc=f"concurrency {concurrency:>3}", unit="req", disable=not progress, file=sys.stderr)
    n_failed = 0
    t_level = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futs = {pool.submit(stream_one, ep, args.api, path, body, args.timeout, res, t_level): res for res, path, body in jobs}
        for fut in as_completed(futs):
            fut.result()
            if not futs[fut].ok:
                n_failed += 1
                bar.set_postfix(failed=n_failed)
            bar.update(1)
    duration = time.perf_counter() - t_level
    bar.close()
    return [res for res, _, _ in jobs], duration


def fmt(x, spec: str = ".1f", scale: float = 1.0) -> str:
    return "-" if x is None else format(x * scale, spec)


def run_markdown(run: dict) -> str:
    s, srv = run["settings"], run.get("server") or {}
    lines = [f"# bench_serving: {run['label']}", ""]
    lines.append(
        f"server `{run['base_url']}` ({srv.get('model_path', 'unknown model')}, speculative algorithm "
        f"{srv.get('speculative_algorithm') or 'none'}), api `{s['api']}`, max_new_tokens {s['max_new_tokens']}, "
        f"temperature {s['temperature']}, ignore_eos {s['ignore_eos']}, prompts: {s['prompts']}, {run['created']}"
    )
    lines += [
        "",
        "| concurrency | requests (failed) | output tokens | aggregate tok/s | tok/s per request (median) "
        "| decode tok/s per request (median) | TTFT median (ms) | TTFT p90 (ms) | accept length |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for lv in run["levels"]:
        acc = fmt(lv["accept_length"], ".2f")
        if lv["accept_length_source"] == "server_info":
            acc += "*"
        lines.append(
            f"| {lv['concurrency']} | {lv['num_requests']} ({lv['failed']}) | {lv['output_tokens']} "
            f"| {fmt(lv['output_tok_s'])} | {fmt(lv['per_request_tok_s_median'])} "
            f"| {fmt(lv['per_request_decode_tok_s_median'])} | {fmt(lv['ttft_median_s'], '.0f', 1e3)} "
            f"| {fmt(lv['ttft_p90_s'], '.0f', 1e3)} | {acc} |"
        )
    lines += ["", ACCEPT_NOTE]
    if any(lv["accept_length_source"] == "server_info" for lv in run["levels"]):
        lines += ["", "\\* server, cumulative: /server_info's avg_spec_accept_length since the server started."]
    return "\n".join(lines) + "\n"


ACCEPT_NOTE = (
    "accept length: output tokens per target verify step, sum(completion_tokens) / sum(spec_verify_ct) "
    "from /generate's meta_info; '-' when the server reports no speculative metrics (no speculative algorithm)."
)


def safe_name(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "run"


def benchmark(args) -> int:
    try:
        ep = Endpoint.parse(args.base_url, args.api_key)
        levels = parse_levels(args.concurrency)
        prompts = load_prompts(args.prompts)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    # Reachability: one cheap GET; SGLang serves /v1/models, /health and /server_info.
    try:
        status, models = ep.get_json("/v1/models", args.connect_timeout)
    except Unreachable as e:
        print(
            f"error: cannot reach a server at {args.base_url} ({e}).\n"
            "Start one first, e.g. `python -m sglang.launch_server --model-path MODEL --port 30000 "
            "[--speculative-algorithm ...]`, wait for 'The server is fired up', or pass --base-url.",
            file=sys.stderr,
        )
        return 2
    if args.model is None:
        data = (models or {}).get("data") if isinstance(models, dict) else None
        args.model = data[0]["id"] if status == 200 and data else "default"
    info = server_info(ep, args.connect_timeout)
    server = {k: info.get(k) for k in SERVER_KEYS if k in info} if info else None
    label = args.label or ((server or {}).get("speculative_algorithm") or ("AR" if server else "run"))

    # Warm-up: not measured, and a check that generation works with these settings.
    for _ in range(args.warmup):
        path, body = build_request(args.api, prompts[0], args)
        if args.api == "generate":
            body["sampling_params"]["max_new_tokens"] = min(args.max_new_tokens, 16)
        else:
            body["max_tokens"] = min(args.max_new_tokens, 16)
        res = RequestResult(index=-1, prompt_index=0)
        stream_one(ep, args.api, path, body, args.timeout, res, time.perf_counter())
        if not res.ok:
            print(f"error: the warm-up request to {args.base_url}{path} failed: {res.error}", file=sys.stderr)
            return 2

    os.makedirs(args.out, exist_ok=True)
    run = {
        "label": label,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "base_url": args.base_url,
        "settings": {
            "api": args.api,
            "model": args.model,
            "concurrency": levels,
            "num_prompts": args.num_prompts,
            "max_new_tokens": args.max_new_tokens,
            "temperature": args.temperature,
            "top_p": args.top_p,
            "ignore_eos": args.ignore_eos,
            "chatml": args.chatml,
            "prompts": args.prompts or f"embedded default ({len(DEFAULT_PROMPTS)} prompts)",
            "warmup": args.warmup,
            "timeout_s": args.timeout,
        },
        "server": server,
        "acceptance_note": ACCEPT_NOTE,
        "levels": [],
    }
    json_path = os.path.join(args.out, safe_name(label) + ".json")
    md_path = os.path.join(args.out, safe_name(label) + ".md")
    progress = not args.no_progress
    any_failed = False
    for c in levels:
        n = args.num_prompts or max(16, 4 * c)
        results, duration = run_level(ep, prompts, c, n, args, progress)
        acc = server_accept_length(server_info(ep, args.connect_timeout)) if info else None
        level = summarize(c, results, duration, acc)
        run["levels"].append(level)
        any_failed |= level["failed"] > 0
        print(
            f"concurrency {c:>3}: {level['completed']}/{n} ok, {fmt(level['output_tok_s'])} tok/s aggregate, "
            f"{fmt(level['per_request_decode_tok_s_median'])} decode tok/s per request, "
            f"TTFT median {fmt(level['ttft_median_s'], '.0f', 1e3)} ms, accept length {fmt(level['accept_length'], '.2f')}",
            file=sys.stderr,
        )
        for err in level["errors"]:
            print(f"  failed request: {err}", file=sys.stderr)
        # written after every level, so an interrupted run keeps what it measured
        with open(json_path, "w") as f:
            json.dump(run, f, indent=1)
        with open(md_path, "w") as f:
            f.write(run_markdown(run))
    print(run_markdown(run))
    print(f"wrote {json_path} and {md_path}", file=sys.stderr)
    return 1 if any_failed else 0


# ----------------------------------------------------------------------------------------------
# Comparing runs


COMPARE_METRICS = (
    ("output_tok_s", "aggregate output tok/s", ".1f", 1.0),
    ("per_request_decode_tok_s_median", "decode tok/s per request (median)", ".1f", 1.0),
    ("per_request_tok_s_median", "tok/s per request incl. TTFT (median)", ".1f", 1.0),
    ("ttft_median_s", "TTFT median (ms)", ".0f", 1e3),
    ("ttft_p90_s", "TTFT p90 (ms)", ".0f", 1e3),
    ("accept_length", "accept length (tokens per verify step)", ".2f", 1.0),
)


def load_runs(paths: list[str]) -> list[dict]:
    runs, seen = [], {}
    for p in paths:
        with open(p) as f:
            run = json.load(f)
        if "levels" not in run:
            raise ValueError(f"{p}: not a bench_serving result (no 'levels')")
        name = run.get("label") or os.path.splitext(os.path.basename(p))[0]
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:  # two runs with one label: keep them apart
            name = f"{name} ({os.path.splitext(os.path.basename(p))[0]})"
        run["_name"] = name
        runs.append(run)
    return runs


def compare_markdown(runs: list[dict]) -> str:
    levels = sorted({lv["concurrency"] for r in runs for lv in r["levels"]})
    by = [{lv["concurrency"]: lv for lv in r["levels"]} for r in runs]
    names = [r["_name"] for r in runs]
    out = ["# bench_serving comparison", ""]
    for r in runs:
        s, srv = r["settings"], r.get("server") or {}
        out.append(
            f"- **{r['_name']}**: {srv.get('model_path', 'unknown model')}, speculative algorithm "
            f"{srv.get('speculative_algorithm') or 'none'}, api `{s['api']}`, max_new_tokens {s['max_new_tokens']}, "
            f"temperature {s['temperature']}, {r['created']}"
        )
    for key, title, spec, scale in COMPARE_METRICS:
        out += ["", f"## {title}", "", "| concurrency | " + " | ".join(names) + " |", "|---:|" + "---:|" * len(names)]
        for c in levels:
            cells = []
            base = by[0].get(c, {}).get(key)
            for i, b in enumerate(by):
                v = b.get(c, {}).get(key)
                cell = fmt(v, spec, scale)
                if key.endswith("tok_s") and i > 0 and v is not None and base:
                    cell += f" ({v / base:.2f}x)"
                cells.append(cell)
            out.append(f"| {c} | " + " | ".join(cells) + " |")
    out += ["", f"Ratios in parentheses are against the first run ({names[0]}).", "", ACCEPT_NOTE]
    return "\n".join(out) + "\n"


def compare_plot(runs: list[dict], path: str) -> None:
    try:
        import matplotlib
    except ImportError:
        raise SystemExit(
            "error: --compare draws its plot with matplotlib, which is not installed: pip install matplotlib"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [COMPARE_METRICS[0], COMPARE_METRICS[1], COMPARE_METRICS[5], COMPARE_METRICS[3]]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    levels = sorted({lv["concurrency"] for r in runs for lv in r["levels"]})
    for ax, (key, title, _, scale) in zip(axes.flat, panels):
        for i, r in enumerate(runs):  # one colour per run in every panel, also where a run has no points
            pts = [(lv["concurrency"], lv[key] * scale) for lv in r["levels"] if lv.get(key) is not None]
            if pts:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, marker="o", label=r["_name"], color=f"C{i % 10}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels)
        ax.set_xticklabels([str(c) for c in levels])
        ax.set_xlabel("concurrency")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
    axes.flat[0].legend()
    fig.suptitle("bench_serving: " + " vs ".join(r["_name"] for r in runs))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def compare(args) -> int:
    try:
        runs = load_runs(args.compare)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, "compare" if args.label is None else safe_name(args.label))
    md = compare_markdown(runs)
    with open(stem + ".md", "w") as f:
        f.write(md)
    compare_plot(runs, stem + ".png")
    print(md)
    print(f"wrote {stem}.md and {stem}.png", file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------------------------
# CLI


def parse_levels(s: str) -> list[int]:
    try:
        levels = [int(x) for x in s.replace(" ", "").split(",") if x]
    except ValueError:
        raise ValueError(f"--concurrency must be comma-separated integers, got {s!r}") from None
    if not levels or min(levels) < 1:
        raise ValueError(f"--concurrency levels must be >= 1, got {s!r}")
    return levels


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="bench_serving.py",
        description=__doc__.split("\n\n", 1)[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g = p.add_argument_group("server")
    g.add_argument("--base-url", default="http://127.0.0.1:30000", help="server address (default %(default)s)")
    g.add_argument(
        "--api",
        choices=("generate", "chat", "completions"),
        default="generate",
        help="generate: SGLang's native /generate, which reports per-request acceptance (default); "
        "chat: /v1/chat/completions (the server applies the chat template); completions: /v1/completions. "
        "With chat/completions the acceptance shown is the server-wide cumulative value (see below)",
    )
    g.add_argument("--model", default=None, help="model name for chat/completions (default: the first of /v1/models)")
    g.add_argument("--api-key", default=None, help="sent as 'Authorization: Bearer KEY' (servers started with --api-key)")
    g.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds one request may take, and may stall between chunks (default %(default)s)",
    )
    g.add_argument(
        "--connect-timeout",
        type=float,
        default=10.0,
        help="seconds for the reachability check and /server_info (default %(default)s)",
    )
    g = p.add_argument_group("load")
    g.add_argument(
        "--concurrency",
        default=DEFAULT_CONCURRENCY,
        help="comma-separated concurrency levels, run in order (default %(default)s)",
    )
    g.add_argument(
        "--num-prompts", type=int, default=None, help="requests per concurrency level (default: max(16, 4 x concurrency))"
    )
    g.add_argument("--max-new-tokens", type=int, default=256, help="output tokens per request (default %(default)s)")
    g.add_argument("--temperature", type=float, default=0.0, help="sampling temperature; 0 is greedy (default %(default)s)")
    g.add_argument("--top-p", type=float, default=None, help="top-p (default: the server's)")
    g.add_argument(
        "--ignore-eos",
        action="store_true",
        help="keep generating past end-of-sequence, so every request outputs exactly --max-new-tokens "
        "(equal work per run; acceptance after EOS is not representative)",
    )
    g.add_argument(
        "--prompts",
        metavar="FILE",
        default=None,
        help="prompt set: .jsonl (one per line: a JSON string, or an object with 'prompt'/'text' or "
        "'messages') or text (one prompt per non-empty line). Default: an embedded set of "
        f"{len(DEFAULT_PROMPTS)} prompts from one line to several hundred words (questions, code, maths, prose, a passage "
        "to summarise). Requests cycle through the set in order",
    )
    g.add_argument(
        "--chatml",
        action="store_true",
        help="for generate/completions: wrap each prompt in a ChatML user turn (Qwen's chat format); "
        "message-list prompts are always rendered as ChatML when this is set, else their contents are joined",
    )
    g.add_argument(
        "--warmup", type=int, default=1, help="unmeasured warm-up requests before the first level (default %(default)s)"
    )
    g = p.add_argument_group("output")
    g.add_argument(
        "--label",
        default=None,
        help="run name, used for the file names LABEL.json / LABEL.md (default: the server's speculative "
        "algorithm, or AR); with --compare, the name of the comparison files (default: compare)",
    )
    g.add_argument("--out", default="bench_results", help="output directory (default %(default)s)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument(
        "--compare",
        nargs="+",
        metavar="RUN.json",
        default=None,
        help="do not benchmark: compare earlier runs, writing OUT/compare.md (tables per metric, ratios "
        "against the first run) and OUT/compare.png (aggregate and per-request tok/s, acceptance and "
        "TTFT vs concurrency; needs matplotlib)",
    )
    args = p.parse_args(argv)
    if args.num_prompts is not None and args.num_prompts < 1:
        p.error("--num-prompts must be >= 1")
    if args.max_new_tokens < 1:
        p.error("--max-new-tokens must be >= 1")
    if args.warmup < 0:
        p.error("--warmup must be >= 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.compare:
        return compare(args)
    return benchmark(args)


if __name__ == "__main__":
    sys.exit(main())
