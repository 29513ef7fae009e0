"""The SGLang plugin's registration and server arguments, against the installed SGLang (0.5.11 or 0.5.23: CI runs
this file once with each).

Every SGLang check runs in a fresh interpreter that never imports sglang_dflash itself: only what SGLang loads (the
entry point) can have patched SGLang there.
SGLang is imported on CPU (device="cpu"); tests that import its runtime modules put the import-only sgl_kernel
stand-in (tests/sgl_kernel_stub) on the path and say so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from model_helpers import save_tiny_target, tiny_target_config
from paths import STUB as STUB_DIR
from paths import TESTS
from sglang_probes import REPLAY_SLOTS

from sglang_dflash.init_draft import init_draft
from sglang_dflash.sglang.plugin.activate import installed_version
from sglang_dflash.sglang.plugin.versions import release

pytestmark = pytest.mark.sglang  # also run against the second supported SGLang release (.ci/run)

pytest.importorskip("sglang", reason="SGLang is installed by tests/setup_env.sh")
RELEASE = release(installed_version())
assert RELEASE is not None, f"tests/setup_env.sh installs a supported SGLang, not {installed_version()}"
V2 = RELEASE.registry  # 0.5.23: ours registered through SpeculativeAlgorithm.register, served by the spec-v2 worker
STRATEGY = "mamba_radix_cache_strategy" if V2 else "mamba_scheduler_strategy"  # renamed in 0.5.23
STUB = str(STUB_DIR)
STUB_ENV = {"PYTHONPATH": os.pathsep.join([STUB, os.environ.get("PYTHONPATH", "")])}

LIN, FULL = "linear_attention", "full_attention"

# SGLang's entry points (launch_server, Engine, schedulers) call its plugin loader first thing; a probe that builds
# ServerArgs by hand does the same.
LOAD_PLUGINS = "from sglang.srt.plugins import load_plugins; load_plugins()\n"

# One interpreter for all ServerArgs cases (importing SGLang takes ~10 s): each case prints the
# resolved fields or the error message.
# SGLang asserts a CUDA device for extra_buffer (the radix cache's strategy on hybrid targets): the probe says it has one.
PROBE = LOAD_PLUGINS + textwrap.dedent(
    """
    import dataclasses, json, sys
    import sglang.srt.server_args as s; s.is_cuda = lambda: True
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    try:  # SGLang 0.5.23 keeps the input in ServerArgs' fields and what its resolution declared beside them
        from sglang.srt.arg_groups.model_override_base import resolved_view
        import sglang.srt.arg_groups.mamba_hook as m; m._platform_supports_mamba_cache_extra_buffer = lambda: True
    except ImportError:
        resolved_view = lambda a: a
    from sglang_dflash.sglang.hidden_capture import graph_capacity
    results, views = {}, {}
    for name, kw in json.loads(sys.argv[1]).items():
        try:
            a = ServerArgs(device="cpu", random_seed=0, **kw)  # the seed is random per process otherwise
            getattr(a, "resolve_once", lambda: None)()  # 0.5.23: resolution is a step of its own
        except Exception as e:
            results[name] = {"error": f"{type(e).__name__}: {e}"}
            continue
        v = resolved_view(a)
        algo = SpeculativeAlgorithm.from_string(v.speculative_algorithm)
        row = {k: getattr(v, k) for k in ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
               "speculative_num_draft_tokens", "disable_overlap_schedule", "max_running_requests", "enable_mixed_chunk",
               "disable_radix_cache")}
        fields = a.resolved_dict() if hasattr(a, "resolved_dict") else dataclasses.asdict(a)
        row["all_fields"] = {k: repr(x) for k, x in fields.items()}
        row["user_graph_sizes"] = getattr(a, "_sglang_dflash_user_graph_sizes", None)  # `server_args.USER_GRAPH_SIZES`
        row["graph_capacity"] = graph_capacity(a)
        row["graph_capacity_of_view"] = graph_capacity(v)  # a resolved view is taken as it is
        views[name] = (v, algo)
        row["algo"] = repr(algo)
        row["is_eagle"] = algo.is_eagle() if not algo.is_none() else None
        if not algo.is_none() and a.speculative_algorithm in ("DFLASH_CHAIN", "DDTREE"):
            try:
                row["create_worker"] = algo.create_worker(a).__name__
            except Exception as e:
                row["create_worker"] = f"{type(e).__name__}: {e}"
        results[name] = row
    results["_plugin_modules"] = sorted(m for m in sys.modules if m.startswith("sglang_dflash"))
    # last (its module needs sgl_kernel: the import-only stand-in where the real one does not load): the KV slots
    # SGLang reserves a request and decode step, its memory estimate (0.5.11; 0.5.23 estimates per request)
    from paths import use_sgl_kernel_stand_in
    use_sgl_kernel_stand_in()
    try:
        from sglang.srt.managers.utils import get_alloc_len_per_decode
    except ImportError:
        get_alloc_len_per_decode = None
    for name, (v, algo) in views.items():
        alloc = get_alloc_len_per_decode and not algo.is_none()
        results[name]["alloc_len_per_decode"] = get_alloc_len_per_decode(v) if alloc else None
    print("RESULTS" + json.dumps(results))
    """
)


def run_fresh(code: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600,
                          cwd=TESTS, env={**os.environ, **(env or {})})  # fmt: skip


def ours(method: str) -> str:
    """Python that prints `PATCHED True` when `method` goes through one of our hooks (SGLang's HookRegistry's
    wrapper, or the tests' `around`), looked up on the class itself: a patched base class must not make a subclass look done."""
    return f"from sglang_dflash.sglang.plugin.activate import hooked; print('PATCHED', hooked({method}))"


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
        "dflash": {**ours, "speculative_algorithm": "DFLASH"},
        "ddtree_cmd": {**ours, "speculative_algorithm": "DDTREE", "speculative_num_draft_tokens": 33},
        "ddtree_no_overlap": {
            **ours,
            "speculative_algorithm": "DDTREE",
            "speculative_num_draft_tokens": 33,
            "disable_overlap_schedule": True,
        },
        "ddtree_default": {**ours, "speculative_algorithm": "ddtree"},
        "chain_default": {**ours, "speculative_algorithm": "DFLASH_CHAIN"},
        "chain_8": {**ours, "speculative_algorithm": "DFLASH_CHAIN", "speculative_num_draft_tokens": 8},
        "no_draft": dict(model_path=t, speculative_algorithm="DDTREE"),
        "mismatch": dict(model_path=str(pair / "other"), speculative_draft_model_path=d, speculative_algorithm="DFLASH_CHAIN"),
        "dp_attention": {**ours, "speculative_algorithm": "DDTREE", "enable_dp_attention": True, "tp_size": 2, "dp_size": 2},
        "pipeline": {**ours, "speculative_algorithm": "DFLASH_CHAIN", "pp_size": 2},
        "chain_too_many": {**ours, "speculative_algorithm": "DFLASH_CHAIN", "speculative_num_draft_tokens": 20},
        "ddtree_one": {**ours, "speculative_algorithm": "DDTREE", "speculative_num_draft_tokens": 1},
        "ddtree_paged": {**ours, "speculative_algorithm": "DDTREE", "page_size": 16},
        "ddtree_steps": {**ours, "speculative_algorithm": "DDTREE", "speculative_num_steps": 3},
        "ddtree_tp2": {**ours, "speculative_algorithm": "DDTREE", "tp_size": 2},
        # the A6000 preset asks for extra_buffer, which SGLang refuses without the radix cache
        "ddtree_extra_buffer": {
            **ours,
            "speculative_algorithm": "DDTREE",
            "speculative_num_draft_tokens": 33,
            STRATEGY: "extra_buffer",
        },
        "ddtree_no_radix": {
            **ours,
            "speculative_algorithm": "DDTREE",
            STRATEGY: "extra_buffer",
            "disable_radix_cache": True,
        },
    }
    if not V2:  # 0.5.11's graph-size arguments (0.5.23 spells them per phase)
        cases["ddtree_graph_max"] = {**ours, "speculative_algorithm": "DDTREE", "cuda_graph_max_bs": 8}
        cases["ddtree_graph_list"] = {**ours, "speculative_algorithm": "DDTREE", "cuda_graph_bs": [1, 2, 4]}
    out = run_fresh(PROBE, json.dumps(cases))
    assert "RESULTS" in out.stdout, out.stderr[-3000:]
    with_plugin = json.loads(out.stdout.split("RESULTS", 1)[1])
    stock = ("plain", "eagle", "dflash")
    off = run_fresh(PROBE, json.dumps({k: cases[k] for k in stock}), env={"SGLANG_DFLASH_DISABLE": "1"})
    without_plugin = json.loads(off.stdout.split("RESULTS", 1)[1])
    override = run_fresh(PROBE, json.dumps({"dflash": cases["dflash"]}), env={"SGLANG_DFLASH_OVERRIDE_DFLASH": "1"})
    with_override = json.loads(override.stdout.split("RESULTS", 1)[1])
    return with_plugin, without_plugin, with_override


