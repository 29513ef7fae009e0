"""The serving suite's CPU-checkable parts (benchmarks/gpu/serving_suite.py): its workload, its judgement of hand-made
results, the abort path of a request against a fake HTTP server, and the counters it loads into the server's
processes, on a fake SGLang tree."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from http_helpers import reply_json
from paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
import serving_suite as suite  # noqa: E402

PROMPTS = [[1], [2, 3], [4, 5, 6, 7]]


def test_workload_kinds_and_determinism():
    a = suite.workload(40, 0, PROMPTS, "\n\n", 9)
    assert a == suite.workload(40, 0, PROMPTS, "\n\n", 9) and a != suite.workload(40, 1, PROMPTS, "\n\n", 9)
    by = {}
    for r in a:
        by.setdefault(r.kind, []).append(r)
        assert r.sampling_params["temperature"] == 0.0 and r.abort_after is None
    assert {r.sampling_params["max_new_tokens"] for r in by["max1"]} == {1}
    assert {r.sampling_params["max_new_tokens"] for r in by["max2"]} == {2}
    assert all(r.sampling_params["ignore_eos"] is False for r in by["eos"])
    assert all(r.sampling_params["stop"] == ["\n\n"] for r in by["stop_str"])
    assert all(r.sampling_params["stop_token_ids"] == [9] for r in by["stop_id"])
    assert all(r.sampling_params["min_new_tokens"] == 4 for r in by["min_new"])
    assert all(r.input_ids[:4] == [4, 5, 6, 7] and len(r.input_ids) > 4 for r in by["prefix"])
    assert all(r.input_ids == [4, 5, 6, 7] * 2 for r in by["long"])
    assert len({r.rid for r in a}) == 40 and not any(x.rid.startswith(y.rid) for x in a for y in a if x is not y)


def test_aborts_are_a_fraction_in_the_window():
    reqs = suite.with_aborts(suite.workload(2000, 0, PROMPTS, "x", 1), 0.2, 0, 1.5)
    times = [r.abort_after for r in reqs if r.abort_after is not None]
    assert 320 < len(times) < 480 and all(0 <= t < 1.5 for t in times)


def result(rid, ids, finish="length", margins=None, aborted=False, message=""):
    return suite.Result(rid, ids, finish, message, margins, aborted)


def test_judge_hand_worked():
    reqs = [suite.Request(f"r{i}", [1], {}, kind) for i, kind in enumerate(["plain", "plain", "plain", "min_new", "plain"])]
    stock = [result("r0", [5, 6], margins=[2.0, 2.0]), result("r1", [5, 6], margins=[0.1, 2.0]),
             result("r2", [7], margins=[3.0]), result("r3", [1, 2, 3, 4]), result("r4", [8], margins=[1.0])]  # fmt: skip
    ours = [result("r0", [5, 6]), result("r1", [4, 9]), result("r2", None, "abort", aborted=True),
            result("r3", None, "abort", message="DDTREE does not support min_new_tokens"),
            result("r4", [8], aborted=True)]  # fmt: skip
    c = suite.judge(reqs, ours, stock)
    assert (c["completed"], c["aborts_sent"], c["aborted"], c["refused"], c["wrong_refusals"]) == (3, 2, 1, 1, 0)
    assert c["verdict"].ok and c["mismatches"] == 0 and c["errors"] == [] and c["verdict"].equal == 2
    ours[1] = result("r1", [5, 7])  # differs where stock's margin is 2.0: not a near tie
    ours[3] = result("r3", [1, 2, 3, 4])  # min_new_tokens served, not refused
    ours[0] = result("r0", None, "abort")  # aborted without an abort being sent
    c = suite.judge(reqs, ours, stock)
    assert c["mismatches"] == 1 and not c["verdict"].ok and c["wrong_refusals"] == 1 and len(c["errors"]) == 1


def test_report_fails_without_a_reference_or_a_verdict():
    stock = dict(results=[result("r0", [1])], up=True, alive_after=True, answered_after=True, failure_lines=[])
    ours = dict(up=False, results=[])
    args = type("A", (), dict(requests=1, speculative_algorithm=[]))
    assert suite.report({"sglang": stock}, args)[1]  # stock alone: a reference made
    assert not suite.report({"sglang": stock, "sglang-ddtree15": ours}, args)[1]
    assert not suite.report({"sglang": dict(stock, results=[])}, args)[1]
    ours_asked = type("A", (), dict(requests=1, speculative_algorithm=["DDTREE"]))
    assert not suite.report({"sglang": stock}, ours_asked)[1]  # ours asked for, none served (e.g. --runs matched none)
    table, ok = suite.report({"sglang": stock, "sglang-ddtree15": dict(ours, busy=True)}, ours_asked)
    assert not ok and "port already answers" in table
    assert suite.report({"sglang": stock}, args, (True, "102 passed"))[1]
    table, ok = suite.report({"sglang": stock}, args, (False, "1 failed, 101 passed"))
    assert not ok and "FAILED: 1 failed" in table


def test_report_fails_a_server_that_the_churn_never_reached():
    """A server of ours that saw no abort end, no retraction or no eviction passes nothing about them."""
    reqs = [suite.Request("r0", [1], {}, "plain"), suite.Request("r1", [1], {}, "plain", abort_after=0.1)]
    stock = dict(results=[result("r0", [5], margins=[2.0]), result("r1", [6], margins=[2.0])], up=True, alive_after=True,
                 answered_after=True, failure_lines=[])  # fmt: skip
    ours = dict(suite.judge(reqs, [result("r0", [5]), result("r1", None, "abort", aborted=True)], stock["results"]),
                up=True, alive_after=True, answered_after=True, failure_lines=[], idle_checks=9, retractions=2,
                evicted_tokens=40, evicted_states=1)  # fmt: skip
    args = type("A", (), dict(requests=2, speculative_algorithm=["DDTREE"]))
    assert suite.unexercised(ours) == [] and suite.report({"sglang": stock, "sglang-ddtree15": ours}, args)[1]
    for key, why in (("aborted", "no request ended aborted"), ("retractions", "no retraction"),
                     ("evicted_tokens", "no radix-cache eviction")):  # fmt: skip
        table, ok = suite.report({"sglang": stock, "sglang-ddtree15": dict(ours, **{key: 0})}, args)
        assert not ok and f"- sglang-ddtree15: not exercised: {why}" in table
    assert suite.unexercised(dict(ours, aborts_sent=0, aborted=0)) == []  # no abort sent: none expected


@pytest.mark.parametrize(
    "printed, code, passed",
    [("102 passed in 88.5s", 0, True), ("101 passed, 1 skipped in 80s", 0, False), ("1 failed, 101 passed in 90s", 1, False),
     ("no tests ran in 0.1s", 5, False)],
)  # fmt: skip
def test_kernel_verdict_needs_every_kernel_run_and_passed(tmp_path, printed, code, passed):
    (tmp_path / "kernels.log").write_text(f"....\n\n===== {printed} =====\n")
    tests = subprocess.Popen([sys.executable, "-c", f"raise SystemExit({code})"])
    ok, summary = suite.kernel_verdict(tests, tmp_path)
    assert ok is passed and summary == f"{printed} (exit {code})"


class FakeServer(BaseHTTPRequestHandler):
    """/generate answers after 0.5 s unless /abort_request named its rid meanwhile (then finish_reason abort)."""

    aborted: set = set()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/abort_request":
            FakeServer.aborted.add(body["rid"])  # SGLang matches it as a prefix of the running rids
            answer = {}
        else:
            time.sleep(0.5)
            reason = "abort" if any(body["rid"].startswith(a) for a in FakeServer.aborted) else "length"
            answer = dict(output_ids=[3, 4], meta_info=dict(finish_reason=dict(type=reason)))
        reply_json(self, answer)

    def log_message(self, *args):
        pass


def test_send_aborts_through_abort_request():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        kept = suite.send(url, suite.Request("a", [1], {}, "plain"), False, 10)
        cut = suite.send(url, suite.Request("b", [1], {}, "plain", abort_after=0.1), False, 10)
    finally:
        server.shutdown()
    assert (kept.finish, kept.output_ids, kept.aborted) == ("length", [3, 4], False)
    assert (cut.finish, cut.aborted) == ("abort", True)


FAKE_SGLANG = {
    "sglang/__init__.py": "",
    "sglang/srt/__init__.py": "",
    "sglang/srt/managers/__init__.py": "",
    "sglang/srt/managers/schedule_batch.py": "class ScheduleBatch:\n    def retract_decode(self, n):\n"
    "        return list(range(n)), 0.5, []\n",
    "sglang/srt/managers/checker.py": "class Checker:\n    def _check_req_pool(self):\n        return None\n",
    "sglang/srt/mem_cache/__init__.py": "",
    "sglang/srt/mem_cache/radix_cache.py": "class EvictResult:\n    def __init__(self, t, m):\n"
    "        self.num_tokens_evicted, self.mamba_num_evicted = t, m\n"
    "class RadixCache:\n    def evict(self, t, m):\n        return EvictResult(t, m)\n"
    "    def evict_for_alloc(self, t, m):\n        return EvictResult(t, m)\n",
    "sglang/srt/speculative/__init__.py": "",
    "sglang/srt/speculative/dflash_utils.py": "top_k_renorm_prob = top_p_renorm_prob = print\n"
    "tree_speculative_sampling_target_only = print\n_DFLASH_SAMPLING_VERIFY_AVAILABLE = True\n",
}
CALLS = (
    "from sglang.srt.managers.schedule_batch import ScheduleBatch\n"
    "from sglang.srt.managers.checker import Checker\n"
    "from sglang.srt.mem_cache.radix_cache import RadixCache\n"
    "b = ScheduleBatch(); b.retract_decode(3); b.retract_decode(0); b.retract_decode(2)\n"
    "c = RadixCache(); c.evict(10, 1); c.evict(0, 0); c.evict(4, 0); c.evict_for_alloc(5, 2)\n"
    "Checker()._check_req_pool(); Checker()._check_req_pool()\n"
)


def fake_sglang(root):
    """FAKE_SGLANG's files under root."""
    for name, text in FAKE_SGLANG.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_counters_in_a_fresh_process(tmp_path):
    fake_sglang(tmp_path / "tree")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(suite.h.SERVER_SITE), str(tmp_path / "tree")]))
    env["SERVING_COUNTERS"] = str(tmp_path / "counts")
    subprocess.run([sys.executable, "-c", CALLS], env=env, check=True)
    assert suite.counters(tmp_path / "counts") == dict(retractions=5, evicted_tokens=19, evicted_states=3, idle_checks=2)
    env.pop("SERVING_COUNTERS")  # off: nothing is written, nothing wrapped
    subprocess.run([sys.executable, "-c", CALLS], env=env, check=True)
    assert len(list((tmp_path / "counts").glob("*.log"))) == 1


