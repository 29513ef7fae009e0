"""benchmarks/gpu/sglang_step_costs.py's table: plugin rows from the step profile (phases, overhead, ratio to
stock decode), stock rows from wall time per pass, failed runs with their error."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
spec = importlib.util.spec_from_file_location("sglang_step_costs", ROOT / "benchmarks" / "gpu" / "sglang_step_costs.py")
costs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(costs)
h = costs.h


def test_table_rows():
    stock = h.Run("sglang", 1, outputs=[[1]], wall_s=2.0, extra=dict(passes=100))  # 20 ms / step
    plugin = h.Run("sglang-ddtree64", 1, outputs=[[1]], wall_s=9.0, extra=dict(passes=10, tokens_per_pass=1.5))
    failed = h.Run("sglang-dflash", 8, error="exit 1: boom")
    phases = dict(drafter=3000, tree=100, prepare=200, verify=25000, accept=300, commit=400, gdn_commit=50, context=150)
    profiles = {"sglang-ddtree64": {"1": {"steps": 9, "median_us": dict(phases, step=30000)}}}
    text = costs.table([stock, plugin, failed], profiles, SimpleNamespace(tp=1, num_prompts=4, max_new_tokens=128))
    rows = {line.split(" | ")[0][2:]: line for line in text.splitlines() if line.startswith("| sglang")}
    assert rows["sglang"].startswith("| sglang | 1 | 20.000 | 1.00 | - |")
    ddtree = rows["sglang-ddtree64"].split(" | ")
    assert ddtree[2:5] == ["30.000", "1.50", "3.000"]  # from the profile, not wall time (900 ms per pass)
    assert ddtree[-2:] == ["1.200", "1.50 |"]  # overhead: all but the drafter and the verify forward
    assert "exit 1: boom" in rows["sglang-dflash"]