def test_launch_server_help_lists_our_algorithms():
    """Where --speculative-algorithm has a fixed list of choices, ours are in it; where SGLang has a registry (0.5.23),
    the option takes any registered name and --help is exactly stock's."""
    code = (
        "import runpy, sys; sys.argv = ['launch_server', '--help']; runpy.run_module('sglang.launch_server', run_name='__main__')"
    )
    out = run_fresh(code, env={"PYTHONHASHSEED": "0"})  # SGLang lists some choices from a set
    if V2:
        stock = run_fresh(code, env={"PYTHONHASHSEED": "0", "SGLANG_DFLASH_DISABLE": "1"})
        assert "--speculative-algorithm" in out.stdout and out.stdout == stock.stdout, out.stderr[-2000:]
        return
    line = next(line for line in out.stdout.splitlines() if "--speculative-algorithm {" in line)
    assert "DFLASH_CHAIN" in line and "DDTREE" in line and "EAGLE" in line, line
    assert "DFLASH," in line or "DFLASH}" in line, line  # SGLang's own, or our alias where it has none


def test_issue_command_resolves_to_our_algorithm(probe):
    """The issue's command: SGLang's overlap scheduler (its default) and the spec-v2 worker for both of ours, topk 2 x
    16 steps; SGLang reserves max(steps x topk, nodes) KV slots a request and step, so exactly the verify's 33. 0.5.11
    answers is_eagle() (EAGLE's tree verify); 0.5.23 not (it hangs EAGLE's draft model on that question). With
    --disable-overlap-schedule, 0.5.23 runs the same worker synchronously; 0.5.11 (spec v1 there) refuses it by name."""
    r = probe[0]["ddtree_cmd"]
    assert r["algo"] == "<SpeculativeAlgorithm.DDTREE (sglang-dflash)>" and r["is_eagle"] is (not V2), r
    assert r["alloc_len_per_decode"] == (None if V2 else 33), r["alloc_len_per_decode"]  # v2: a per-request estimate
    assert (r["speculative_num_steps"], r["speculative_eagle_topk"], r["speculative_num_draft_tokens"]) == (16, 2, 33)
    assert not r["disable_overlap_schedule"] and not r["enable_mixed_chunk"] and r["max_running_requests"] == 48
    assert not r["disable_radix_cache"] and r["all_fields"][STRATEGY] == "'extra_buffer'"
    assert probe[0]["ddtree_default"]["speculative_num_draft_tokens"] == 32
    workers = ("DDTreeWorkerV2", "DDTreeWorkerV2") if V2 else ("DDTreeWorkerV2For0511", "DDTreeWorkerV2For0511")
    assert (r["create_worker"], probe[0]["chain_default"]["create_worker"]) == workers
    eb = probe[0]["ddtree_extra_buffer"]
    assert not eb["disable_radix_cache"] and eb["all_fields"][STRATEGY] == "'extra_buffer'", eb.get("error")
    if not V2:  # 0.5.23 decides the strategy itself (`auto` without the radix cache)
        off = probe[0]["ddtree_no_radix"]  # extra_buffer without the radix cache: SGLang would refuse it
        assert off["disable_radix_cache"] and off["all_fields"][STRATEGY] == "'no_buffer'", off.get("error")
    assert probe[0]["ddtree_tp2"]["create_worker"] == workers[0]
    off = probe[0]["ddtree_no_overlap"]
    if V2:
        assert off["disable_overlap_schedule"] is True and off["create_worker"] == workers[0], off
    else:
        assert "DDTREE on SGLang 0.5.11 runs under the overlap scheduler only: drop --disable-overlap-schedule" in off["error"]


