"""benchmarks/bench_budget.py runs on CPU with the shipped pair (a check that it follows the engine's API and that
every run it compares is lossless, not a measurement): one row a cost slope, the controller's widths listed."""

import os
import subprocess
import sys

from paths import ROOT


def test_bench_budget_smoke():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    argv = ["benchmarks/bench_budget.py", "--new-tokens", "8", "--slopes", "0.3,0.002"]
    run = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [line.split(" | ") for line in run.stdout.splitlines() if line.startswith("| 0.")]
    assert [r[0] for r in rows] == ["| 0.3", "| 0.002"] and all(len(r) == 8 and float(r[1]) > 0 for r in rows)
