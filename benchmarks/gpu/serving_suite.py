"""The workers under churn: a live SGLang server driven over HTTP with aborts, memory pressure and edge cases, its
completed requests judged against stock SGLang's greedy tokens, and the server checked for leaks and crashes.

    python3 benchmarks/gpu/serving_suite.py --site /tmp/site --sglang 0.5.11 [--requests 1000] [--concurrency 64]

(device call: carry [".whl"] from `bash benchmarks/gpu/fetch_wheels.sh RELEASE`, as for harness.py; about 2 minutes
a server on an H100.) Shipped tiny trained pair, TP=1, CUDA graphs up to batch --concurrency, radix cache on.

The workload (`workload`, fixed by --seed) mixes prompts of 1 to ~400 tokens (beyond the chunked-prefill size),
shared prefixes (radix hits), max_new_tokens 1, 2 and up to 96, EOS honoured, stop strings and stop token ids that
the tiny pair emits often, and min_new_tokens (ours refuse it at admission; stock honours it). Every request is
greedy. Requests go at up to --concurrency at once, so batch sizes pass between the captured graph sizes.

Servers: stock SGLang first, without aborts and with top-2 logprobs (the reference and its margins); then each of
ours with --abort-fraction of the requests aborted through /abort_request at a random time after they were sent.
One after another, a device call holds stock and one of ours; `--parallel` serves them all at once (each on its own
port; GPU and CPU shared), so one call holds stock and both of ours. `--speculative-algorithm` with no name serves
stock alone, and a later call's `--reference OUT` reuses it (same release, device, workload and stock arguments,
checked); `--runs` picks servers. Stock runs with ours' GDN state tracking (extra_buffer every 32 tokens), so that
prefills split alike.
Memory pressure: --max-total-tokens caps the KV pool far below what the concurrent requests need and
--conservativeness lets the scheduler admit past its estimate of the room, so SGLang retracts
requests and its radix cache evicts. SGLang 0.5.23 reserves each running request's decode room at admission and
never ran out of it here (no retraction at 12,288, 6,144 or 3,072 tokens with conservativeness 0.1): --test-retract
N runs ours' servers with SGLang's own SGLANG_TEST_RETRACT switch (its scheduler then retracts requests every N-th
step through the same `retract_decode` as a full pool; 0.5.11 and 0.5.23 both have it).

Verdict, per server of ours: every request it completed (finish reason length or stop) equals stock's tokens for
that request or differs first at a near tie of stock's logits (`verdict.judge`, the harness's rule); min_new_tokens
requests end refused with a message naming it; the churn happened (`unexercised`: a request ended aborted where
aborts were sent, a retraction, an eviction); afterwards, idle, the server still answers, its log has no traceback
or leak report, and SGLang's idle memory check ran (it raises on a leaked KV slot or request slot, which ends the
server: SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE, on by default). Retractions, evictions and idle checks are
counted in the server's processes by server_site/sitecustomize.py.

Sampled (--sampled N, default 16,000): N samples of one prompt at temperature 0.7 (requests of n = 64), from stock
and from each of ours; the tokens at output positions 0 and SAMPLED_LATER compared by a two-sample chi-square
(`chi_square`; a p-value below SAMPLED_P, fixed here, fails). 16,000 a side detects a 2% shift of probability mass
between two likely tokens (a CPU test shows it). No top-p here: at bf16 ours' verify and stock's decode differ in
the last bit of some logits, and where a token's cumulative probability sits that close to top-p, it is inside
one server's nucleus and outside the other's (a run at top-p 0.9 saw one: 2.3% of the mass moved, RESULTS); the
nucleus and top-k rules are checked on CPU against SGLang's rule (tests/test_sampling.py).

Kernels (--kernel-tests, on by default): beside the servers, pytest runs KERNEL_TESTS, every Triton kernel against
its reference at Qwen3.6-27B's TP=2 shapes; a failure, or a skip (a kernel not run), fails the suite.

Output under --out (default $OUT): serving_suite.log, report.md (the table, then every failed check by request),
reference.json, sglang.json and sglang.samples.json (stock's row, results and samples, for --reference),
servers.tar.gz (each server's <run>.server.log; ours' <run>.json, each request's result, and <run>.samples.json;
kernels.log).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
import verdict  # noqa: E402
from live_server import SERVE, healthy  # noqa: E402

DONE = ("length", "stop")  # finish reasons of a completed request
SAMPLING = dict(temperature=0.7, top_p=1.0, top_k=-1)  # no nucleus: see the module's docstring
SAMPLED_LATER = 4  # the later output position whose token distribution is compared
SAMPLED_P = 1e-3  # a two-sample chi-square p-value below this fails, fixed before any run
FAILURE_LINES = ("Traceback", "memory leak detected", "Mem Leak Detected")
# start-up tracebacks of optional parts the GPU image lacks (0.5.11's Responses API wants openai_harmony)
BENIGN_LINES = ("Can not initialize OpenAIServingResponses",)
KERNEL_TESTS = "tests/kernels/test_production_shapes.py"  # every Triton kernel at Qwen3.6-27B TP=2 shapes (GPU only)
SERVERS: set[subprocess.Popen] = set()  # live servers, stopped by `stop_servers` on SIGTERM (they run in own sessions)


def stop_servers(*_) -> None:
    """SIGTERM (a device call's timeout): kill the servers first (requests in flight would hold `serve`'s finally
    until they time out), then exit."""
    for server in list(SERVERS):
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
    sys.exit(143)


@dataclass
class Request:
    rid: str
    input_ids: list[int]
    sampling_params: dict
    kind: str
    abort_after: float | None = None  # seconds after sending (ours only)


@dataclass
class Result:
    rid: str
    output_ids: list[int] | None = None
    finish: str | None = None  # SGLang's finish_reason type ("length", "stop", "abort") or "http <code>"
    message: str = ""
    margins: list[float] | None = None
    aborted: bool = False  # /abort_request was sent


def workload(n: int, seed: int, prompts: list[list[int]], stop_string: str, stop_token: int) -> list[Request]:
    """n greedy requests over `prompts` (token ids), kinds in turn; the same for every server given the same seed."""
    rng = random.Random(seed)
    base = max(prompts, key=len)
    kinds = ("plain", "max1", "max2", "eos", "stop_str", "stop_id", "prefix", "plain", "min_new", "long")
    out = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        ids = list(rng.choice(prompts))
        params = dict(temperature=0.0, max_new_tokens=rng.randint(3, 96), ignore_eos=True)
        if kind == "max1" or kind == "max2":
            params["max_new_tokens"] = int(kind[-1])
        elif kind == "eos":
            params["ignore_eos"] = False
        elif kind == "stop_str":
            params["stop"] = [stop_string]
        elif kind == "stop_id":
            params["stop_token_ids"] = [stop_token]
        elif kind == "min_new":
            params["min_new_tokens"] = 4
        elif kind == "prefix":
            ids = base + ids
        elif kind == "long":
            ids = base + base
        out.append(Request(f"suite-{i:06d}", ids, params, kind))  # one width: SGLang aborts rids by prefix
    return out


def with_aborts(requests: list[Request], fraction: float, seed: int, window: float) -> list[Request]:
    """A copy of requests with about `fraction` of them aborted at a uniform time in [0, window) s after sending."""
    rng = random.Random(seed + 1)
    return [Request(**{**asdict(r), "abort_after": rng.uniform(0, window) if rng.random() < fraction else None})
            for r in requests]  # fmt: skip


def post(url: str, body: dict, timeout: float) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read() or b"{}")


def send(url: str, r: Request, margins: bool, timeout: float) -> Result:
    """One non-streamed /generate; an /abort_request for it at r.abort_after."""
    body = dict(rid=r.rid, input_ids=r.input_ids, sampling_params=r.sampling_params)
    if margins:
        body.update(return_logprob=True, top_logprobs_num=2)
    result = Result(r.rid)
    timer = None
    if r.abort_after is not None:

        def abort():  # noqa: E306
            result.aborted = True
            try:
                post(f"{url}/abort_request", dict(rid=r.rid), timeout=30)
            except OSError:
                pass

        timer = threading.Timer(r.abort_after, abort)
        timer.start()
    try:
        answer = post(f"{url}/generate", body, timeout)
    except urllib.error.HTTPError as e:  # SGLang answers an aborted or refused request with an error status
        result.finish, result.message = f"http {e.code}", e.read().decode(errors="replace")[:500]
        return result
    except OSError as e:
        result.finish, result.message = "no answer", f"{type(e).__name__}: {e}"
        return result
    finally:
        if timer is not None:
            timer.cancel()
    meta = answer.get("meta_info", {})
    reason = meta.get("finish_reason") or {}
    result.output_ids, result.finish = answer.get("output_ids"), reason.get("type")
    result.message = str(reason.get("message", ""))
    if margins and meta.get("output_top_logprobs"):
        result.margins = verdict.top2_margins(meta["output_top_logprobs"])
    return result


def drive(url: str, requests: list[Request], concurrency: int, margins: bool, timeout: float, log: h.Log) -> list[Result]:
    """Every request, up to concurrency at once; a progress line each 100 answers (a call cut short says how far)."""
    answered = itertools.count(1)

    def one(r: Request) -> Result:
        result = send(url, r, margins, timeout)
        if (n := next(answered)) % 100 == 0:
            log.stamp(f"  {n} / {len(requests)} answered")
        return result

    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(one, requests))


def sampled(url: str, prompt: list[int], n: int, concurrency: int, timeout: float) -> list[list[int]]:
    """n sampled continuations of prompt (SAMPLING, SAMPLED_LATER + 1 tokens, EOS ignored), in requests of n = 64."""
    params = dict(SAMPLING, max_new_tokens=SAMPLED_LATER + 1, ignore_eos=True, n=64)

    def one(i: int) -> list[list[int]]:
        try:
            answer = post(f"{url}/generate", dict(input_ids=prompt, sampling_params=params), timeout)
        except OSError:
            return []
        answers = answer if isinstance(answer, list) else [answer]
        return [a["output_ids"] for a in answers if len(a.get("output_ids") or []) > SAMPLED_LATER]

    with ThreadPoolExecutor(min(concurrency, 8)) as pool:
        return [o for part in pool.map(one, range(-(-n // 64))) for o in part][:n]


def chi_square(a: list[int], b: list[int], min_expected: float = 5.0) -> tuple[float, int, float]:
    """Two-sample chi-square of the token counts of samples a and b (categories expected fewer than min_expected
    times on either side pooled into one) -> (statistic, degrees of freedom, p-value)."""
    import torch

    tokens = sorted(set(a) | set(b))
    counts = torch.tensor([[a.count(t) for t in tokens], [b.count(t) for t in tokens]], dtype=torch.float64)
    expected = counts.sum(1, keepdim=True) * counts.sum(0, keepdim=True) / counts.sum()
    rare = (expected < min_expected).any(0)
    if rare.any():
        counts = torch.cat([counts[:, ~rare], counts[:, rare].sum(1, keepdim=True)], 1)
        expected = counts.sum(1, keepdim=True) * counts.sum(0, keepdim=True) / counts.sum()
    keep = expected.min(0).values > 0
    counts, expected = counts[:, keep], expected[:, keep]
    stat, dof = float(((counts - expected) ** 2 / expected).sum()), counts.shape[1] - 1
    if dof < 1:
        return stat, 0, 1.0
    p = float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64), torch.tensor(stat / 2, dtype=torch.float64)))
    return stat, dof, p


def sampled_verdict(ours: list[list[int]], stock: list[list[int]]) -> tuple[bool, str]:
    """Chi-square at output positions 0 and SAMPLED_LATER; passes if both p-values are >= SAMPLED_P."""
    if not ours or not stock:
        return False, "no samples"
    parts, ok = [], True
    for pos in (0, SAMPLED_LATER):
        stat, dof, p = chi_square([o[pos] for o in ours], [o[pos] for o in stock])
        ok &= p >= SAMPLED_P
        parts.append(f"@{pos}: chi2 {stat:.1f}, dof {dof}, p {p:.3g}")
    return ok, f"{len(ours)} vs {len(stock)} samples; " + "; ".join(parts)


def counters(folder: Path) -> dict:
    """Totals of the counters' event lines (server_site/sitecustomize.py) under folder."""
    totals = dict(retractions=0, evicted_tokens=0, evicted_states=0, idle_checks=0)
    for path in folder.glob("*.log"):
        for line in path.read_text().splitlines():
            kind, *values = line.split()
            if kind == "retract":
                totals["retractions"] += int(values[0])
            elif kind == "evict":
                totals["evicted_tokens"] += int(values[0])
                totals["evicted_states"] += int(values[1])
            elif kind == "idle_check":
                totals["idle_checks"] += 1
    return totals