def test_dflash_is_sglangs_own_unless_opted_in(probe):
    """On a release with a built-in DFLASH (0.5.11), `DFLASH` resolves exactly as without the plugin (same algorithm,
    every server field the same, e.g. mamba_scheduler_strategy left at SGLang's choice); with
    SGLANG_DFLASH_OVERRIDE_DFLASH=1 it is our chain worker. With a registry (0.5.23) it is SGLang's, override or not
    (on CPU SGLang refuses it, with the plugin as without)."""
    with_plugin, without_plugin, with_override = probe
    if V2:
        assert with_plugin["dflash"] == without_plugin["dflash"] == with_override["dflash"]
        return
    assert with_plugin["dflash"]["algo"] == "<SpeculativeAlgorithm.DFLASH: 1>"
    assert with_plugin["dflash"] == without_plugin["dflash"]
    chain = with_override["dflash"]
    assert chain["algo"] == "<SpeculativeAlgorithm.DFLASH_CHAIN (sglang-dflash)>", chain
    assert chain["speculative_algorithm"] == "DFLASH_CHAIN" and chain["create_worker"] == "DDTreeWorkerV2For0511"


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
        "chain_no_buffer": dict(ours, speculative_algorithm="DFLASH_CHAIN", mamba_scheduler_strategy="no_buffer"),
    }
    if V2:  # 0.5.23 picks extra_buffer for hybrid targets itself, and refuses an explicit no_buffer before ours run
        del cases["chain_no_buffer"]
    out = run_fresh(PROBE, json.dumps(cases))
    assert "RESULTS" in out.stdout, out.stderr[-3000:]
    r = json.loads(out.stdout.split("RESULTS", 1)[1])
    for name in ("default", "budget64", "chain_no_buffer")[: 2 if V2 else 3]:
        assert not r[name].get("error"), r[name]["error"]
        assert not r[name]["disable_radix_cache"] and r[name]["all_fields"][STRATEGY] == "'extra_buffer'"
    if V2:  # SGLang's own check refuses it (with an empty message)
        assert "AssertionError" in r["short_interval"]["error"], r["short_interval"]
    else:
        assert "--mamba-track-interval (32) must be >= --speculative-num-draft-tokens (65)" in r["short_interval"]["error"]


