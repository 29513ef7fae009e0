"""benchmarks/ab_trees.py --smoke: source trees' kernels load side by side in one process (each from its own folder)
and agree on tiny shapes under the interpreter where the code is the same, and not where it differs (a check of the
tool, not a measurement)."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from paths import ROOT

# Per kernel group, the edits that make tree c's copy compute something else (file, text, replacement): every case
# of the group must then report c's outputs off the first tree's.
BROKEN = {
    "gdn": [("kernels/tree_gdn/tree_gdn.py", "K**-0.5 if scale is None", "K**-0.4 if scale is None")],
    "walk": [
        (
            "kernels/tree_walk/path_argmax.py",
            "return accept_len, accepted_nodes, bonus",
            "return accept_len, accepted_nodes, bonus + 1",
        )
    ],
    "build": [
        ("kernels/vocab/draft_topk.py", "out = logp.view(", "out = (logp - 1).view("),
        ("kernels/tree_build/tree_build.py", "    return out\n", '    return {**out, "parents": out["parents"].flip(-1)}\n'),
    ],
}


@pytest.mark.parametrize("what", ["gdn", "walk", "build"])
def test_ab_trees_smoke(tmp_path, what):
    """Trees a and b are copies of this package, c a copy with `BROKEN[what]`'s edits."""
    for name in ("a", "b", "c"):
        shutil.copytree(ROOT / "sglang_dflash", tmp_path / name / "sglang_dflash", ignore=shutil.ignore_patterns("assets"))
    for file, text, replacement in BROKEN[what]:
        path = tmp_path / "c" / "sglang_dflash" / file
        source = path.read_text()
        assert source.count(text) == 1, f"{file}: the edit's text {text!r} is gone; pick another"
        path.write_text(source.replace(text, replacement))
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    trees = [f"{name}={tmp_path / name}" for name in ("a", "b", "c")]
    run = subprocess.run(
        [sys.executable, "benchmarks/ab_trees.py", what, *trees, "--smoke", "--out", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert all(f"{name}: {tmp_path / name}" in run.stdout for name in "abc")  # each from its own copy
    rows = json.loads((tmp_path / f"ab_trees_{what}.json").read_text())
    same = {"gdn": {"d 0e+00"}, "walk": {"ok"}, "build": {"ok", "ids ok logp d 0e+00"}}[what]
    assert len(rows) >= 2
    for row in rows:
        checks = {name.split("/")[0]: [] for name in row["check"]}  # the walk's names carry a lookahead: c/LA4
        for name, check in row["check"].items():
            checks[name.split("/")[0]].append(check)
        assert set(checks["a"] + checks["b"]) <= same, row  # same code: same outputs
        assert checks["c"] and not set(checks["c"]) & same, row  # changed code: every output reported off