def judge(requests: list[Request], ours: list[Result], stock: list[Result]) -> dict:
    """Counts and the lossless verdict of one server of ours against stock's results (same order as requests)."""
    c = dict(requests=len(requests), completed=0, aborts_sent=0, aborted=0, refused=0, errors=[], wrong_refusals=0)
    pairs = []
    for r, a, s in zip(requests, ours, stock):
        c["aborts_sent"] += a.aborted
        if r.kind == "min_new":  # ours must refuse it at admission, naming the parameter
            refused = a.finish in ("abort", "http 400") and "min_new_tokens" in a.message
            c["refused"] += refused
            c["wrong_refusals"] += not refused and not a.aborted
            continue
        if a.finish in DONE:
            c["completed"] += 1
            if s.finish in DONE:
                pairs.append((a.output_ids, s.output_ids, s.margins, f"{r.rid} ({r.kind}, {a.finish}, stock {s.finish})"))
            else:
                c["errors"].append(f"{r.rid}: stock did not complete ({s.finish} {s.message[:80]})")
        elif a.aborted and (a.finish == "abort" or (a.finish or "").startswith("http")):
            c["aborted"] += 1
        else:
            c["errors"].append(f"{r.rid} ({r.kind}): {a.finish} {a.message[:120]}")
    v = verdict.judge([p[0] for p in pairs], [p[1] for p in pairs], [p[2] or [] for p in pairs], [p[3] for p in pairs])
    c["verdict"] = v
    c["mismatches"] = len(v.failures)
    return c