def test_only_hybrid_targets_get_a_mamba_strategy():
    from sglang_dflash.sglang.server_args import hybrid_target

    hybrid = {"layer_types": ["linear_attention", "full_attention"], "hidden_size": 8}
    assert hybrid_target(hybrid) and hybrid_target({"text_config": hybrid, "vision_config": {}})
    assert not hybrid_target({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 8, "num_hidden_layers": 2})
    assert not hybrid_target({"layer_types": ["full_attention", "sliding_attention"]})


def test_chain_verifies_the_drafter_block(probe):
    r = probe[0]["chain_default"]
    assert (r["speculative_num_steps"], r["speculative_eagle_topk"], r["speculative_num_draft_tokens"]) == (15, 1, 16)
    r = probe[0]["chain_8"]
    assert (r["speculative_num_steps"], r["speculative_num_draft_tokens"]) == (7, 8)


def test_hidden_capture_rows_follow_the_resolved_node_count(probe):
    """The capture's static rows scale with the verify's node count as resolved (a chain's 16 from the drafter, not
    the command line's none), at one batch size."""
    rows = {case: probe[0][case]["graph_capacity"] for case in ("chain_default", "chain_8", "ddtree_cmd")}
    assert all(probe[0][case]["graph_capacity_of_view"] == n for case, n in rows.items())
    assert rows["chain_default"] * 8 == rows["chain_8"] * 16 and rows["ddtree_cmd"] * 8 == rows["chain_8"] * 33