def test_no_sampling_jit_switch_in_a_fresh_process(tmp_path):
    """HARNESS_NO_SAMPLING_JIT=1 leaves SGLang's DFLASH as on a platform without its sampling kernels (their names
    None, sampling verify unavailable); unset, they stay."""
    fake_sglang(tmp_path)
    code = (
        "import sglang.srt.speculative.dflash_utils as u; print(u.top_k_renorm_prob is None, u.top_p_renorm_prob is "
        "None, u.tree_speculative_sampling_target_only is None, u._DFLASH_SAMPLING_VERIFY_AVAILABLE)"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(suite.h.SERVER_SITE), str(tmp_path)]))
    env.pop("SERVING_COUNTERS", None)
    run = lambda e: subprocess.run([sys.executable, "-c", code], env=e, check=True, capture_output=True, text=True)  # noqa: E731
    assert run(dict(env, HARNESS_NO_SAMPLING_JIT="1")).stdout.split() == ["True", "True", "True", "False"]
    assert run(env).stdout.split() == ["False", "False", "False", "True"]


def test_chi_square_hand_worked():
    import math

    assert suite.chi_square([0] * 10 + [1] * 10, [1] * 10 + [0] * 10) == (0.0, 1, 1.0)
    stat, dof, p = suite.chi_square([0] * 20, [1] * 20)  # 2 x 2 table, expected 10 each: (10^2 / 10) * 4
    assert stat == 40.0 and dof == 1 and math.isclose(p, math.erfc(math.sqrt(20)), rel_tol=1e-9)  # chi2(1) tail