def start_kernel_tests(out: Path) -> subprocess.Popen:
    """KERNEL_TESTS under pytest beside the servers (at most about 4.5 GiB of GPU memory), into out/kernels.log."""
    with open(out / "kernels.log", "w") as f:
        return subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", KERNEL_TESTS], cwd=h.REPO,
                                stdout=f, stderr=subprocess.STDOUT)  # fmt: skip


def kernel_verdict(tests: subprocess.Popen, out: Path) -> tuple[bool, str]:
    """(passed, pytest's summary line): passed only if pytest exited 0 with nothing skipped (a skip here is a kernel
    not run at its production shape, e.g. no GPU)."""
    code = tests.wait()
    lines = [line.strip("= ") for line in (out / "kernels.log").read_text(errors="replace").splitlines() if line.strip()]
    summary = lines[-1] if lines else "no output"
    return code == 0 and "skipped" not in summary and "passed" in summary, f"{summary} (exit {code})"


def serving_kwargs(args, port: int) -> dict:
    """What every server of the suite runs with beyond the harness's engine arguments, in the release's spelling."""
    return h.spelled(args, dict(cuda_graph_max_bs=args.concurrency, max_running_requests=args.concurrency,
                                max_total_tokens=args.max_total_tokens, chunked_prefill_size=args.chunked_prefill_size,
                                schedule_conservativeness=args.conservativeness, skip_tokenizer_init=False,
                                host="127.0.0.1", port=port, grammar_backend="none"))  # fmt: skip


