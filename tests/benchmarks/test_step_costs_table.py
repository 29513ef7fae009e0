"""benchmarks/gpu/sglang_step_costs.py's table: plugin rows from the step profile (phases, overhead, ratio to
stock decode), stock rows from wall time per pass, failed runs with their error."""

from __future__ import annotations

import importlib.util
import sys
from types import SimpleNamespace

from paths import ROOT

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
            "1": {"steps": 9, "median_us": dict(phases, step=30000), "host_median_us": dict(phases, step=29000, verify=900)}
        },
        "sglang": {"1": {"steps": 31, "median_us": dict(decode=12000, step=12000)}},  # stock decode forwards
    }
    args = SimpleNamespace(tp=1, tp2_shard=False, num_prompts=8, max_new_tokens=32, forced_tau=None)
    text = costs.table([stock1, stock, plugin, plugin8, failed], profiles, args)
    assert "FORCED" not in text
    rows = {tuple(line.split(" | ")[:2]): line.split(" | ") for line in text.splitlines() if line.startswith("| sglang")}
    assert rows[("| sglang", "8")][2:6] == ["20.00", "1.00", "-", "-"]
    assert rows[("| sglang", "1")][2:6] == ["10.00", "1.00", "12.00", "1.00"]
    assert rows[("| sglang", "1")][-2] == "-"  # no plugin overhead for stock
    ddtree = rows[("| sglang-ddtree64", "1")]
    assert ddtree[2:7] == ["25.00", "2.50", "30.00", "2.50", "3.00"]  # wall 1.5 s / 60 passes; profiled 30 / 12 ms
    assert ddtree[-2:] == ["1.20", "1.50 |"]  # overhead: all but the drafter and the verify forward
    assert rows[("| sglang-ddtree64", "8")][2:6] == ["40.00", "2.00", "-", "-"]
    assert rows[("| sglang-ddtree64 (host)", "1")][2:6] == ["29.00", "3.00", "0.10", "0.20"]  # step, drafter, tree, ...
    assert rows[("| sglang-ddtree64 (host)", "1")][6] == "0.90"  # the verify forward's host time
    assert "exit 1: boom" in rows[("| sglang-dflash", "8")][-2]
    # 4 prompts: batch 8 ran steps of 4 requests, which the profile keys by 4
    profiles["sglang-ddtree64"]["4"] = {"steps": 9, "median_us": dict(phases, step=45000)}
    forced = {"DDTREE": 10.2}  # the header says the outputs are not the target's
    args = SimpleNamespace(tp=1, tp2_shard=True, num_prompts=4, max_new_tokens=32, forced_tau=forced)
    text = costs.table([plugin8], profiles, args)
    assert "of one TP=2 rank" in text and "| sglang-ddtree64 | 8 | 40.00 | - | 45.00 | - | 3.00 |" in text
    assert "FORCED ACCEPTANCE" in text.splitlines()[2] and "NOT the target's" in text and "10.2" in text


def test_tp2_shard_halves_what_tp2_splits():
    text = costs.tp2_shard(costs.QWEN36_27B_TEXT)
    assert (text["num_attention_heads"], text["num_key_value_heads"]) == (12, 2)
    assert (text["linear_num_key_heads"], text["linear_num_value_heads"], text["intermediate_size"]) == (8, 24, 8704)
    assert text["hidden_size"] == 5120 and text["vocab_size"] == 248_320 and text["num_hidden_layers"] == 64