@pytest.mark.parametrize(
    "case,message",
    [
        ("no_draft", "needs --speculative-draft-model-path"),
        ("mismatch", "hidden size: drafter 48 != target 32"),
        ("dp_attention", "does not support --enable-dp-attention"),
        ("pipeline", "does not support --pp-size > 1"),
        ("chain_too_many", "must be in [2, 16], got 20"),
        ("ddtree_one", "needs --speculative-num-draft-tokens >= 2"),
        ("ddtree_paged", "DDTREE needs --page-size 1"),
        ("ddtree_steps", "--speculative-num-steps is set by DDTREE from the drafter ({steps}); got 3"),
    ],
)
def test_refusals_name_the_problem(probe, case, message):
    message = message.format(steps=16)  # spec v2 (the overlap scheduler, by default): the budget over topk 2
    assert message in probe[0][case].get("error", ""), probe[0][case]


def test_sglang_is_unchanged_without_our_algorithms(probe):
    """Stock algorithms resolve to the same fields with the plugin as without it; a stock process imports only the
    plugin's light part (no SGLang-facing module, so no torch through us)."""
    with_plugin, without_plugin, _ = probe
    for case in without_plugin:
        if case.startswith("_"):
            continue
        assert with_plugin[case].get("all_fields") == without_plugin[case].get("all_fields"), case
        assert with_plugin[case].get("error") == without_plugin[case].get("error"), case  # 0.5.23 refuses DFLASH on CPU
        assert with_plugin[case].get("algo") == without_plugin[case].get("algo"), case
    assert "sglang_dflash.sglang.plugin.activate" not in without_plugin["_plugin_modules"]  # disabled: nothing imported
    assert "sglang_dflash.sglang.plugin.activate" in with_plugin["_plugin_modules"]
    assert "sglang_dflash.sglang.worker_common" in with_plugin["_plugin_modules"]  # create_worker was reached


def test_stock_process_imports_only_the_light_plugin():
    code = (
        LOAD_PLUGINS
        + "import sys, sglang.srt.server_args; print('MODS', sorted(m for m in sys.modules if m.startswith('sglang_dflash')))"
    )
    out = run_fresh(code)
    line = next(x for x in out.stdout.splitlines() if x.startswith("MODS"))
    assert "sglang_dflash.sglang.plugin.activate" in line, out.stdout + out.stderr[-2000:]
    for heavy in ("server_args'", "worker_common", "ddtree_worker", "tree_gdn_backend", "kernels", "models"):
        assert f"sglang_dflash.sglang.{heavy}" not in line and f"sglang_dflash.{heavy}" not in line, line


def test_entry_point_for_sglang_plugin_loaders():
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="sglang.srt.plugins") if e.name == "sglang_dflash"]
    assert ep.value == "sglang_dflash.sglang.plugin.entry:load" and callable(ep.load())