def test_sampled_check_detects_a_two_percent_shift_at_its_default_size():
    """16,000 samples a side (the suite's default): the same distribution passes at both positions; 2% of the
    probability moved from the top token to the third fails."""
    import random

    probs = [0.35, 0.2, 0.15, 0.1, 0.08, 0.06, 0.04, 0.02]

    def draws(p, n, seed):
        rng = random.Random(seed)
        return [[rng.choices(range(len(p)), p)[0] for _ in range(suite.SAMPLED_LATER + 1)] for _ in range(n)]

    n = 16000
    same = suite.sampled_verdict(draws(probs, n, 1), draws(probs, n, 2))
    shifted = [probs[0] - 0.02, probs[1], probs[2] + 0.02, *probs[3:]]
    moved = suite.sampled_verdict(draws(shifted, n, 3), draws(probs, n, 4))
    assert same[0] and not moved[0], (same, moved)
    assert not suite.sampled_verdict([], draws(probs, 10, 5))[0]


def test_reference_reused_only_for_the_same_release_device_and_workload(tmp_path):
    key = dict(sglang="0.5.11", device="NVIDIA H100", requests="digest", sampling=suite.SAMPLING)
    results = [suite.Result("suite-000000", [1, 2], "length", margins=[0.5, 0.5])]
    (tmp_path / "reference.json").write_text(json.dumps(dict(key=key, row=dict(up=True, alive_after=True))))
    (tmp_path / "sglang.json").write_text(json.dumps([dataclasses.asdict(r) for r in results]))
    (tmp_path / "sglang.samples.json").write_text("[[4, 5], [6, 7]]")
    row = suite.load_reference(tmp_path, key, 1)
    assert row["results"] == results and row["samples"] == [[4, 5]] and row["alive_after"]
    assert suite.load_reference(tmp_path, key, 0)["samples"] == []
    with pytest.raises(SystemExit, match="NVIDIA H200"):
        suite.load_reference(tmp_path, dict(key, device="NVIDIA H200"), 1)
    with pytest.raises(SystemExit, match="holds 2 samples"):
        suite.load_reference(tmp_path, key, 3)


