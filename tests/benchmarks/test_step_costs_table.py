"""benchmarks/gpu/sglang_step_costs.py's table: plugin rows from the step profile (phases, overhead, decode interval,
ratio to stock decode), stock rows from wall time per pass, failed runs with their error; its runs of SGLang's own MTP (chain
and tree), and SGLang 0.5.23's resolution of them on CPU."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
from paths import ROOT, STUB

from sglang_dflash.sglang.plugin.activate import installed_version

sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
spec = importlib.util.spec_from_file_location("sglang_step_costs", ROOT / "benchmarks" / "gpu" / "sglang_step_costs.py")
costs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(costs)
h = costs.h


def test_table_rows():
    """8 prompts: stock at batch 8 runs 1 group of 32 steps, the plugin at batch 1 eight groups of 5-10 passes."""
    tokens = [dict(completion_tokens=32)] * 8
    stock = h.Run("sglang", 8, outputs=[[1]] * 8, wall_s=0.64, extra=dict(meta=tokens))  # 20 ms / step
    stock1 = h.Run("sglang", 1, outputs=[[1]] * 8, wall_s=2.56, extra=dict(meta=tokens))  # 10 ms / step
    passes = [dict(completion_tokens=32, spec_verify_ct=v) for v in (5, 10, 5, 10, 5, 10, 5, 10)]
    plugin = h.Run("sglang-ddtree64", 1, outputs=[[1]] * 8, wall_s=1.5, extra=dict(meta=passes, tokens_per_pass=1.5))
    plugin8 = h.Run("sglang-ddtree64", 8, outputs=[[1]] * 8, wall_s=0.4, extra=dict(meta=passes))  # one group: 10 steps
    failed = h.Run("sglang-dflash", 8, error="exit 1: boom")
    phases = dict(drafter=3000, tree=100, prepare=200, verify=25000, accept=300, commit=400, gdn_commit=50, context=150)
    profiles = {
        "sglang-ddtree64": {
            "1": {
                "steps": 9,
                "median_us": dict(phases, step=30000),
                "host_median_us": dict(phases, step=29000, verify=900),
                "interval_median_us": 32000,
            }
        },
        "sglang": {"1": {"steps": 31, "median_us": dict(decode=12000, step=12000), "interval_median_us": 13000}},  # stock
    }
    args = SimpleNamespace(tp=1, tp2_shard=False, num_prompts=8, max_new_tokens=32, forced_tau=None, calibrated_tau=None)
    text = costs.table([stock1, stock, plugin, plugin8, failed], profiles, args)
    assert "FORCED" not in text
    rows = {tuple(line.split(" | ")[:2]): line.split(" | ") for line in text.splitlines() if line.startswith("| sglang")}
    assert rows[("| sglang", "8")][2:8] == ["20.00", "1.00", "-", "-", "-", "-"]
    assert rows[("| sglang", "1")][2:8] == ["10.00", "1.00", "13.00", "1.00", "12.00", "1.00"]
    assert rows[("| sglang", "1")][-2] == "-"  # no plugin overhead for stock
    ddtree = rows[("| sglang-ddtree64", "1")]
    # wall 1.5 s / 60 passes; decode interval 32 / 13 ms; profiled 30 / 12 ms
    assert ddtree[2:9] == ["25.00", "2.50", "32.00", "2.46", "30.00", "2.50", "3.00"]
    assert ddtree[-2:] == ["1.20", "1.50 |"]  # overhead: all but the drafter and the verify forward
    assert rows[("| sglang-ddtree64", "8")][2:8] == ["40.00", "2.00", "-", "-", "-", "-"]
    assert rows[("| sglang-ddtree64 (host)", "1")][2:6] == ["29.00", "3.00", "0.10", "0.20"]  # step, drafter, tree, ...
    assert rows[("| sglang-ddtree64 (host)", "1")][6] == "0.90"  # the verify forward's host time
    assert "exit 1: boom" in rows[("| sglang-dflash", "8")][-2]
    assert "width controller" not in text
    profiles["sglang-ddtree64"]["1"]["widths"] = {"16": 7, "32": 2}
    assert "| sglang-ddtree64 | 1 | 16: 7, 32: 2 |" in costs.table([plugin], profiles, args).splitlines()
    # 4 prompts: batch 8 ran steps of 4 requests, which the profile keys by 4
    profiles["sglang-ddtree64"]["4"] = {"steps": 9, "median_us": dict(phases, step=45000)}
    forced = {"DDTREE": 10.2}  # the header says the outputs are not the target's
    args = SimpleNamespace(tp=1, tp2_shard=True, num_prompts=4, max_new_tokens=32, forced_tau=forced, calibrated_tau=None)
    text = costs.table([plugin8], profiles, args)
    assert "of one TP=2 rank" in text and "| sglang-ddtree64 | 8 | 40.00 | - | - | - | 45.00 | - | 3.00 |" in text
    assert "FORCED ACCEPTANCE" in text.splitlines()[2] and "NOT the target's" in text and "10.2" in text
    args = SimpleNamespace(**{**vars(args), "forced_tau": None, "calibrated_tau": (7.7, 10.2), "budgets": "15,31"})
    args.model_taus = costs.model_taus(args, 16)  # the header gives the model's tokens a pass by width
    header = costs.table([plugin8], profiles, args).splitlines()[2]
    assert "FORCED ACCEPTANCE" in header and "(7.7, 10.2)" in header and "DFLASH_CHAIN 7.70, DDTREE 15 7.70" in header
    args.calibrated_tau, args.budgets = (3.0, 4.0), "15"  # the best 15 prefixes are no longer the chain: 3.01 against 3
    assert costs.model_taus(args, 16) == "DFLASH_CHAIN 3.00, DDTREE 15 3.01"


def test_tp2_shard_halves_what_tp2_splits():
    text = costs.tp2_shard(costs.QWEN36_27B_TEXT)
    assert (text["num_attention_heads"], text["num_key_value_heads"]) == (12, 2)
    assert (text["linear_num_key_heads"], text["linear_num_value_heads"], text["intermediate_size"]) == (8, 24, 8704)
    assert text["hidden_size"] == 5120 and text["vocab_size"] == 248_320 and text["num_hidden_layers"] == 64


def test_mtp_runs_are_sglangs_nextn_with_the_target_as_draft(tmp_path):
    """0.5.23: SGLang's own MTP (NEXTN, the target its own draft, dummy weights) as a chain and as a tree, after the
    harness's runs, with the plugin loaded and no profile; --runs picks and orders them with the rest."""
    argv = ["--sglang", "0.5.23", "--speculative-algorithm", "DFLASH_CHAIN", "DDTREE", "DFLASH", "--budgets", "63"]
    target, draft = tmp_path / "target", tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text('{"block_size": 16}')
    (tmp_path / "sglang-mtp.profile.json").write_text("{}")  # an earlier call's: gone, as the other runs' are
    runs = {r.name: r for r in costs.step_runs(h.parse_args(argv), target, draft, tmp_path)}
    assert list(runs) == ["sglang", "sglang-dflash-chain", "sglang-ddtree63", h.BUILTIN, costs.MTP, costs.EAGLE_TREE]
    assert not (tmp_path / "sglang-mtp.profile.json").exists()
    stock = runs["sglang"].engine_kwargs
    for name, shape in [(costs.MTP, (3, 1, 4)), (costs.EAGLE_TREE, (3, 4, 8))]:
        run = runs[name]
        kw = run.engine_kwargs
        assert run.plugin and "SGLANG_DFLASH_PROFILE" not in run.env  # stock SGLang for NEXTN; wall clock only
        assert (kw["speculative_algorithm"], kw["speculative_draft_model_path"]) == ("NEXTN", str(target))
        assert (kw["speculative_num_steps"], kw["speculative_eagle_topk"], kw["speculative_num_draft_tokens"]) == shape
        assert kw["load_format"] == kw["speculative_draft_load_format"] == "dummy"
        assert {k: v for k, v in kw.items() if not k.startswith("speculative_")} == stock  # the stock run's, else
    assert stock["load_format"] == "dummy" and stock["context_length"] == 2048 and "cuda_graph_max_bs_decode" in stock
    assert stock["cuda_graph_bs_decode"] == [1, 8]  # graphs at the timed batch sizes only, in 0.5.23's spelling
    assert all(
        "SGLANG_DFLASH_PROFILE" in runs[n].env and "SGLANG_DFLASH_PROFILE_KERNELS" not in runs[n].env for n in list(runs)[:4]
    )
    listed = costs.step_runs(h.parse_args(argv), target, draft, tmp_path, list_kernels=20)
    assert listed[0].env["SGLANG_DFLASH_PROFILE_KERNELS"] == "20"
    picked = costs.step_runs(h.parse_args([*argv, "--runs", "sglang-eagle-tree,sglang,sglang-mtp"]), target, draft, tmp_path)
    assert [r.name for r in picked] == [costs.EAGLE_TREE, "sglang", costs.MTP]
    assert not costs.mtp_runs(h.parse_args(["--sglang", "0.5.11"]), target)  # its EAGLE needs ops the stand-in lacks