def server_env(run: h.SGLangRun, env: dict, counters: Path, test_retract: int, log: h.Log) -> dict:
    """run's server environment: the counters' folder (server_site is on its path: h.sglang_env) and, for ours with
    --test-retract N, SGLang's retraction every N-th step."""
    env = dict(run.environ(env, log), SERVING_COUNTERS=str(counters))
    if test_retract and run.name != h.STOCK:
        env.update(SGLANG_TEST_RETRACT="1", SGLANG_TEST_RETRACT_INTERVAL=str(test_retract))
    return env


def serve(run: h.SGLangRun, env: dict, out: Path, work: Path, args, log: h.Log, requests, margins: bool) -> dict:
    """Start run's server, drive the requests, idle, check it, stop it. Returns its counts (no 'verdict' yet)."""
    url = f"http://127.0.0.1:{run.engine_kwargs['port']}"
    folder = work / f"counters-{run.name}"
    env = server_env(run, env, folder, args.test_retract, log)
    server_log = out / f"{run.name}.server.log"
    state = dict(up=False, alive_after=False, answered_after=False, failure_lines=[])
    if healthy(url):  # a server left from an earlier run would answer in place of this one
        log.stamp(f"{run.name}: something already answers at {url}; not started")
        return dict(state, results=[], busy=True)
    with open(server_log, "w") as f:
        server = subprocess.Popen([sys.executable, "-c", SERVE, json.dumps(run.engine_kwargs)], env=env, stdout=f,
                                  stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        SERVERS.add(server)
        try:
            t0 = time.time()
            while not healthy(url):
                if server.poll() is not None or time.time() - t0 > args.start_timeout:
                    log.stamp(f"{run.name}: server not up (exit {server.poll()}); see {server_log.name}")
                    return dict(state, results=[])
                time.sleep(2)
            state["up"] = True
            log.stamp(f"{run.name}: up in {time.time() - t0:.0f} s; {len(requests)} requests at {args.concurrency}")
            t0 = time.time()
            results = drive(url, requests, args.concurrency, margins, args.request_timeout, log)
            if args.sampled:
                t1 = time.time()
                state["samples"] = sampled(url, requests[0].input_ids, args.sampled, args.concurrency, args.request_timeout)
                log.stamp(f"{run.name}: {len(state['samples'])} samples in {time.time() - t1:.0f} s")
            log.stamp(f"{run.name}: driven in {time.time() - t0:.0f} s; idle {args.idle:.0f} s")
            time.sleep(args.idle)  # the scheduler's idle memory check runs
            state["alive_after"] = server.poll() is None and healthy(url)
            probe = send(url, Request("suite-after", requests[0].input_ids, dict(temperature=0.0, max_new_tokens=8),
                                      "after"), False, 60)  # fmt: skip
            state["answered_after"] = probe.finish in DONE
        finally:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGKILL)
            server.wait()
            SERVERS.discard(server)
    text = server_log.read_text(errors="replace")
    failing = [line for line in text.splitlines() if any(k in line for k in FAILURE_LINES)]
    state["failure_lines"] = [line for line in failing if not any(k in line for k in BENIGN_LINES)][:5]
    state.update(counters(folder))
    (out / f"{run.name}.json").write_text(json.dumps([asdict(r) for r in results]))
    (out / f"{run.name}.samples.json").write_text(json.dumps(state.get("samples", [])))
    return dict(state, results=results)


