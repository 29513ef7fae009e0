"""python -m sglang_dflash.launch: presets resolve to launch_server arguments, user arguments win."""

import pytest

from sglang_dflash import launch


def test_preset_then_user_arguments(capsys):
    assert launch.main(["--preset", "a6000x2-qwen3.6-27b", "--dry-run", "--speculative-algorithm", "DFLASH", "--port", "3"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("resolved: ") and "-m sglang.launch_server --model-path Qwen/Qwen3.6-27B --tp 2" in line
    # argparse keeps the last occurrence: the user's DFLASH after the preset's DDTREE
    assert line.index("--speculative-algorithm DDTREE") < line.index("--speculative-algorithm DFLASH")
    assert line.endswith("--port 3")


def test_unknown_preset_is_named():
    with pytest.raises(SystemExit):
        launch.main(["--preset", "nope", "--dry-run"])
    with pytest.raises(SystemExit, match="unknown preset"):
        launch.resolve("nope", [])