@pytest.mark.parametrize("release, graphs, requests", [("0.5.11", "cuda_graph_bs", "max_running_requests"),
                                                        ("0.5.23", "cuda_graph_bs_decode", "max_running_requests")])  # fmt: skip
def test_default_graphs_leave_the_graph_sizes_and_request_count_to_sglang(tmp_path, release, graphs, requests):
    argv = ["--sglang", release, "--speculative-algorithm", "DDTREE", "--budgets", "31", "--batches", "1,8,32"]
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text('{"block_size": 16}')
    timed = costs.step_runs(h.parse_args(argv), tmp_path / "target", draft, tmp_path)
    default = costs.step_runs(h.parse_args(argv), tmp_path / "target", draft, tmp_path, default_graphs=True)
    assert all(r.engine_kwargs[graphs] == [1, 8, 32] and r.engine_kwargs[requests] == 32 for r in timed)
    max_bs = h.RENAMED_0_5_23["cuda_graph_max_bs"] if release == "0.5.23" else "cuda_graph_max_bs"
    for r in default:
        assert not {graphs, max_bs, requests} & set(r.engine_kwargs), r.engine_kwargs
        assert r.engine_kwargs["load_format"] == "dummy"


def test_graph_memory_read_from_both_releases_capture_logs():
    """SGLang 0.5.11's and 0.5.23's capture lines (as their logs print them) and the workers' width-tier line."""
    log_0511 = ("[x] Capture cuda graph begin. This can take up to several minutes. avail mem=15.58 GB\n"
                "[x] Capture cuda graph end. Time elapsed: 9.00 s. mem usage=5.70 GB. avail mem=15.47 GB.\n"
                "[x] DDTREE: verify widths [1, 2, 32] chosen per step by cost (SGLANG_DFLASH_WIDTHS); the narrower tiers "
                "took 2.67 GiB of GPU memory (graphs included; the memory plan's estimate was logged as the KV cache was "
                "sized).\n")  # fmt: skip
    log_0523 = (
        "[x] Capture target verify CUDA graph end. bs=[1, 8], elapsed=8.85 s, mem usage=0.32 GB, avail mem=11.45 GB."
        "\n[x] Capture draft verify CUDA graph end. bs=[1, 8], elapsed=8.14 s, mem usage=0.01 GB, avail mem=11.44 GB.\n"
    )
    assert costs.graph_memory(log_0511) == ([5.70], 2.67)
    assert costs.graph_memory(log_0523) == ([0.32, 0.01], None)
    assert costs.graph_memory("no capture") == ([], None)
    table = costs.memory_table({"sglang-ddtree31-widths": log_0511, h.BUILTIN: log_0523, "sglang": ""})
    assert "| sglang-ddtree31-widths | 5.70 | 5.70 | 2.67 |" in table
    assert f"| {h.BUILTIN} | 0.32, 0.01 | 0.33 | - |" in table and "| sglang | - | 0.00 | - |" in table