def serve_all(runs: list[h.SGLangRun], serve_one, parallel: bool) -> dict[str, dict]:
    """Each run's `serve_one(run)` row by name: one server after another, or (parallel) every server at once on the
    GPU, each on its own port, counters folder and log (the verdict compares tokens, which sharing the GPU does not
    change; retraction and abort counts do change with the timing)."""
    if not parallel:
        return {run.name: serve_one(run) for run in runs}
    with ThreadPoolExecutor(max_workers=max(1, len(runs))) as pool:
        futures = {run.name: pool.submit(serve_one, run) for run in runs}
        return {name: f.result() for name, f in futures.items()}


def reference_key(args, stock: h.SGLangRun, requests: list[Request]) -> dict:
    """What a stock reference must share with this run to be reused: the release, the device, the requests (a
    digest of their ids, tokens and parameters), the sampling and stock's server arguments (its number of samples is
    checked apart: `load_reference`). As JSON reads it back."""
    try:
        query = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]
        device = subprocess.run(query, capture_output=True, text=True, check=True).stdout.splitlines()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        device = "unknown"
    server = {k: v for k, v in stock.engine_kwargs.items() if k != "port"}
    digest = hashlib.sha256(json.dumps([(r.rid, r.input_ids, r.sampling_params) for r in requests]).encode()).hexdigest()
    key = dict(sglang=args.sglang, device=device, requests=digest, sampling=SAMPLING, server=server)
    return json.loads(json.dumps(key))