# Runtime patches: in a fresh interpreter with the stand-in sgl_kernel, the runtime activation a scheduler serving
# our algorithm runs (`activate_runtime`), then whether each target is our wrapper.
RUNTIME = """
import importlib, json, sys
from types import SimpleNamespace
from sglang_dflash.sglang.plugin import activate
from sglang_dflash.sglang.plugin.versions import release
if sys.argv[1] == "ours":
    activate.activate_runtime(SimpleNamespace(speculative_algorithm="DDTREE"))
table = release(activate.installed_version())
out = {}
for p in table.runtime:
    obj = importlib.import_module(p.module)
    for name in p.path:
        obj = getattr(obj, name)
    out[p.target] = activate.hooked(obj)
print("RUNTIME" + json.dumps(out))
"""


@pytest.mark.parametrize("serving", ["ours", "stock"])
def test_runtime_hooks_only_where_ours_serves(serving):
    """Every runtime target of the release is wrapped once a scheduler serving ours activates them, and none is in a
    process that did not (a stock server never has them)."""
    out = run_fresh(RUNTIME, serving, env=STUB_ENV)
    assert "RUNTIME" in out.stdout, out.stderr[-3000:]
    wrapped = json.loads(out.stdout.split("RUNTIME", 1)[1])
    assert len(wrapped) == len(RELEASE.runtime) and set(wrapped.values()) == {serving == "ours"}, wrapped


def test_scheduler_init_is_hooked_in_a_scheduler_process():
    """When run_scheduler_process loads the plugins."""
    code = "import sglang.srt.managers.scheduler as m\n" + LOAD_PLUGINS + ours("m.Scheduler.__init__")
    out = run_fresh(code, env=STUB_ENV)
    assert "PATCHED True" in out.stdout, out.stderr[-2000:]


MAMBA_REPLAY = REPLAY_SLOTS + (
    """
import json
from types import SimpleNamespace
from sglang_dflash.sglang.plugin import activate
activate.activate_runtime(SimpleNamespace(speculative_algorithm="DDTREE"))
import sglang.srt.layers.attention.hybrid_linear_attn_backend as m

{ours}
print('SLOTS', json.dumps(replay_slots('sglang_dflash_num_reqs')))
"""
).format(ours=ours("m.MambaAttnBackendBase._replay_metadata"))


def test_mamba_graph_replay_counts_a_length_one_request_as_real():
    """SGLang counts graph padding as the requests whose length equals the fill value (1), so with a
    one-token prompt in the batch the LAST real request verifies from state slot -1 (stock, no mark). Our
    verify batches mark their request count, and then both real requests keep their slots."""
    out = run_fresh(MAMBA_REPLAY, env=STUB_ENV)
    assert "PATCHED True" in out.stdout, out.stderr[-2000:]
    line = next((x for x in out.stdout.splitlines() if x.startswith("SLOTS ")), None)
    assert line, out.stdout + out.stderr[-2000:]
    assert json.loads(line.removeprefix("SLOTS ")) == {"None": [12, -1, -1], "2": [12, 13, -1]}  # the bug unmarked


PROFILE = """
from types import SimpleNamespace
from sglang_dflash.sglang.plugin import activate
activate.activate()
activate.scheduler_init(lambda *a, **k: None, None, SimpleNamespace(speculative_algorithm=None))
import sglang.srt.managers.tp_worker as m
"""


def test_stock_decode_profile_hook_attaches_only_with_the_variable():
    code = PROFILE + ours("m.TpModelWorker.forward_batch_generation")
    on = run_fresh(code, env={**STUB_ENV, "SGLANG_DFLASH_PROFILE": "/tmp/unused.json"})
    assert "PATCHED True" in on.stdout, on.stderr[-2000:]
    off = run_fresh(code, env=STUB_ENV)
    assert "PATCHED False" in off.stdout, off.stderr[-2000:]