def test_reference_key_tells_workloads_apart():
    """The key holds a digest of the requests themselves (results pair with them by position), as JSON reads it."""
    stock = type("Run", (), dict(engine_kwargs=dict(port=1, model_path="/t", cuda_graph_bs=(1, 2))))
    args = type("A", (), dict(sglang="0.5.11"))
    a = suite.workload(20, 0, PROMPTS, "x", 7)
    b = suite.workload(20, 1, PROMPTS, "x", 7)
    key = suite.reference_key(args, stock, a)
    assert key == json.loads(json.dumps(key)) and key["server"]["cuda_graph_bs"] == [1, 2] and "port" not in key["server"]
    assert key == suite.reference_key(args, stock, suite.workload(20, 0, PROMPTS, "x", 7))
    assert key["requests"] != suite.reference_key(args, stock, b)["requests"]


def test_sigterm_kills_the_servers_first():
    """The handler of a timeout's SIGTERM kills each live server's process group before exiting (a request in flight
    would otherwise hold the driver until it times out, and the server, in its own session, would outlive it)."""
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    suite.SERVERS.add(server)
    try:
        with pytest.raises(SystemExit) as exit_:
            suite.stop_servers()
        assert exit_.value.code == 143 and server.wait(timeout=10) == -9
    finally:
        suite.SERVERS.discard(server)
        if server.poll() is None:
            server.kill()


