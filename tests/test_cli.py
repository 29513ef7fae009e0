"""The command lines: init_draft writes a drafter the engine loads; generate gives the same greedy
tokens with every algorithm, as JSON; bad pairs and arguments fail with a clear message."""

from __future__ import annotations

import json

import pytest
import torch
from model_helpers import save_tiny_target, tiny_target_config

from sglang_dflash import generate, init_draft

LIN, FULL = "linear_attention", "full_attention"


@pytest.fixture(scope="module")
def pair_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    save_tiny_target(root / "target", tiny_target_config(layer_types=(LIN, FULL, LIN)), seed=5)
    assert (
        init_draft.main(
            ["--target", str(root / "target"), "--out", str(root / "draft"), "--layers", "2", "--block-size", "6", "--taps", "2"]
        )
        == 0
    )
    return root / "target", root / "draft"


def test_generate_json_is_identical_across_algorithms(pair_dirs, capsys):
    target, draft = pair_dirs
    outputs = {}
    for algo in ("ar", "dflash", "ddtree"):
        argv = [
            "--target",
            str(target),
            "--draft",
            str(draft),
            "--algo",
            algo,
            "--budget",
            "9",
            "--prompt-ids",
            "4,5,6,7",
            "--max-new-tokens",
            "20",
            "--device",
            "cpu",
            "--json",
        ]
        assert generate.main(argv) == 0
        out = json.loads(capsys.readouterr().out)
        assert len(out["output_ids"]) == 20 and out["tokens_per_s"] > 0 and len(out["accept_lens"]) >= 1
        outputs[algo] = out["output_ids"]
    assert outputs["ar"] == outputs["dflash"] == outputs["ddtree"]


def test_generate_refuses_bad_input(pair_dirs, tmp_path, capsys):
    target, draft = pair_dirs
    save_tiny_target(tmp_path / "other", tiny_target_config(layer_types=(LIN, FULL), hidden=32))
    assert (
        generate.main(["--target", str(tmp_path / "other"), "--draft", str(draft), "--prompt-ids", "1", "--device", "cpu"]) == 2
    )
    assert "hidden size" in capsys.readouterr().err
    assert generate.main(["--target", str(target), "--draft", str(draft), "--prompt-ids", "1,500", "--device", "cpu"]) == 2
    assert "outside the vocabulary" in capsys.readouterr().err
    assert generate.main(["--target", str(target), "--draft", str(draft), "--prompt", "hi", "--device", "cpu"]) == 2
    assert "no tokenizer" in capsys.readouterr().err
    for bad in (["--budget", "0"], ["--max-new-tokens", "0"], ["--prompt-ids", "1,x"], ["--draft", str(draft)]):
        with pytest.raises(SystemExit):
            generate.parse_args(bad)
    with pytest.raises(SystemExit):
        init_draft.main(["--target", str(target), "--out", str(tmp_path / "d"), "--block-size", "1"])


def test_init_draft_writes_bfloat16_weights_on_request(pair_dirs, tmp_path):
    """--dtype bfloat16 (for large stand-in drafters): the same random drafter, rounded to bf16 on disk."""
    from safetensors.torch import load_file

    target, draft = pair_dirs
    out = tmp_path / "bf16"
    args = ["--target", str(target), "--out", str(out), "--layers", "2", "--block-size", "6", "--taps", "2"]
    assert init_draft.main([*args, "--dtype", "bfloat16"]) == 0
    half, full = load_file(str(out / "model.safetensors")), load_file(str(draft / "model.safetensors"))
    assert half.keys() == full.keys() and {t.dtype for t in half.values()} == {torch.bfloat16}
    assert all(torch.equal(half[k], full[k].to(torch.bfloat16)) for k in full)  # same seed, same draws