def test_launch_server_refuses_our_bad_arguments_in_one_line(pair):
    """`python -m sglang.launch_server` itself (no wrapper): a server argument our algorithm cannot take ends the start-up
    with one line naming it and exit code 2, not a traceback (SGLang's own import-time warnings may come before it)."""
    t, d = str(pair / "target"), str(pair / "draft")
    argv = ["--model-path", t, "--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", d,
            "--speculative-num-draft-tokens", "1", "--device", "cpu", "--disable-radix-cache"]  # fmt: skip
    out = subprocess.run([sys.executable, "-m", "sglang.launch_server", *argv], capture_output=True, text=True, timeout=600,
                         cwd=TESTS)  # fmt: skip
    # 0.5.23's launcher logs its process-tree cleanup after the error
    lines = [line for line in out.stderr.strip().splitlines() if "] kill_process_tree called:" not in line]
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert lines[-1] == "error: DDTREE needs --speculative-num-draft-tokens >= 2 (the root and a budget >= 1) and <= 513, got 1"


def test_the_user_graph_sizes_are_marked_before_sglang_fills_them_in(probe):
    """0.5.11 fills in its CUDA-graph sizes before our resolution sees them: the plugin marks first whether the user
    gave --cuda-graph-bs or --cuda-graph-max-bs (only SGLang's own default sizes are cut to the verify graphs' memory:
    `server_args.fit_graph_memory`). 0.5.23 picks its sizes after our resolution: nothing is marked (taken as given)."""
    rows = probe[0]
    if V2:
        assert rows["ddtree_default"]["user_graph_sizes"] is None
        return
    marks = [rows[k]["user_graph_sizes"] for k in ("ddtree_default", "ddtree_graph_max", "ddtree_graph_list")]
    assert marks == [False, True, True], marks
    assert rows["eagle"]["user_graph_sizes"] is None  # stock's own algorithms untouched


def shipped_commands() -> dict[str, list[str]]:
    """The launch_server arguments of the commands we ship that run ours: README's serve command, the A6000 preset,
    and the launch scripts that spell theirs out (SGLang's own MTP baseline is 0.5.11's, and says so)."""
    import shlex

    from sglang_dflash.launch import resolve

    root = TESTS.parent

    def after_launch_server(text: str) -> list[str]:
        words = shlex.split(text.replace("\\\n", " "), comments=True)
        return words[words.index("sglang.launch_server") + 1 : words.index("$@") if "$@" in words else None]

    readme = (root / "README.md").read_text()
    serve = readme[readme.index("    python -m sglang.launch_server") :].split("\n\n")[0]
    script = (root / "launch" / "qwen3.6-27b-a6000x2-dflash-chain.sh").read_text()
    return {"README": after_launch_server(serve), "preset": resolve("a6000x2-qwen3.6-27b", []),
            "dflash-chain.sh": after_launch_server(script[script.index("exec ") :])}  # fmt: skip


def test_shipped_commands_parse_on_this_release():
    """Every command we ship that runs ours parses with the installed release's launch_server arguments, the plugin
    loaded (0.5.23 renamed --mamba-scheduler-strategy and refuses --cuda-graph-max-bs as ambiguous)."""
    commands = shipped_commands()
    assert all("--speculative-algorithm" in argv for argv in commands.values()), commands
    code = LOAD_PLUGINS + textwrap.dedent(
        """
        import argparse, json, sys
        from sglang.srt.server_args import ServerArgs
        p = argparse.ArgumentParser(exit_on_error=False)
        ServerArgs.add_cli_args(p)
        for name, argv in json.loads(sys.argv[1]).items():
            try:
                a = p.parse_args(argv)
                print(name, "parsed", a.speculative_algorithm)
            except (argparse.ArgumentError, SystemExit) as e:
                print(name, "REFUSED", e)
        """
    )
    out = run_fresh(code, json.dumps(commands))
    lines = [line for line in out.stdout.splitlines() if " parsed " in line or " REFUSED " in line]
    assert len(lines) == len(commands) and all(" parsed " in line for line in lines), (lines, out.stderr[-2000:])
