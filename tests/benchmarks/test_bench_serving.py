"""benchmarks/bench_serving.py against a fake SGLang server with known timing and acceptance.

The fake (HTTP/1.1 with chunked streams, as uvicorn sends them) serves /v1/models, /server_info,
/generate (SGLang's native stream: cumulative chunks, speculative metrics in the final meta_info,
as tokenizer_manager._calculate_spec_decoding_metrics writes them) and /v1/chat/completions
(OpenAI stream with a usage chunk, no speculative fields). Each request: prefill of PREFILL_S
under one global lock (so concurrent requests queue for their first token), then one chunk per
verify step every STEP_S, each carrying A tokens, where A is the `accept=A` tag in the prompt.
"""

from __future__ import annotations

import copy
import json
import re
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from paths import ROOT

SCRIPT = ROOT / "benchmarks" / "bench_serving.py"

PREFILL_S = 0.04
STEP_S = 0.01
DRAFT_TOKENS = 4  # speculative_num_draft_tokens the fake reports
SERVER_ACCEPT = 2.5  # the fake's /server_info avg_spec_accept_length


def schedule(n_tokens: int, a: int) -> list[int]:
    """Tokens per streamed chunk: 1 from prefill, then verify steps of up to `a` tokens."""
    steps, left = [1], n_tokens - 1
    while left > 0:
        steps.append(min(a, left))
        left -= steps[-1]
    return steps


