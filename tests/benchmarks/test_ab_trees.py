"""benchmarks/ab_trees.py --smoke: two source trees' kernels load side by side in one process (each from its own
folder) and agree on tiny shapes under the interpreter (a check of the tool, not a measurement)."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from paths import ROOT


@pytest.mark.parametrize("what", ["gdn", "walk", "build"])
def test_ab_trees_smoke(tmp_path, what):
    for name in ("a", "b"):
        shutil.copytree(ROOT / "sglang_dflash", tmp_path / name / "sglang_dflash", ignore=shutil.ignore_patterns("assets"))
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "benchmarks/ab_trees.py", what, f"a={tmp_path / 'a'}", f"b={tmp_path / 'b'}", "--smoke",
         "--out", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"a: {tmp_path / 'a'}" in run.stdout and f"b: {tmp_path / 'b'}" in run.stdout  # each from its own copy
    rows = json.loads((tmp_path / f"ab_trees_{what}.json").read_text())
    checks = [c for row in rows for c in row["check"].values()]
    same = {"gdn": {"d 0e+00"}, "walk": {"ok"}, "build": {"ok", "ids ok logp d 0e+00"}}[what]
    assert len(rows) >= 2 and set(checks) == same  # same code: same outputs