def load_reference(folder: Path, key: dict, samples: int) -> dict:
    """Stock's row from an earlier call's --out (its results and its first `samples` samples), refused unless its key
    matches and it holds that many samples."""
    saved = json.loads((folder / "reference.json").read_text())
    if saved["key"] != key:
        raise SystemExit(f"serving_suite: --reference {folder} was made for {saved['key']}, this run is {key}")
    drawn = json.loads((folder / f"{h.STOCK}.samples.json").read_text())
    if len(drawn) < samples:
        raise SystemExit(f"serving_suite: --reference {folder} holds {len(drawn)} samples, --sampled asks {samples}")
    results = [Result(**r) for r in json.loads((folder / f"{h.STOCK}.json").read_text())]
    return dict(saved["row"], results=results, samples=drawn[:samples])


def unexercised(c: dict) -> list[str]:
    """What of the churn one of ours' servers never saw (it then proves nothing about it): no request ended aborted
    though aborts were sent, no retraction, no eviction."""
    missing = [("aborts_sent", "aborted", "no request ended aborted"), (None, "retractions", "no retraction"),
               (None, "evicted_tokens", "no radix-cache eviction")]  # fmt: skip
    return [f"not exercised: {why}" for sent, key, why in missing if (sent is None or c[sent]) and not c[key]]