class FakeSGLang:
    def __init__(self):
        self.prefill_lock = threading.Lock()
        self.requests: list[tuple[str, dict]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _json(self, status, obj):
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _sse(self, obj):
                # HTTP/1.1 chunked, as uvicorn streams; each event split over two chunks mid-line
                data = obj if isinstance(obj, str) else json.dumps(obj)
                event = b"data: " + data.encode() + b"\n\n"
                for part in (event[:7], event[7:]):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.flush()

            def do_GET(self):
                if self.path == "/v1/models":
                    self._json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
                elif self.path == "/server_info":
                    self._json(
                        200,
                        {
                            "model_path": "fake/model",
                            "speculative_algorithm": "DFLASH",
                            "speculative_num_draft_tokens": DRAFT_TOKENS,
                            "tp_size": 1,
                            "version": "fake",
                            "internal_states": [{"avg_spec_accept_length": SERVER_ACCEPT}],
                        },
                    )
                else:
                    self._json(404, {"detail": "Not Found"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append((self.path, body))
                if self.path == "/generate":
                    text, n = body["text"], body["sampling_params"]["max_new_tokens"]
                elif self.path == "/v1/chat/completions":
                    text, n = body["messages"][-1]["content"], body["max_tokens"]
                else:
                    return self._json(404, {"detail": "Not Found"})
                if "FAIL" in text:
                    return self._json(500, {"object": "error", "message": "fake failure"})
                a = int(re.search(r"accept=(\d+)", text).group(1))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                if self.path == "/generate":
                    self._generate(n, a)
                else:
                    self._chat(n, a)
                self.wfile.write(b"0\r\n\r\n")

            def _generate(self, n, a):
                ids, steps = [], schedule(n, a)
                with fake.prefill_lock:
                    time.sleep(PREFILL_S)
                for k, m in enumerate(steps):
                    if k:
                        time.sleep(STEP_S)
                    ids += list(range(len(ids), len(ids) + m))
                    meta = {"id": "r", "finish_reason": None, "prompt_tokens": 11, "completion_tokens": len(ids)}
                    if k == len(steps) - 1:  # as tokenizer_manager writes it on the finished request
                        verify = len(steps) - 1
                        accepted = (n - 1) - verify
                        meta.update(
                            finish_reason={"type": "length", "length": n},
                            e2e_latency=0.1,
                            spec_accept_rate=accepted / (verify * (DRAFT_TOKENS - 1)),
                            spec_accept_length=n / verify,
                            spec_accept_token_num=accepted,
                            spec_draft_token_num=verify * (DRAFT_TOKENS - 1),
                            spec_verify_ct=verify,
                        )
                    self._sse({"text": "t" * len(ids), "output_ids": list(ids), "meta_info": meta})
                self._sse("[DONE]")

            def _chat(self, n, a):
                head = {"id": "c", "object": "chat.completion.chunk", "model": "fake-model"}
                # a role-only chunk before any token: must not count as the first token
                self._sse({**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}], "usage": None})
                with fake.prefill_lock:
                    time.sleep(PREFILL_S)
                steps = schedule(n, a)
                for k, m in enumerate(steps):
                    if k:
                        time.sleep(STEP_S)
                    fr = "length" if k == len(steps) - 1 else None
                    delta = {"content": "tok " * m}
                    self._sse({**head, "choices": [{"index": 0, "delta": delta, "finish_reason": fr}], "usage": None})
                usage = {"prompt_tokens": 11, "completion_tokens": n, "total_tokens": 11 + n}
                self._sse({**head, "choices": [], "usage": usage})
                self._sse("[DONE]")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def bench(*args, timeout=60):
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--no-progress", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def fake():
    f = FakeSGLang()
    yield f
    f.close()


@pytest.fixture(scope="module")
def prompts_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("prompts") / "prompts.jsonl"
    lines = [
        {"prompt": "accept=1 a short question"},
        "accept=2 a bare JSON string prompt",
        {"messages": [{"role": "user", "content": "accept=3 a chat-style prompt"}]},
    ]
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return p


N_NEW = 7
# per prompt (accept=1, 2, 3): verify steps for 7 tokens, ideal latency, ideal decode tok/s
VERIFY = [len(schedule(N_NEW, a)) - 1 for a in (1, 2, 3)]  # [6, 3, 2]
LATENCY = [PREFILL_S + v * STEP_S for v in VERIFY]
DECODE = [(N_NEW - 1) / (v * STEP_S) for v in VERIFY]


@pytest.fixture(scope="module")
def generate_run(fake, prompts_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("gen")
    n_before = len(fake.requests)
    r = bench(
        "--base-url", fake.url, "--concurrency", "1,3", "--num-prompts", 6, "--max-new-tokens", N_NEW,
        "--prompts", prompts_file, "--label", "fake DFLASH", "--out", out,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return json.loads((out / "fake_DFLASH.json").read_text()), out, fake.requests[n_before:], r


def test_generate_counts_and_acceptance(generate_run):
    run, out, sent, _ = generate_run
    assert run["label"] == "fake DFLASH"
    assert run["server"]["speculative_algorithm"] == "DFLASH" and run["server"]["model_path"] == "fake/model"
    assert [lv["concurrency"] for lv in run["levels"]] == [1, 3]
    # 1 warm-up + 2 levels x 6, all to /generate, streaming, with the asked sampling parameters
    assert len(sent) == 13 and all(p == "/generate" and b["stream"] for p, b in sent)
    assert sent[1][1]["sampling_params"] == {"max_new_tokens": N_NEW, "temperature": 0.0, "ignore_eos": False}
    assert sent[3][1]["text"] == "accept=3 a chat-style prompt"  # a message list, joined (no --chatml)
    for lv in run["levels"]:
        assert (lv["num_requests"], lv["completed"], lv["failed"]) == (6, 6, 0)
        assert lv["output_tokens"] == 6 * N_NEW and lv["prompt_tokens"] == 6 * 11
        reqs = lv["requests"]
        assert [q["prompt_index"] for q in reqs] == [0, 1, 2, 0, 1, 2]
        for q in reqs:
            assert q["completion_tokens"] == N_NEW
            assert q["spec_verify_ct"] == VERIFY[q["prompt_index"]]
            assert q["spec_accept_length"] == pytest.approx(N_NEW / VERIFY[q["prompt_index"]])
            assert q["finish_reason"] == "length"
        # pooled: sum(completion_tokens) / sum(spec_verify_ct), not the mean of per-request ratios
        assert lv["accept_length"] == pytest.approx(6 * N_NEW / (2 * sum(VERIFY)))
        assert lv["accept_length_source"] == "meta_info"
        accepted = 2 * sum((N_NEW - 1) - v for v in VERIFY)
        assert lv["accept_rate"] == pytest.approx(accepted / (2 * sum(VERIFY) * (DRAFT_TOKENS - 1)))
        assert lv["server_avg_accept_length_cumulative"] == SERVER_ACCEPT
    md = (out / "fake_DFLASH.md").read_text()
    assert "| 1 | 6 (0) | 42 |" in md and f"| {6 * N_NEW / (2 * sum(VERIFY)):.2f} |" in md


def test_generate_timing(generate_run):
    run, *_ = generate_run
    c1, c3 = run["levels"]
    for lv in run["levels"]:
        for q in lv["requests"]:
            # the first token cannot come before the prefill sleep, nor the last before all steps
            assert PREFILL_S * 0.95 <= q["ttft_s"] < q["latency_s"]
            assert q["latency_s"] >= LATENCY[q["prompt_index"]] * 0.95
    # concurrency 1: requests run back to back, so the level takes at least the sum of latencies
    ideal = 6 * N_NEW / (2 * sum(LATENCY))
    assert 0.3 * ideal < c1["output_tok_s"] <= 1.05 * ideal
    assert c1["ttft_median_s"] < PREFILL_S + 0.1
    ideal_decode = sorted(DECODE * 2)[2:4]  # median of the six
    assert 0.3 * sum(ideal_decode) / 2 < c1["per_request_decode_tok_s_median"] <= 1.05 * sum(ideal_decode) / 2
    per_req = sorted(N_NEW / t for t in LATENCY * 2)[2:4]
    assert 0.3 * sum(per_req) / 2 < c1["per_request_tok_s_median"] <= 1.05 * sum(per_req) / 2
    # concurrency 3: decoding overlaps (more aggregate throughput), prefill queues (later first tokens)
    assert c3["output_tok_s"] > 1.2 * c1["output_tok_s"]
    assert c3["ttft_median_s"] > c1["ttft_median_s"]
    assert c3["ttft_p90_s"] > 1.5 * PREFILL_S  # the third of the first wave waits for two prefills
    assert c3["ttft_p90_s"] >= c3["ttft_median_s"]


def test_chat_api_uses_usage_and_server_acceptance(fake, prompts_file, tmp_path):
    n_before = len(fake.requests)
    r = bench(
        "--base-url", fake.url, "--api", "chat", "--concurrency", 2, "--num-prompts", 4, "--max-new-tokens", 5,
        "--prompts", prompts_file, "--out", tmp_path, "--warmup", 0,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    run = json.loads((tmp_path / "DFLASH.json").read_text())  # default label: the server's algorithm
    sent = fake.requests[n_before:]
    assert len(sent) == 4 and all(p == "/v1/chat/completions" for p, _ in sent)
    assert sent[0][1]["model"] == "fake-model" and sent[0][1]["stream_options"] == {"include_usage": True}
    # two in flight: the arrival order is not fixed
    assert {"role": "user", "content": "accept=1 a short question"} in [b["messages"][0] for _, b in sent]
    assert sorted(b["messages"][0]["content"][:8] for _, b in sent) == ["accept=1", "accept=1", "accept=2", "accept=3"]
    (lv,) = run["levels"]
    assert lv["output_tokens"] == 4 * 5 and lv["failed"] == 0
    assert all(q["ttft_s"] >= PREFILL_S * 0.95 for q in lv["requests"])  # the role-only chunk is not a token
    assert lv["accept_length"] == SERVER_ACCEPT and lv["accept_length_source"] == "server_info"
    assert "2.50*" in (tmp_path / "DFLASH.md").read_text()


def test_compare_writes_markdown_and_png(generate_run, tmp_path):
    run, out, *_ = generate_run
    other = copy.deepcopy(run) | {"label": "fake MTP"}
    for lv in other["levels"]:  # a run half as fast, to check the ratios
        lv["output_tok_s"] /= 2
    (tmp_path / "mtp.json").write_text(json.dumps(other))
    r = bench("--compare", out / "fake_DFLASH.json", tmp_path / "mtp.json", "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "compare.md").read_text()
    assert "fake DFLASH" in md and "fake MTP" in md
    assert "## aggregate output tok/s" in md and "## accept length (tokens per verify step)" in md
    c1 = run["levels"][0]["output_tok_s"]
    assert f"| 1 | {c1:.1f} | {c1 / 2:.1f} (0.50x) |" in md
    png = (tmp_path / "compare.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_failed_requests_are_counted(fake, tmp_path):
    prompts = tmp_path / "p.txt"
    prompts.write_text("accept=2 fine\nFAIL please\n")
    r = bench(
        "--base-url", fake.url, "--concurrency", 2, "--num-prompts", 4, "--max-new-tokens", 3,
        "--prompts", prompts, "--label", "f", "--out", tmp_path,
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    (lv,) = json.loads((tmp_path / "f.json").read_text())["levels"]
    assert (lv["completed"], lv["failed"], lv["output_tokens"]) == (2, 2, 6)
    assert any("HTTP 500" in e for e in lv["errors"]) and "HTTP 500" in r.stderr


def test_unreachable_server_is_a_clear_error(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = bench("--base-url", f"http://127.0.0.1:{port}", "--out", tmp_path / "x", "--connect-timeout", 2)
    assert r.returncode == 2
    assert f"cannot reach a server at http://127.0.0.1:{port}" in r.stderr
    assert "sglang.launch_server" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x").exists()


def test_help_explains_metrics():
    r = bench("--help")
    assert r.returncode == 0
    for word in ("--concurrency", "--compare", "spec_verify_ct", "TTFT", "avg_spec_accept_length", "--prompts"):
        assert word in r.stdout


def test_compare_plot_keeps_each_runs_colour_in_every_panel(tmp_path, monkeypatch):
    """A stock run has no accept length: the speculative runs keep their own colours in that panel (they took
    stock's before, so the accept-length panel mislabelled them)."""
    import importlib.util

    import matplotlib.axes

    spec = importlib.util.spec_from_file_location("bench_serving", ROOT / "benchmarks" / "bench_serving.py")
    bs = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_serving", bs)  # its dataclasses look their module up
    spec.loader.exec_module(bs)
    drawn = []
    plot = matplotlib.axes.Axes.plot
    monkeypatch.setattr(
        matplotlib.axes.Axes, "plot", lambda ax, *a, **k: drawn.append((k["label"], k["color"])) or plot(ax, *a, **k)
    )
    level = dict(concurrency=1, output_tok_s=10.0, per_request_decode_tok_s_median=5.0, ttft_median_s=0.1, accept_length=2.0)
    runs = [dict(_name="stock", levels=[dict(level, accept_length=None)])] + [
        dict(_name=name, levels=[level]) for name in ("dflash", "ddtree")
    ]
    bs.compare_plot(runs, str(tmp_path / "c.png"))
    colours = {}
    for name, colour in drawn:
        colours.setdefault(name, set()).add(colour)
    assert colours == {"stock": {"C0"}, "dflash": {"C1"}, "ddtree": {"C2"}}
    assert drawn.count(("dflash", "C1")) == 4 and drawn.count(("stock", "C0")) == 3