def test_table_rows_of_sglangs_own_mtp():
    """No profile: wall time per step (their target passes, spec_verify_ct) and tokens per pass, as builtin DFLASH."""
    stock = h.Run("sglang", 1, outputs=[[1]] * 2, wall_s=0.64, extra=dict(meta=[dict(completion_tokens=32)] * 2))
    passes = [dict(completion_tokens=32, spec_verify_ct=16)] * 2
    mtp = h.Run(costs.MTP, 1, outputs=[[1]] * 2, wall_s=0.96, extra=dict(meta=passes, tokens_per_pass=2.0))
    args = SimpleNamespace(tp=1, tp2_shard=True, num_prompts=2, max_new_tokens=32, forced_tau=None, calibrated_tau=None)
    text = costs.table([stock, mtp], {"sglang": {"1": {"steps": 31, "median_us": dict(decode=9000, step=9000)}}}, args)
    row = next(line.split(" | ") for line in text.splitlines() if line.startswith(f"| {costs.MTP} |"))
    assert row[2:6] == ["30.00", "3.00", "-", "-"]  # 0.96 s / 32 passes; stock 0.64 s / 64 tokens
    assert row[-2:] == ["-", "2.00 |"]


MTP_PROBE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from sglang.srt.plugins import load_plugins; load_plugins()  # as the Engine's processes do: the plugin loaded
    from sglang.srt.arg_groups.model_override_base import resolved_view
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    import sglang_step_costs as costs

    h = costs.h
    text = dict(costs.QWEN36_27B_TEXT, vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=8,
                layer_types=[h.LIN, h.LIN, h.LIN, h.FULL] * 2, num_attention_heads=4, num_key_value_heads=2,
                head_dim=64, linear_num_key_heads=2, linear_num_value_heads=4)
    target = costs.write_target(Path(sys.argv[1]), text)
    out = {}
    for run in costs.mtp_runs(h.parse_args(["--sglang", "0.5.23", "--mem-fraction", "0.85"]), target):
        a = ServerArgs(**dict(run.engine_kwargs, load_format="dummy", context_length=2048, device="cpu"))
        a.resolve_once()
        v = resolved_view(a)
        row = {k: getattr(v, k) for k in ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
               "speculative_num_draft_tokens", "speculative_draft_model_path", "speculative_draft_load_format")}
        row["target"] = ModelConfig.from_server_args(v).hf_config.architectures
        row["draft"] = ModelConfig.from_server_args(v, model_path=v.speculative_draft_model_path,
                                                    is_draft_model=True).hf_config.architectures
        worker = SpeculativeAlgorithm.from_string(v.speculative_algorithm).create_worker(a)
        row["worker"] = f"{worker.__module__}.{worker.__name__}"
        out[run.name] = row
    print("RESULTS" + json.dumps(out))
    """
)


@pytest.mark.sglang
@pytest.mark.skipif(installed_version() not in costs.MTP_RELEASES, reason="the MTP runs are 0.5.23's")
def test_sglang_resolves_the_mtp_runs(tmp_path):
    """SGLang 0.5.23's server-argument resolution (on CPU) takes both runs as built: NEXTN becomes EAGLE on spec v2's
    worker, topk 4 stays (tree drafting on a hybrid GDN target), and the draft of a Qwen3.5 target is its MTP layer."""
    path = os.pathsep.join([str(STUB), str(ROOT / "benchmarks" / "gpu"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}  # the import-only sgl_kernel stand-in, the script's folder
    out = subprocess.run([sys.executable, "-c", MTP_PROBE, str(tmp_path / "target")], capture_output=True, text=True,
                         timeout=600, env=env)  # fmt: skip
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULTS")]
    assert lines, out.stdout[-2000:] + out.stderr[-4000:]
    res = json.loads(lines[0].removeprefix("RESULTS"))
    target = str(tmp_path / "target")
    for name, shape in [(costs.MTP, [3, 1, 4]), (costs.EAGLE_TREE, [3, 4, 8])]:
        row = res[name]
        assert row["speculative_algorithm"] == "EAGLE"  # NEXTN is its alias
        assert [row["speculative_num_steps"], row["speculative_eagle_topk"], row["speculative_num_draft_tokens"]] == shape
        assert (row["speculative_draft_model_path"], row["speculative_draft_load_format"]) == (target, "dummy")
        assert (row["target"], row["draft"]) == (["Qwen3_5ForConditionalGeneration"], ["Qwen3_5ForCausalLMMTP"])
        assert row["worker"] == "sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2"


@pytest.mark.sglang
def test_every_step_cost_run_argument_is_the_installed_releases(tmp_path):
    """Each engine the step-cost script starts (stock, ours, SGLang's DFLASH and, on 0.5.23, its MTP chain and tree)
    passes only fields of the installed SGLang's ServerArgs, in that release's spelling."""
    import inspect

    from sglang.srt.server_args import ServerArgs

    release = installed_version()
    (tmp_path / "draft").mkdir()
    (tmp_path / "draft" / "config.json").write_text('{"block_size": 16}')
    argv = ["--sglang", release, "--speculative-algorithm", "DFLASH_CHAIN", "DDTREE", "DFLASH", "--budgets", "63"]
    runs = costs.step_runs(h.parse_args(argv), tmp_path / "target", tmp_path / "draft", tmp_path)
    fields = set(inspect.signature(ServerArgs).parameters)
    assert len(runs) >= 3
    for run in runs:
        assert set(run.engine_kwargs) <= fields, (run.name, sorted(set(run.engine_kwargs) - fields))


def test_tokens_per_second_table_and_plot(tmp_path):
    """Each run's emitted tokens over its batches' wall time, by batch, with the ratio to stock's, and over all batches
    in turn (512 tokens in 3.2 s for stock, in 1.6 s for DDTREE 32; none for a run with a failed batch); --plot draws
    the table and the PNG again from step_costs.json alone (the GPU machine may lack matplotlib)."""
    out = [[1] * 32] * 8  # 256 tokens a batch size
    runs = [
        h.Run("sglang", 1, outputs=out, wall_s=2.56),  # 100 tokens/s
        h.Run("sglang", 8, outputs=out, wall_s=0.64),  # 400
        h.Run("sglang-ddtree64", 1, outputs=out, wall_s=1.28),  # 200
        h.Run("sglang-ddtree64", 8, error="exit 1"),
        h.Run("sglang-ddtree32", 1, outputs=out, wall_s=1.44),  # 178
        h.Run("sglang-ddtree32", 8, outputs=out, wall_s=0.16),  # 1600
    ]
    text = costs.throughput_table(runs, None)
    rows = {line.split(" | ")[0]: line.split(" | ")[1:] for line in text.splitlines() if line.startswith("| sglang")}
    assert rows["| sglang"] == ["100 (1.00x)", "400 (1.00x)", "160 (1.00x) |"]
    assert rows["| sglang-ddtree64"] == ["200 (2.00x)", "-", "- |"]
    assert rows["| sglang-ddtree32"] == ["178 (1.78x)", "1600 (4.00x)", "320 (2.00x) |"]
    assert "all batches" not in costs.throughput_table(runs[:1] + runs[2:3], None)
    assert "FORCED" not in text and "FORCED ACCEPTANCE" in costs.throughput_table(runs, {"DDTREE": 10.2})
    data = dict(forced_tau=None, runs=[h.asdict(r) for r in runs])
    (tmp_path / "step_costs.json").write_text(json.dumps(data))
    assert costs.main(["--plot", str(tmp_path / "step_costs.json"), "--out", str(tmp_path / "drawn")]) == 0
    assert (tmp_path / "drawn" / "tokens_per_s.md").read_text().strip() == text
    (tmp_path / "old.json").write_text(json.dumps(data["runs"]))  # the list an earlier version wrote
    assert costs.main([f"--plot={tmp_path / 'old.json'}", "--out", str(tmp_path / "old")]) == 0
    assert (tmp_path / "old" / "tokens_per_s.md").read_text().strip() == text
    data["decode_rates"] = [["sglang", 1, 50.0], ["sglang-ddtree32", 1, 150.0]]  # steady decode, as main writes it
    (tmp_path / "step_costs.json").write_text(json.dumps(data))
    assert costs.main(["--plot", str(tmp_path / "step_costs.json"), "--out", str(tmp_path / "decode")]) == 0
    drawn = (tmp_path / "decode" / "tokens_per_s.md").read_text()
    assert drawn.startswith(text) and costs.DECODE in drawn and "| sglang-ddtree32 | 150 (3.00x) | - | - |" in drawn
    png = tmp_path / "drawn" / "tokens_per_s.png"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert not png.exists()
    else:
        assert png.read_bytes()[:4] == b"\x89PNG"


def test_steady_decode_tokens_per_second():
    """Requests x tokens a pass over the profile's median decode interval at that many requests, by hand: stock 8
    requests a 20 ms step: 400/s; DDTREE at 8 requests, 6 tokens a pass, 40 ms: 1,200/s (3.00x); a batch larger than
    the prompts is keyed by the prompts (4); no profile or no output: no rate. In turn: 256 tokens a batch, stock at
    1 and 8 requests 2.56 + 0.64 s, DDTREE 1.28 + 0.2133 s."""
    out = [[1] * 32] * 8
    runs = [
        h.Run("sglang", 1, outputs=out, wall_s=9.0),
        h.Run("sglang", 8, outputs=out, wall_s=9.0),
        h.Run("sglang-ddtree32", 1, outputs=out, wall_s=9.0, extra=dict(tokens_per_pass=5.0)),
        h.Run("sglang-ddtree32", 8, outputs=out, wall_s=9.0, extra=dict(tokens_per_pass=6.0)),
        h.Run("sglang-ddtree64", 1, error="exit 1"),
        h.Run("sglang-ddtree64", 8, outputs=out, wall_s=9.0, extra=dict(tokens_per_pass=6.0)),
    ]
    profiles = {
        "sglang": {"1": dict(interval_median_us=10_000.0), "8": dict(interval_median_us=20_000.0)},
        "sglang-ddtree32": {"1": dict(interval_median_us=25_000.0), "8": dict(interval_median_us=40_000.0)},
        "sglang-ddtree64": {"1": dict(interval_median_us=25_000.0)},
    }
    rate = costs.decode_rates(runs, profiles, 8)
    assert rate == pytest.approx({("sglang", 1): 100.0, ("sglang", 8): 400.0, ("sglang-ddtree32", 1): 200.0,
                                  ("sglang-ddtree32", 8): 1200.0})  # fmt: skip
    text = costs.throughput_table(runs, None, rate, costs.DECODE)
    rows = {line.split(" | ")[0]: line.split(" | ")[1:] for line in text.splitlines() if line.startswith("| sglang")}
    assert rows["| sglang"] == ["100 (1.00x)", "400 (1.00x)", "160 (1.00x) |"]
    assert rows["| sglang-ddtree32"] == ["200 (2.00x)", "1200 (3.00x)", f"{512 / (1.28 + 256 / 1200):.0f} (2.14x) |"]
    assert rows["| sglang-ddtree64"] == ["-", "-", "- |"]
    assert costs.DECODE in text
    few = costs.decode_rates(runs, profiles, 4)  # 8 requests asked of 4 prompts: keyed by 4, which has no profile
    assert ("sglang", 8) not in few and few[("sglang", 1)] == pytest.approx(100.0)
    del profiles["sglang"]["8"]
    assert ("sglang", 8) not in costs.decode_rates(runs, profiles, 8)


def test_checkpoints_are_remade_in_an_earlier_calls_work_folder(tmp_path):
    """A second call on the same machine finds the first's drafter in the work folder: it is made again (a second
    call once stopped at init_draft's "--out not empty")."""
    small = dict(costs.QWEN36_27B_TEXT, vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=8,
                 layer_types=[h.LIN, h.LIN, h.LIN, h.FULL] * 2, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                 linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=8, linear_value_head_dim=8)  # fmt: skip
    log = h.Log(tmp_path / "log")
    first = costs.build(tmp_path, log, small)
    second = costs.build(tmp_path, log, dict(small, hidden_size=48))
    assert first == second and json.loads((second[1] / "config.json").read_text())["hidden_size"] == 48