def report(rows: dict[str, dict], args, kernels: tuple[bool, str] | None = None) -> tuple[str, bool]:
    head = ["| server | requests | completed | aborts sent / ended aborted | min_new refused | mismatches | errors "
            "| retractions | evicted tokens / states | idle checks | alive after, answers | crash or leak lines | sampled |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    ok = bool(rows.get(h.STOCK, {}).get("results"))  # no reference, no verdict
    ok &= not args.speculative_algorithm or len(rows) > 1  # ours asked for: at least one judged
    for name, c in rows.items():
        if name != h.STOCK and "verdict" not in c:
            ok = False
            why = "port already answers" if c.get("busy") else "server not up" if not c.get("up") else "no reference"
            head.append(f"| {name} | not judged: {why} |" + " |" * 11)
            continue
        if name == h.STOCK:
            head.append(f"| {name} (reference) | {args.requests} | {sum(r.finish in DONE for r in c['results'])} | - | - "
                        f"| - | - | {c.get('retractions', '-')} | {c.get('evicted_tokens', '-')} / "
                        f"{c.get('evicted_states', '-')} | {c.get('idle_checks', '-')} | {c['alive_after']}, "
                        f"{c['answered_after']} | {len(c['failure_lines'])} | {len(c.get('samples', []))} samples |")  # fmt: skip
            continue
        sampled_ok, sampled_text = c.get("sampled", (True, "-"))
        good = (c["verdict"].ok and not c["errors"] and not c["wrong_refusals"] and c["alive_after"]
                and c["answered_after"] and not c["failure_lines"] and c["idle_checks"] > 0 and sampled_ok
                and not unexercised(c))  # fmt: skip
        ok &= good
        head.append(f"| {name} | {c['requests']} | {c['completed']} | {c['aborts_sent']} / {c['aborted']} | "
                    f"{c['refused']} | {c['mismatches']} | {len(c['errors'])} | {c['retractions']} | "
                    f"{c['evicted_tokens']} / {c['evicted_states']} | {c['idle_checks']} | {c['alive_after']}, "
                    f"{c['answered_after']} | {len(c['failure_lines'])} | "
                    f"{'' if sampled_ok else 'FAILED: '}{sampled_text} |")  # fmt: skip
    notes = [f"- {name}: {line}" for name, c in rows.items() if "verdict" in c
             for line in c["verdict"].failures + c["errors"] + c["failure_lines"] + unexercised(c)]  # fmt: skip
    if kernels is not None:
        ok &= kernels[0]
        head += ["", f"Kernels at Qwen3.6-27B TP=2 shapes (`{KERNEL_TESTS}`): {'' if kernels[0] else 'FAILED: '}{kernels[1]}"]
    return "\n".join(head + ([""] + notes if notes else [])), ok


def pack(out: Path, names: list[str]) -> None:
    """The servers' files into servers.tar.gz, but stock's results and samples (`load_reference` reads them): a
    device call returns 8 files."""
    files = [f for n in names for f in (out / f"{n}.json", out / f"{n}.samples.json", out / f"{n}.server.log")
             if f.exists() and not (n == h.STOCK and f.suffix == ".json")]  # fmt: skip
    files += [f for f in [out / "kernels.log"] if f.exists()]
    with tarfile.open(out / "servers.tar.gz", "w:gz") as tar:
        for f in files:
            tar.add(f, arcname=f.name)
    for f in files:
        f.unlink()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--site", type=Path, required=True, help="install the carried wheels here (as harness.py)")
    p.add_argument("--sglang", choices=h.RELEASES, default=h.RELEASES[0], help="the release of the carried wheels")
    p.add_argument("--speculative-algorithm", nargs="*", default=["DDTREE", "DFLASH_CHAIN"],
                   help="ours to test (none: stock alone, e.g. to make a --reference)")  # fmt: skip
    p.add_argument("--budgets", default="15", help="DDTREE budgets")
    p.add_argument("--also-no-overlap", action="store_true",
                   help="each of ours once more with --disable-overlap-schedule (0.5.23 only)")  # fmt: skip
    p.add_argument("--runs", default=None,
                   help="only these servers, comma-separated (as harness.py names them, e.g. sglang-ddtree15-nooverlap); "
                        "stock is served too unless --reference")  # fmt: skip
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=64, help="requests in flight at once (and the largest graph)")
    p.add_argument("--abort-fraction", type=float, default=0.2)
    p.add_argument("--abort-window", type=float, default=1.0, help="aborts land up to this many seconds after sending")
    p.add_argument("--max-total-tokens", type=int, default=6144, help="the KV pool's size: small, so SGLang retracts")
    p.add_argument("--chunked-prefill-size", type=int, default=128)
    p.add_argument("--conservativeness", type=float, default=0.3,
                   help="SGLang's --schedule-conservativeness: below 1 it admits past its estimate of the KV room, so "
                        "decoding runs out of KV slots and SGLang retracts requests (at 1 the first run saw none)")  # fmt: skip
    p.add_argument("--test-retract", type=int, default=0, metavar="N",
                   help="ours' servers retract requests every N-th step (SGLang's SGLANG_TEST_RETRACT switch; 0: off, only "
                        "a full pool retracts)")  # fmt: skip
    p.add_argument("--sampled", type=int, default=16000, help="samples a side for the chi-square check (0: none)")
    p.add_argument("--idle", type=float, default=15, help="seconds idle after the load, for SGLang's idle check")
    p.add_argument("--request-timeout", type=float, default=300)
    p.add_argument("--start-timeout", type=float, default=300)
    p.add_argument("--port", type=int, default=30100)
    p.add_argument(
        "--parallel",
        action="store_true",
        help="serve stock and each of ours at once (one device call holds them all; timing-dependent counts "
        "such as retractions then differ from a run alone)",
    )
    p.add_argument("--kernel-tests", action=argparse.BooleanOptionalAction, default=True,
                   help=f"run {KERNEL_TESTS} beside the servers; a failure or skip fails the suite")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--work", type=Path, default=Path("/tmp/sglang_dflash_suite"))
    p.add_argument("--reference", type=Path, default=None,
                   help="reuse stock's results from this earlier --out of the same release, device and workload "
                        "instead of serving stock again (a device call is too short for stock and two of ours)")  # fmt: skip
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, stop_servers)
    if not 0 <= args.abort_fraction <= 1 or args.requests < 1 or args.concurrency < 1:
        p.error("--abort-fraction in [0, 1], --requests and --concurrency >= 1")
    hargs = h.parse_args(["--site", str(args.site), "--sglang", args.sglang, "--work", str(args.work), "--pair", "shipped",
                          "--radix-cache", "--budgets", args.budgets, "--speculative-algorithm", *args.speculative_algorithm]
                         + (["--also-no-overlap"] if args.also_no_overlap else [])
                         + (["--runs", ",".join([h.STOCK, *args.runs.split(",")])] if args.runs else []))  # fmt: skip
    out = args.out or Path(os.environ.get("OUT") or args.work / "out")
    out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    log = h.Log(out / "serving_suite.log")
    tests = start_kernel_tests(out) if args.kernel_tests else None
    install = h.install_wheels(args.site, args.sglang, log)
    target, draft = h.build_checkpoints(args.work, hargs, log)
    h.finish_install(install, log)
    env = h.sglang_env(args.site, hargs.sglang_dtype, log)

    tokenizer = h.shipped_tokenizer()
    requests = workload(args.requests, args.seed, h.text_prompts(40, args.seed), "\n\n", tokenizer.token_to_id(":") or 0)
    runs = h.sglang_runs(hargs, target, draft)
    unknown = set(args.runs.split(",") if args.runs else ()) - {r.name for r in runs}
    if unknown:
        p.error(f"--runs {', '.join(sorted(unknown))}: not among {', '.join(r.name for r in runs)}")
    for i, run in enumerate(runs):
        run.engine_kwargs.update(serving_kwargs(args, args.port + i))
    rows = {}
    if args.reference:
        rows[h.STOCK] = load_reference(args.reference, reference_key(args, runs[0], requests), args.sampled)
        log.stamp(f"{h.STOCK}: reference from {args.reference}")
        runs = [r for r in runs if r.name != h.STOCK]
    loads = {r.name: requests if r.name == h.STOCK else with_aborts(requests, args.abort_fraction, args.seed,
                                                                     args.abort_window) for r in runs}  # fmt: skip
    served = serve_all(runs, lambda run: serve(run, env, out, args.work, args, log, loads[run.name],
                                                      margins=run.name == h.STOCK), args.parallel)  # fmt: skip
    for run in runs:
        stock = run.name == h.STOCK
        load, rows[run.name] = loads[run.name], served[run.name]
        if stock and rows[run.name]["results"]:
            row = {k: v for k, v in rows[run.name].items() if k not in ("results", "samples")}
            (out / "reference.json").write_text(json.dumps(dict(key=reference_key(args, run, requests), row=row)))
        if not stock and rows[run.name]["results"] and rows[h.STOCK]["results"]:
            rows[run.name].update(judge(load, rows[run.name]["results"], rows[h.STOCK]["results"]))
            if args.sampled and run.name == h.BUILTIN and env.get("HARNESS_NO_SAMPLING_JIT") == "1":
                rows[run.name]["sampled"] = (True, "not judged: SGLang's DFLASH ran without its sampling-verify kernel")
            elif args.sampled:
                rows[run.name]["sampled"] = sampled_verdict(rows[run.name].get("samples"), rows[h.STOCK].get("samples"))
                log.stamp(f"{run.name}: sampled {rows[run.name]['sampled'][1]}")
            log.stamp(f"{run.name}: {rows[run.name]['verdict'].summary()[:300]}")
            for line in rows[run.name]["errors"][:5]:
                log.stamp(f"  {line}")
    kernels = kernel_verdict(tests, out) if tests else None
    if kernels:
        log.stamp(f"kernels at production shapes: {kernels[1]}")
    table, ok = report(rows, args, kernels)
    (out / "report.md").write_text(table + "\n\n" + ("PASSED" if ok else "FAILED") + "\n")
    print(table)
    pack(out, [r.name for r in runs])
    log.stamp("serving suite: " + ("PASSED" if ok else "FAILED: see report.md and the server logs"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
