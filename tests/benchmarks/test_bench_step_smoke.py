"""benchmarks/bench_step.py --smoke still runs the whole step on CPU with tiny shapes (a check that the
benchmark follows the engine's API, not a measurement): every stage timed, the loop table printed, the
JSON written."""

import json
import os
import subprocess
import sys

from paths import ROOT


def test_bench_step_smoke(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "benchmarks/bench_step.py", "--smoke", "--out", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = json.loads((tmp_path / "bench_step.json").read_text())
    assert rows["smoke"] is True
    stages = {"step_decode", "step_chain16", "step_tree64", "commit_tree64", "drafter", "build_accept_64"}
    assert stages <= set(rows["us"]), sorted(rows["us"])
    loop = rows["us"].pop("loop_step_us")
    assert all(us > 0 for us in rows["us"].values()) and set(loop) == {"ar", "dflash", "ddtree 32", "ddtree 64"}
    for algo in ("ar", "dflash", "ddtree 64"):
        assert f"  {algo}" in run.stdout