@pytest.mark.parametrize("parallel", [False, True])
def test_serve_all_one_after_another_or_at_once(parallel):
    """Every run is served once with its own row; with --parallel all servers are up at the same time (each waits
    until every other has started), one after another otherwise (never two at once)."""
    from types import SimpleNamespace

    runs = [SimpleNamespace(name=n) for n in ("sglang", "sglang-ddtree15", "sglang-dflash-chain")]
    live, most, lock = set(), [0], threading.Lock()
    started = threading.Barrier(len(runs)) if parallel else None

    def serve_one(run):
        with lock:
            live.add(run.name)
            most[0] = max(most[0], len(live))
        if started:
            started.wait(timeout=10)
        with lock:
            live.discard(run.name)
        return {"served": run.name}

    rows = suite.serve_all(runs, serve_one, parallel)
    assert rows == {r.name: {"served": r.name} for r in runs}
    assert most[0] == (len(runs) if parallel else 1)


@pytest.mark.sglang
def test_every_server_argument_is_the_installed_releases(tmp_path):
    """Each server the suite and the harness start (stock with its GDN state tracking, ours, SGLang's own DFLASH, the
    overlap variants) passes only fields of the installed SGLang's ServerArgs, in that release's spelling (0.5.23
    renamed several; stock on 0.5.23 once failed at start on `mamba_scheduler_strategy`)."""
    import inspect

    from sglang.srt.server_args import ServerArgs  # a dataclass in 0.5.11, a msgspec Struct in 0.5.23

    from sglang_dflash.sglang.plugin.activate import installed_version

    release = installed_version()
    h = suite.h
    (tmp_path / "config.json").write_text('{"block_size": 16}')
    hargs = h.parse_args(["--sglang", release, "--radix-cache", "--budgets", "15", "--speculative-algorithm", "DDTREE",
                          "DFLASH_CHAIN", "DFLASH"] + (["--also-no-overlap"] if release != "0.5.11" else []))  # fmt: skip
    args = dataclasses.make_dataclass("A", ["sglang", "concurrency", "max_total_tokens", "chunked_prefill_size",
                                            "conservativeness"])(release, 64, 6144, 128, 0.3)  # fmt: skip
    fields = set(inspect.signature(ServerArgs).parameters)
    runs = h.sglang_runs(hargs, tmp_path, tmp_path)
    assert len(runs) >= 4
    for run in runs:
        kwargs = dict(run.engine_kwargs, **suite.serving_kwargs(args, 30000))
        assert set(kwargs) <= fields, (run.name, sorted(set(kwargs) - fields))


def test_test_retract_reaches_ours_servers_only(tmp_path):
    log = suite.h.Log(tmp_path / "log")
    stock, ours = suite.h.SGLangRun("sglang", False, {}), suite.h.SGLangRun("sglang-ddtree15", False, {})
    env = suite.server_env(ours, {"A": "1"}, tmp_path / "c", 3, log)
    assert env["SGLANG_TEST_RETRACT"] == "1" and env["SGLANG_TEST_RETRACT_INTERVAL"] == "3" and env["A"] == "1"
    assert env["SERVING_COUNTERS"] == str(tmp_path / "c")
    assert "SGLANG_TEST_RETRACT" not in suite.server_env(stock, {}, tmp_path / "c", 3, log)
    assert "SGLANG_TEST_RETRACT" not in suite.server_env(ours, {}, tmp_path / "c", 0, log)
