"""benchmarks/gpu/harness.py --pair shipped: the converted target computes the shipped text model's logits and
carries its tokenizer files, and the stdlib-source prompts are deterministic, at the harness's lengths, in the
shipped vocabulary; benchmarks/gpu/live_server.py's prompt file holds them as text."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
from http_helpers import reply_json
from paths import ROOT

from sglang_dflash.engine.load import tiny_pair

spec = importlib.util.spec_from_file_location("harness", ROOT / "benchmarks" / "gpu" / "harness.py")
harness = sys.modules["harness"] = importlib.util.module_from_spec(spec)  # dataclasses look their module up
spec.loader.exec_module(harness)


def test_converted_target_logits_equal_shipped(tmp_path):
    from transformers import Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration

    harness.convert_shipped_target(tmp_path, seed=0)
    converted = Qwen3_5ForConditionalGeneration.from_pretrained(str(tmp_path), dtype=torch.float32).eval()
    shipped = Qwen3_5ForCausalLM.from_pretrained(str(tiny_pair()[0]), dtype=torch.float32).eval()
    assert not converted.config.tie_word_embeddings
    for name in ("tokenizer.json", "tokenizer_config.json"):  # byte for byte (see convert_shipped_target)
        assert (tmp_path / name).read_bytes() == (tiny_pair()[0] / name).read_bytes()
    assert converted.lm_head.weight.data_ptr() != converted.model.language_model.embed_tokens.weight.data_ptr()
    gen = torch.Generator().manual_seed(0)
    seqs = harness.text_prompts(5, seed=0) + [torch.randint(2048, (40,), generator=gen).tolist()]
    with torch.no_grad():
        for seq in seqs:
            ids = torch.tensor([seq])
            torch.testing.assert_close(converted(input_ids=ids).logits, shipped(input_ids=ids).logits, rtol=1e-5, atol=1e-5)


def test_text_prompts():
    prompts = harness.text_prompts(12, seed=3)
    assert prompts == harness.text_prompts(12, seed=3)
    assert [len(p) for p in prompts] == harness.prompt_lengths(12) and len(prompts[0]) == 1
    assert all(0 <= t < 2048 for p in prompts for t in p)


def test_live_server_prompt_file(tmp_path):
    import json

    sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
    from live_server import prompts_file

    lines = prompts_file(tmp_path / "p.jsonl", 6, seed=0).read_text().splitlines()
    prompts = [json.loads(line)["prompt"] for line in lines]
    assert len(prompts) == 6 and all(prompts)
    assert prompts == [
        json.loads(line)["prompt"] for line in prompts_file(tmp_path / "q.jsonl", 6, seed=0).read_text().splitlines()
    ]


def test_shared_prefix_prompts_for_the_prefix_cache_run():
    prompts = harness.make_prompts(6, 512, seed=1)
    shared = harness.shared_prefix(prompts)
    base = max(prompts, key=len)
    assert shared[0] == prompts[0] and len(shared[0]) == 1 and shared[1] == base
    assert all(s == base + p for s, p in zip(shared[2:], prompts[2:]))


def test_every_plugin_run_variant_keeps_the_switches(tmp_path):
    """--plugin-env reaches every plugin run and its -nograph / -backendattn variants; the stock run gets
    none (-backendattn: the tree attention off, the plugin's GDN verify kept). With
    the radix cache, extra_buffer tracks every multiple of 32 tokens that holds the verify (DFLASH: the drafter's
    block; stock too, every 32, rather than SGLang's no_buffer for it, so that prefills split alike), and no run
    disables the cache. SGLang's own DFLASH runs with the plugin installed but none of
    its switches."""
    args = harness.parse_args(["--tp", "2", "--radix-cache", "--speculative-algorithm", "DFLASH_CHAIN", "DDTREE",
                               "--budgets", "16,40", "--also-without-graphs", "--also-backend-attention",
                               "--plugin-env", "SGLANG_DFLASH_DRAFT_GRAPHS=1", "--plugin-env", "X=a=b"])  # fmt: skip
    (tmp_path / "config.json").write_text('{"block_size": 16}')
    runs = {r.name: r for r in harness.sglang_runs(args, Path("/t"), tmp_path)}
    intervals = {
        n: runs[n].engine_kwargs.get("mamba_track_interval")
        for n in ("sglang", "sglang-dflash-chain", "sglang-ddtree16", "sglang-ddtree40")
    }
    assert intervals == {"sglang": 32, "sglang-dflash-chain": 32, "sglang-ddtree16": 32, "sglang-ddtree40": 64}
    assert runs["sglang"].engine_kwargs["mamba_scheduler_strategy"] == "extra_buffer"
    builtin = harness.sglang_runs(
        harness.parse_args(["--speculative-algorithm", "DFLASH", "--plugin-env", "X=1"]), Path("/t"), tmp_path
    )
    assert [(r.name, r.plugin, r.env, r.engine_kwargs["speculative_algorithm"]) for r in builtin[1:]] == [
        ("sglang-builtin-dflash", True, {}, "DFLASH")
    ]
    assert {"sglang-dflash-chain-nograph", "sglang-ddtree40-nograph-backendattn"} <= set(runs)
    backend = {n for n, r in runs.items() if r.env.get("SGLANG_DFLASH_TREE_ATTENTION") == "0"}
    assert backend == {n for n in runs if n.endswith("-backendattn")} and len(backend) == 6
    assert runs["sglang"].env == {} and not runs["sglang"].engine_kwargs["disable_radix_cache"]
    assert {r.engine_kwargs["attention_backend"] for r in runs.values()} == {"triton"}  # as sglang_probe runs SGLang
    for name, run in runs.items():
        if run.plugin:
            assert not run.engine_kwargs["disable_radix_cache"], name
            assert run.env["SGLANG_DFLASH_DRAFT_GRAPHS"] == "1" and run.env["X"] == "a=b", name


def test_ours_run_sglangs_default_scheduler_and_nooverlap_runs_the_other(tmp_path):
    """Ours keep SGLang's default scheduler (overlap), as served; their -nooverlap variants pass
    --disable-overlap-schedule; SGLang's DFLASH has no variant."""
    args = harness.parse_args(["--sglang", "0.5.23", "--speculative-algorithm", "DDTREE", "DFLASH", "--budgets", "63",
                               "--also-no-overlap"])  # fmt: skip
    (tmp_path / "config.json").write_text('{"block_size": 16}')
    runs = {r.name: r for r in harness.sglang_runs(args, Path("/t"), tmp_path)}
    assert set(runs) == {"sglang", "sglang-ddtree63", "sglang-builtin-dflash", "sglang-ddtree63-nooverlap"}
    on, off = runs["sglang-ddtree63"].engine_kwargs, runs["sglang-ddtree63-nooverlap"].engine_kwargs
    assert "disable_overlap_schedule" not in on and off == dict(on, disable_overlap_schedule=True)
    assert "disable_overlap_schedule" not in runs["sglang-builtin-dflash"].engine_kwargs
    assert runs["sglang-ddtree63-nooverlap"].env == runs["sglang-ddtree63"].env == {}
    with pytest.raises(SystemExit):  # 0.5.11 runs ours under its overlap scheduler only
        harness.parse_args(["--sglang", "0.5.11", "--speculative-algorithm", "DDTREE", "--also-no-overlap"])


def test_runs_keeps_the_named_runs_in_its_order(tmp_path):
    args = harness.parse_args(["--speculative-algorithm", "DFLASH_CHAIN", "DDTREE", "--budgets", "32,64",
                               "--also-backend-attention",
                               "--runs", "sglang,sglang-ddtree64-backendattn,sglang-ddtree32"])  # fmt: skip
    (tmp_path / "config.json").write_text('{"block_size": 16}')
    names = [r.name for r in harness.sglang_runs(args, Path("/t"), tmp_path)]
    assert names == ["sglang", "sglang-ddtree64-backendattn", "sglang-ddtree32"]


def test_attention_backend_reaches_every_run(tmp_path):
    args = harness.parse_args(["--speculative-algorithm", "DDTREE", "--budgets", "64", "--attention-backend", "flashinfer",
                               "--also-backend-attention"])  # fmt: skip
    (tmp_path / "config.json").write_text('{"block_size": 16}')
    runs = harness.sglang_runs(args, Path("/t"), tmp_path)
    assert [r.name for r in runs] == ["sglang", "sglang-ddtree64", "sglang-ddtree64-backendattn"]
    assert {r.engine_kwargs["attention_backend"] for r in runs} == {"flashinfer"}


def test_parallel_queues_split_the_runs_over_gpu_groups(tmp_path):
    """Two GPUs at TP=1: two queues, runs dealt round-robin, each pinned to its GPU with its own SGLang ports; at TP=2
    (or on one GPU) one queue, unpinned."""
    assert harness.gpu_groups(1, 2) == ["0", "1"] and harness.gpu_groups(2, 4) == ["0,1", "2,3"]
    assert harness.gpu_groups(2, 2) == [None] and harness.gpu_groups(1, 1) == [None] and harness.gpu_groups(1, 0) == [None]
    args = harness.parse_args(["--speculative-algorithm", "DFLASH_CHAIN", "DDTREE", "--budgets", "16,64"])
    (tmp_path / "config.json").write_text('{"block_size": 16}')
    runs = harness.sglang_runs(args, Path("/t"), tmp_path)
    log = harness.Log(None)
    queues = harness.SGLangQueues(runs, {"A": "1"}, [[1]], args, tmp_path, tmp_path, log, ["0", "1"]).queues
    assert [[r.name for r in q.runs] for q in queues] == [
        ["sglang", "sglang-ddtree16"],
        ["sglang-dflash-chain", "sglang-ddtree64"],
    ]
    assert [q.env for q in queues] == [{"A": "1", "CUDA_VISIBLE_DEVICES": "0"}, {"A": "1", "CUDA_VISIBLE_DEVICES": "1"}]
    assert {r.engine_kwargs["port"] for r in queues[1].runs} == {30100} and "port" not in runs[0].engine_kwargs
    (single,) = harness.SGLangQueues(runs, {"A": "1"}, [[1]], args, tmp_path, tmp_path, log, [None]).queues
    assert single.env == {"A": "1"} and [r.name for r in single.runs] == [r.name for r in runs]


def test_live_server_greedy_check_judges_http_answers(tmp_path):
    """live_server.greedy reads output_ids (stock's with its top-2 logprobs) from a /generate endpoint, and judge passes
    a server whose tokens equal stock's or differ first at a near tie of stock's logits, and fails one whose tokens
    differ where stock's choice was clear. The stand-in HTTP server answers transformers' own greedy tokens as stock."""
    import json
    import threading
    from argparse import Namespace
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from transformers import Qwen3_5ForConditionalGeneration

    sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
    from live_server import greedy, judge

    harness.convert_shipped_target(tmp_path, seed=0)
    model = Qwen3_5ForConditionalGeneration.from_pretrained(str(tmp_path), dtype=torch.float32).eval()
    prompts, new = harness.text_prompts(3, seed=0), 6
    with torch.no_grad():
        right = [model.generate(torch.tensor([p]), max_new_tokens=new, do_sample=False)[0, len(p) :].tolist() for p in prompts]
    tie = [out[:2] + [(out[2] + 1) % 2048] + out[3:] if i == 1 else out for i, out in enumerate(right)]
    answers = {"stock": right, "tie": tie, "wrong": [[(t + 1) % 2048 for t in out] for out in right]}
    margins = [[5.0, 5.0, 0.2, 5.0, 5.0, 5.0]] * len(prompts)  # stock's top-1 - top-2: a near tie at position 2

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            assert body["sampling_params"] == dict(temperature=0.0, max_new_tokens=new, ignore_eos=True)
            i = prompts.index(body["input_ids"])
            meta = dict(spec_accept_length=2.5)
            if body.get("return_logprob"):
                assert body["top_logprobs_num"] == 2
                meta["output_top_logprobs"] = [[(0.0, t, None), (-m, 0, None)] for t, m in zip(right[i], margins[i])]
            reply_json(self, dict(output_ids=answers[self.server.mode][i], meta_info=meta))

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        checks = []
        for mode in ("stock", "tie", "wrong"):
            server.mode = mode
            run = harness.Run(mode, 1, extra=dict(prompts=prompts))
            run.outputs, metas = greedy(url, prompts, new, margins=mode == "stock")
            run.extra["accept_length"] = [m["spec_accept_length"] for m in metas]
            if mode == "stock":
                run.extra["margins"] = [harness.top2_margins(m["output_top_logprobs"]) for m in metas]
            checks.append(run)
    finally:
        server.shutdown()
    assert checks[0].outputs == right and checks[0].extra["margins"] == margins
    log = harness.Log(tmp_path / "log")
    args = Namespace(check_new_tokens=new)
    assert judge(tmp_path, checks[:2], args, tmp_path, log)
    table = (tmp_path / "greedy.md").read_text()
    assert "| stock | stock (the peer) | 0/18 | 0 | 2.50 |" in table, table
    assert "| tie | lossless: 2/3 prompts equal to stock; first differences at near ties p1@2 (m 0.2) |" in table, table
    assert not judge(tmp_path, checks, args, tmp_path, log)
    table = (tmp_path / "greedy.md").read_text()
    assert "| wrong | NOT lossless: 0/3 prompts equal to stock; FAILED: prompt 0: token" in table and "FAILED" in table


@pytest.mark.parametrize("margins", [False, True])
def test_sglang_worker_runs_both_turns_and_the_sampled_batch(tmp_path, monkeypatch, margins):
    """The worker's loop with a stand-in Engine (this tests the harness, not SGLang): a warm-up at each batch size
    (first-use compiles outside the timed batches), the first turn at each batch size, the second turn on each prompt
    + its own output (its inputs recorded), then the sampled batch. The stock run (margins) asks for the top-2
    logprobs of its greedy tokens and keeps only their margins."""
    import json
    import types

    calls = []

    class Engine:
        def __init__(self, **kwargs):
            pass

        def generate(self, input_ids, sampling_params, return_logprob=False, top_logprobs_num=None):
            calls.append((input_ids, sampling_params, return_logprob, top_logprobs_num))

            def meta(p):  # the top-2 logprobs of the two greedy tokens: margins 0.5 and 3
                return dict(output_top_logprobs=[[(0.0, len(p), None), (-0.5, 1, None)], [(0.0, 7, None), (-3.0, 1, None)]])

            return [{"output_ids": [len(p), 7], "meta_info": meta(p) if return_logprob else {}} for p in input_ids]

        def shutdown(self):
            pass

    engine_mod = types.ModuleType("sglang.srt.entrypoints.engine")
    engine_mod.Engine = Engine
    sglang = types.ModuleType("sglang")
    sglang.__version__ = "stand-in"
    sglang.__file__ = __file__
    sgl_kernel = types.ModuleType("sgl_kernel")
    sgl_kernel.__file__ = __file__
    for name, mod in {"sgl_kernel": sgl_kernel, "sglang": sglang, engine_mod.__name__: engine_mod}.items():
        monkeypatch.setitem(sys.modules, name, mod)
    prompts = [[1, 2, 3], [4], [5, 6]]
    spec = dict(
        engine_kwargs={}, prompts=prompts, max_new_tokens=2, batches=[1, 2], second_turn=True, sampled=True,
        result=str(tmp_path / "r.json"), margins=margins,
    )  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    assert harness.sglang_worker(str(tmp_path / "spec.json")) == 0
    res = json.loads((tmp_path / "r.json").read_text())
    turn = [p + [len(p), 7] for p in prompts]
    assert res["batches"]["2"]["outputs"] == [[3, 7], [1, 7], [2, 7]]
    assert res["batches"][f"2{harness.SECOND_TURN}"]["prompts"] == turn
    assert res["batches"][f"1{harness.SECOND_TURN}"]["outputs"] == [[len(t), 7] for t in turn]
    assert res["sampled"]["tokens"] == 6 and calls[-1][1]["temperature"] == 0.8
    # one warm-up per batch size, each prompt alone, then the timed turns, then sampled
    warm_ups, prefills, greedy_calls = calls[:2], calls[2:5], calls[5:-1]
    assert [len(c[0]) for c in warm_ups] == [1, 2] and all(c[1]["max_new_tokens"] == harness.WARM_UP_TOKENS for c in warm_ups)
    assert [c[0] for c in prefills] == [[p] for p in prompts] and all(c[1]["max_new_tokens"] == 2 for c in prefills)
    assert all(c[2] is margins and c[3] == (2 if margins else None) for c in greedy_calls)
    for key, batch in res["batches"].items():
        assert batch.get("margins") == ([[0.5, 3.0]] * 3 if margins else None), key
        assert all("output_top_logprobs" not in m for m in batch["meta"])  # kept: the margins only


def test_wheels_of_another_set_are_removed_before_installing(tmp_path, monkeypatch):
    """A warm GPU machine keeps --site between calls: installing another release's wheels over it would leave the
    old release's metadata beside the new one (SGLang then looks like neither); the site is emptied first. The same
    set is not reinstalled."""
    wheels = tmp_path / "whl"
    (wheels / "gpu").mkdir(parents=True)
    (wheels / "release").write_text("0.5.23\n")
    for name in ("gpu/a-1-py3-none-any.whl", "sglang-0.5.23-py3-none-any.whl"):
        (wheels / name).write_text("")
    monkeypatch.setattr(harness, "WHEELS", wheels)
    started = []
    monkeypatch.setattr(harness.subprocess, "Popen", lambda cmd: started.append(cmd) or "proc")
    site = tmp_path / "site"
    (site / "sglang-0.5.11.dist-info").mkdir(parents=True)
    (site / ".harness-wheels").write_text("a-1-py3-none-any.whl\nsglang-0.5.11-py3-none-any.whl")
    proc, marker, names = harness.install_wheels(site, "0.5.23", harness.Log(None))
    assert not site.exists() and started and names.endswith("sglang-0.5.23-py3-none-any.whl")
    site.mkdir()
    marker.write_text(names)
    (site / "kept").write_text("")
    assert harness.install_wheels(site, "0.5.23", harness.Log(None)) is None and (site / "kept").exists()
    marker.unlink()  # an install cut short (no marker): its files go too
    assert harness.install_wheels(site, "0.5.23", harness.Log(None)) is not None and not site.exists()


@pytest.mark.parametrize("fmt", ["dflash2", "dspark"])
def test_random_pair_in_each_drafter_format(tmp_path, fmt):
    """--draft-format makes the random pair's drafter in that format (its own config, loadable strictly); the shipped
    pair's drafter is DFlash-format, so the two together are refused."""
    from sglang_dflash.models.dflash_draft import DFlashDrafter

    args = harness.parse_args(["--vocab", "64", "--hidden", "64", "--groups", "2", "--draft-layers", "1",
                               "--block-size", "4", "--draft-format", fmt])  # fmt: skip
    _, draft = harness.build_checkpoints(tmp_path, args, harness.Log(None))
    assert DFlashDrafter.from_pretrained(draft).config.format == fmt
    with pytest.raises(SystemExit):
        harness.parse_args(["--pair", "shipped", "--draft-format", fmt])


def test_plugin_checked_once_per_path(monkeypatch):
    """ensure_plugin: one SGLang-importing check per PYTHONPATH the plugin was found active under, not one a run."""
    from types import SimpleNamespace

    calls = []

    def probe(code, env):
        calls.append(env["PYTHONPATH"])
        return SimpleNamespace(stdout="True\n")

    monkeypatch.setattr(harness, "probe_python", probe)
    monkeypatch.setattr(harness, "_PLUGIN_ACTIVE", set())
    log = SimpleNamespace(stamp=lambda *a: None)
    for path in ("/a", "/a", "/b", "/a"):
        harness.ensure_plugin({"PYTHONPATH": path, "SGLANG_DFLASH_DISABLE": "1"}, log)
    assert calls == ["/a", "/b"]


def test_also_widths_runs_ours_with_the_width_controller(tmp_path):
    """--also-widths auto: each of our runs once more (-widths) with SGLANG_DFLASH_WIDTHS=auto; SGLang's DFLASH and
    stock have no such variant."""
    args = harness.parse_args(["--speculative-algorithm", "DDTREE", "DFLASH", "--budgets", "31", "--also-widths", "auto"])
    (tmp_path / "config.json").write_text('{"block_size": 16}')
    runs = {r.name: r for r in harness.sglang_runs(args, Path("/t"), tmp_path)}
    assert set(runs) == {"sglang", "sglang-ddtree31", "sglang-builtin-dflash", "sglang-ddtree31-widths"}
    assert runs["sglang-ddtree31-widths"].env == {"SGLANG_DFLASH_WIDTHS": "auto"} and runs["sglang-ddtree31"].env == {}
    assert runs["sglang-ddtree31-widths"].engine_kwargs == runs["sglang-ddtree31"].engine_kwargs
