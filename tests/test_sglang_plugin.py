"""The SGLang plugin's registration and server arguments, against the real SGLang 0.5.10.post1.

Every SGLang check runs in a fresh interpreter that never imports sglang_dflash itself: only the
installed `sglang_dflash.pth` (pip install -e . / a wheel) can have patched SGLang there. SGLang
is imported on CPU (device="cpu"); nothing here needs its compiled sgl_kernel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from model_helpers import save_tiny_target, tiny_target_config
from sglang_probes import REPLAY_SLOTS

from sglang_dflash.init_draft import init_draft
from sglang_dflash.sglang import bootstrap
from sglang_dflash.sglang.server_args import SUPPORTED_SGLANG, check_sglang_version

pytest.importorskip("sglang", reason="SGLang 0.5.10.post1 is installed by tests/setup_env.sh")

LIN, FULL = "linear_attention", "full_attention"

# One interpreter for all ServerArgs cases (importing SGLang takes ~10 s): each case prints the
# resolved fields or the error message.
# SGLang asserts a CUDA device for extra_buffer (the radix cache's strategy on hybrid targets): the probe says it has one.
PROBE = textwrap.dedent(
    """
    import dataclasses, json, sys
    import sglang.srt.server_args as s; s.is_cuda = lambda: True
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    results = {}
    for name, kw in json.loads(sys.argv[1]).items():
        try:
            a = ServerArgs(device="cpu", random_seed=0, **kw)  # the seed is random per process otherwise
        except Exception as e:
            results[name] = {"error": f"{type(e).__name__}: {e}"}
            continue
        algo = SpeculativeAlgorithm.from_string(a.speculative_algorithm)
        row = {k: getattr(a, k) for k in ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
               "speculative_num_draft_tokens", "disable_overlap_schedule", "max_running_requests", "enable_mixed_chunk",
               "disable_radix_cache")}
        row["all_fields"] = {k: repr(v) for k, v in dataclasses.asdict(a).items()}
        row["algo"] = repr(algo)
        row["is_eagle"] = algo.is_eagle() if not algo.is_none() else None
        if not algo.is_none() and a.speculative_algorithm in ("DFLASH", "DDTREE"):
            try:
                row["create_worker"] = algo.create_worker(a).__name__
            except Exception as e:
                row["create_worker"] = f"{type(e).__name__}: {e}"
        results[name] = row
    results["_plugin_modules"] = sorted(m for m in sys.modules if m.startswith("sglang_dflash"))
    print("RESULTS" + json.dumps(results))
    """
)


def run_fresh(code: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).parent, env={**os.environ, **(env or {})})  # fmt: skip


def ours(method: str) -> str:
    """Python that prints `PATCHED True` when `method` is the plugin's wrapper (its code lives in sglang_dflash),
    not merely marked: a mark inherited from a patched base class once hid a missing patch."""
    return f"print('PATCHED', 'sglang_dflash' in {method}.__code__.co_filename)"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("plugin")
    save_tiny_target(root / "target", tiny_target_config(layer_types=(LIN, LIN, LIN, FULL)))
    init_draft(root / "target", root / "draft", num_layers=2, block_size=16, taps=3)
    save_tiny_target(root / "other", tiny_target_config(layer_types=(LIN, FULL), hidden=32))
    return root


@pytest.fixture(scope="module")
def probe(pair):
    t, d = str(pair / "target"), str(pair / "draft")
    ours = dict(model_path=t, speculative_draft_model_path=d)
    cases = {
        "plain": dict(model_path=t),
        "eagle": dict(model_path=t, speculative_algorithm="EAGLE", speculative_draft_model_path=d),
        "ddtree_cmd": {**ours, "speculative_algorithm": "DDTREE", "speculative_num_draft_tokens": 33},
        "ddtree_default": {**ours, "speculative_algorithm": "ddtree"},
        "dflash_default": {**ours, "speculative_algorithm": "DFLASH"},
        "dflash_8": {**ours, "speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 8},
        "no_draft": dict(model_path=t, speculative_algorithm="DDTREE"),
        "mismatch": dict(model_path=str(pair / "other"), speculative_draft_model_path=d, speculative_algorithm="DFLASH"),
        "dp_attention": {**ours, "speculative_algorithm": "DDTREE", "enable_dp_attention": True, "tp_size": 2, "dp_size": 2},
        "pipeline": {**ours, "speculative_algorithm": "DFLASH", "pp_size": 2},
        "dflash_too_many": {**ours, "speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 20},
        "ddtree_one": {**ours, "speculative_algorithm": "DDTREE", "speculative_num_draft_tokens": 1},
        "ddtree_paged": {**ours, "speculative_algorithm": "DDTREE", "page_size": 16},
        "ddtree_steps": {**ours, "speculative_algorithm": "DDTREE", "speculative_num_steps": 3},
        "ddtree_tp2": {**ours, "speculative_algorithm": "DDTREE", "tp_size": 2},
        # issue 5's command (and the A6000 preset) asks for extra_buffer, which SGLang refuses without the radix cache
        "ddtree_extra_buffer": {
            **ours,
            "speculative_algorithm": "DDTREE",
            "speculative_num_draft_tokens": 33,
            "mamba_scheduler_strategy": "extra_buffer",
        },
        "ddtree_no_radix": {
            **ours,
            "speculative_algorithm": "DDTREE",
            "mamba_scheduler_strategy": "extra_buffer",
            "disable_radix_cache": True,
        },
    }
    out = run_fresh(PROBE, json.dumps(cases))
    assert "RESULTS" in out.stdout, out.stderr[-3000:]
    with_plugin = json.loads(out.stdout.split("RESULTS", 1)[1])
    off = run_fresh(PROBE, json.dumps({k: cases[k] for k in ("plain", "eagle")}), env={bootstrap.DISABLE_ENV: "1"})
    without_plugin = json.loads(off.stdout.split("RESULTS", 1)[1])
    return with_plugin, without_plugin


def test_launch_server_help_lists_both_algorithms():
    out = run_fresh(
        "import runpy, sys; sys.argv = ['launch_server', '--help']; runpy.run_module('sglang.launch_server', run_name='__main__')"
    )
    line = next(line for line in out.stdout.splitlines() if "--speculative-algorithm {" in line)
    assert "DFLASH" in line and "DDTREE" in line and "EAGLE" in line, line


def test_issue_command_resolves_to_our_algorithm(probe):
    r = probe[0]["ddtree_cmd"]
    assert r["algo"] == "<SpeculativeAlgorithm.DDTREE (sglang-dflash)>" and r["is_eagle"] is True
    assert (r["speculative_num_steps"], r["speculative_eagle_topk"], r["speculative_num_draft_tokens"]) == (15, 8, 33)
    assert r["disable_overlap_schedule"] and not r["enable_mixed_chunk"] and r["max_running_requests"] == 48
    assert not r["disable_radix_cache"] and r["all_fields"]["mamba_scheduler_strategy"] == "'extra_buffer'"
    assert probe[0]["ddtree_default"]["speculative_num_draft_tokens"] == 32
    assert r["create_worker"] == "DDTreeWorker" and probe[0]["dflash_default"]["create_worker"] == "DFlashWorker"
    eb = probe[0]["ddtree_extra_buffer"]
    assert not eb["disable_radix_cache"] and eb["all_fields"]["mamba_scheduler_strategy"] == "'extra_buffer'", eb.get("error")
    off = probe[0]["ddtree_no_radix"]  # extra_buffer without the radix cache: SGLang would refuse it
    assert off["disable_radix_cache"] and off["all_fields"]["mamba_scheduler_strategy"] == "'no_buffer'", off.get("error")
    assert probe[0]["ddtree_tp2"]["create_worker"] == "DDTreeWorker"


def test_radix_cache_on_takes_extra_buffer(pair):
    """The radix cache stays on and the strategy becomes extra_buffer before SGLang's hybrid-model checks (which
    refuse speculative decoding with the radix cache under no_buffer); a track interval below the verify's nodes
    is refused."""
    t, d = str(pair / "target"), str(pair / "draft")
    ours = dict(model_path=t, speculative_draft_model_path=d, speculative_algorithm="DDTREE")
    cases = {
        "default": ours,
        "budget64": dict(ours, speculative_num_draft_tokens=65),
        "short_interval": dict(ours, speculative_num_draft_tokens=65, mamba_track_interval=32),
        "dflash_no_buffer": dict(ours, speculative_algorithm="DFLASH", mamba_scheduler_strategy="no_buffer"),
    }
    out = run_fresh(PROBE, json.dumps(cases))
    assert "RESULTS" in out.stdout, out.stderr[-3000:]
    r = json.loads(out.stdout.split("RESULTS", 1)[1])
    for name in ("default", "budget64", "dflash_no_buffer"):
        assert not r[name].get("error"), r[name]["error"]
        assert not r[name]["disable_radix_cache"] and r[name]["all_fields"]["mamba_scheduler_strategy"] == "'extra_buffer'"
    assert "--mamba-track-interval (32) must be >= --speculative-num-draft-tokens (65)" in r["short_interval"]["error"]


def test_only_hybrid_targets_get_a_mamba_strategy():
    from sglang_dflash.sglang.server_args import hybrid_target

    hybrid = {"layer_types": ["linear_attention", "full_attention"], "hidden_size": 8}
    assert hybrid_target(hybrid) and hybrid_target({"text_config": hybrid, "vision_config": {}})
    assert not hybrid_target({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 8, "num_hidden_layers": 2})
    assert not hybrid_target({"layer_types": ["full_attention", "sliding_attention"]})


def test_dflash_verifies_the_drafter_block_as_a_chain(probe):
    r = probe[0]["dflash_default"]
    assert (r["speculative_num_steps"], r["speculative_eagle_topk"], r["speculative_num_draft_tokens"]) == (15, 1, 16)
    r = probe[0]["dflash_8"]
    assert (r["speculative_num_steps"], r["speculative_num_draft_tokens"]) == (7, 8)


@pytest.mark.parametrize(
    "case,message",
    [
        ("no_draft", "needs --speculative-draft-model-path"),
        ("mismatch", "hidden size: drafter 48 != target 32"),
        ("dp_attention", "does not support --enable-dp-attention"),
        ("pipeline", "does not support --pp-size > 1"),
        ("dflash_too_many", "must be in [2, 16], got 20"),
        ("ddtree_one", "needs --speculative-num-draft-tokens >= 2"),
        ("ddtree_paged", "DDTREE needs --page-size 1"),
        ("ddtree_steps", "--speculative-num-steps is set by DDTREE from the drafter (15); got 3"),
    ],
)
def test_refusals_name_the_problem(probe, case, message):
    assert message in probe[0][case].get("error", ""), probe[0][case]


def test_sglang_is_unchanged_without_our_algorithms(probe):
    with_plugin, without_plugin = probe
    for case in ("plain", "eagle"):
        assert with_plugin[case]["all_fields"] == without_plugin[case]["all_fields"]
        assert with_plugin[case]["algo"] == without_plugin[case]["algo"]
    assert "sglang_dflash.sglang.hooks" not in without_plugin["_plugin_modules"]  # disabled: only the .pth's bootstrap ran
    assert "sglang_dflash.sglang.hooks" in with_plugin["_plugin_modules"]
    assert "sglang_dflash.sglang.worker" in with_plugin["_plugin_modules"]  # create_worker was reached


def test_claim_marks_each_class_once():
    """The hooks patch a class once (so patching twice never wraps twice); a subclass is not taken for patched
    because its base is."""
    from sglang_dflash.sglang.hooks import claim

    class Base:
        pass

    class Sub(Base):
        pass

    assert claim(Base) and not claim(Base)
    assert claim(Sub) and not claim(Sub)


def test_bootstrap_does_nothing_without_sglang(monkeypatch):
    import importlib.util

    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path if not isinstance(f, bootstrap.SGLangHookFinder)])
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "sglang" else real(name, *a))
    bootstrap.install()
    assert not any(isinstance(f, bootstrap.SGLangHookFinder) for f in sys.meta_path)


def test_unsupported_sglang_version_is_named():
    check_sglang_version("0.5.10.post1")
    with pytest.raises(ValueError, match="support SGLang " + ", ".join(SUPPORTED_SGLANG).replace(".", r"\.")):
        check_sglang_version("0.5.9")


def test_entry_point_for_sglang_plugin_loaders():
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="sglang.srt.plugins") if e.name == "sglang_dflash"]
    assert ep.value == "sglang_dflash.sglang.plugin:load" and callable(ep.load())


def test_drafter_architecture_is_registered_with_sglang():
    """In a fresh interpreter (with the test-only sgl_kernel stand-in, as SGLang's model modules import it)."""
    code = "from sglang.srt.models.registry import ModelRegistry as M; print('ARCH', M.models['DFlashDraftModel'].__module__)"
    stub = str(Path(__file__).parent / "sgl_kernel_stub")
    out = run_fresh(code, env={"PYTHONPATH": os.pathsep.join([stub, os.environ.get("PYTHONPATH", "")])})
    assert "ARCH sglang_dflash.sglang.draft_model" in out.stdout, out.stderr[-2000:]


def test_model_runner_gets_the_hidden_capture_patch():
    """In a fresh interpreter (with the test-only sgl_kernel stand-in, which SGLang's model runner imports):
    `ModelRunner.init_device_graphs` is wrapped, and is not when the plugin is disabled."""
    code = "import sglang.srt.model_executor.model_runner as m; " + ours("m.ModelRunner.init_device_graphs")
    stub = str(Path(__file__).parent / "sgl_kernel_stub")
    env = {"PYTHONPATH": os.pathsep.join([stub, os.environ.get("PYTHONPATH", "")]), "SGLANG_USE_CPU_ENGINE": "1"}
    out = run_fresh(code, env=env)
    assert "PATCHED True" in out.stdout, out.stderr[-2000:]
    off = run_fresh(code, env={**env, "SGLANG_DFLASH_DISABLE": "1"})
    assert "PATCHED False" in off.stdout, off.stderr[-2000:]


MAMBA_REPLAY = REPLAY_SLOTS + (
    """
import json
import sglang.srt.layers.attention.hybrid_linear_attn_backend as m

{ours}
print('SLOTS', json.dumps(replay_slots('sglang_dflash_num_reqs')))
"""
).format(ours=ours("m.MambaAttnBackendBase._replay_metadata"))


def test_mamba_graph_replay_counts_a_length_one_request_as_real():
    """SGLang 0.5.10 counts graph padding as the requests whose length equals the fill value (1), so with a
    one-token prompt in the batch the LAST real request verifies from state slot -1 (stock, no mark). Our
    verify batches mark their request count, and then both real requests keep their slots."""
    stub = str(Path(__file__).parent / "sgl_kernel_stub")
    env = {"PYTHONPATH": os.pathsep.join([stub, os.environ.get("PYTHONPATH", "")]), "SGLANG_USE_CPU_ENGINE": "1"}
    out = run_fresh(MAMBA_REPLAY, env=env)
    assert "PATCHED True" in out.stdout, out.stderr[-2000:]
    line = next((x for x in out.stdout.splitlines() if x.startswith("SLOTS ")), None)
    assert line, out.stdout + out.stderr[-2000:]
    assert json.loads(line.removeprefix("SLOTS ")) == {"None": [12, -1, -1], "2": [12, 13, -1]}  # the bug unmarked


def test_stock_decode_profile_hook_attaches_only_with_the_variable():
    code = "import sglang.srt.managers.tp_worker as m; " + ours("m.TpModelWorker.forward_batch_generation")
    env = {"PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "sgl_kernel_stub"), os.environ.get("PYTHONPATH", "")])}
    on = run_fresh(code, env={**env, "SGLANG_DFLASH_PROFILE": "/tmp/unused.json"})
    assert "PATCHED True" in on.stdout, on.stderr[-2000:]
    off = run_fresh(code, env=env)
    assert "PATCHED False" in off.stdout, off.stderr[-2000:]


@pytest.mark.parametrize(
    "module, method",
    [
        # a subclass of MambaAttnBackendBase, whose own patch must not make this one look done
        ("sglang.srt.layers.attention.linear.gdn_backend", "GDNAttnBackend.forward_extend"),
        ("sglang.srt.layers.attention.hybrid_linear_attn_backend", "HybridLinearAttnBackend.forward_extend"),
        ("sglang.srt.managers.scheduler", "Scheduler._add_request_to_queue"),
        ("sglang.srt.model_executor.model_runner_kv_cache_mixin", "ModelRunnerKVCacheMixin.handle_max_mamba_cache"),
        ("sglang.srt.mem_cache.memory_pool", "HybridReqToTokenPool.__init__"),
    ],
)
def test_runtime_hooks_attach_at_import(module, method):
    """In a fresh interpreter (stand-in sgl_kernel; not SGLang's CPU-engine mode, whose GDN kernels need the real
    one): the tree-verify hooks on `GDNAttnBackend.forward_extend` and `HybridLinearAttnBackend.forward_extend` (they
    act only once `tree_gdn_backend.install` ran; the latter where the tree attention is on), the
    admission hook on `Scheduler._add_request_to_queue` (only under DFLASH/DDTREE) and the memory
    hooks of the tree verify (only with SGLANG_DFLASH_TREE_GDN=1) are in place, and are not when the plugin is
    disabled."""
    code = f"import {module} as m; " + ours(f"m.{method}")
    env = {"PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "sgl_kernel_stub"), os.environ.get("PYTHONPATH", "")])}
    out = run_fresh(code, env=env)
    assert "PATCHED True" in out.stdout, out.stderr[-2000:]
    off = run_fresh(code, env={**env, "SGLANG_DFLASH_DISABLE": "1"})
    assert "PATCHED False" in off.stdout, off.stderr[-2000:]
