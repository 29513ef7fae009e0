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


def refusal(capsys, main, argv) -> str:
    """The one line a refused command prints (exit code 2, nothing else on stderr or stdout)."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    out = capsys.readouterr()
    assert exit_.value.code == 2 and out.out == "" and out.err.count("\n") == 1, (exit_.value.code, out)
    assert "Traceback" not in out.err and out.err.startswith("error: ")
    return out.err.strip()


@pytest.mark.parametrize(
    "argv, named",
    [
        (["--budget", "100000"], "--budget 100000: expected 1..512"),
        (["--budget", "0"], "--budget 0: expected 1..512"),
        (["--max-new-tokens", "0"], "--max-new-tokens 0: expected >= 1"),
    ],
)
def test_demo_refuses_before_any_work(capsys, argv, named):
    from sglang_dflash import demo

    assert named in refusal(capsys, demo.main, argv)


def test_cuda_is_refused_where_there_is_none(capsys, monkeypatch):
    from sglang_dflash import demo

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "--device cuda: no CUDA GPU is visible here" in refusal(capsys, demo.main, ["--device", "cuda"])
    assert "--device cuda: no CUDA GPU" in refusal(capsys, generate.main, ["--device", "cuda", "--prompt-ids", "1"])


@pytest.mark.parametrize(
    "argv, named",
    [
        (["--prompt", ""], "--prompt '': empty"),
        (["--prompt-ids", ""], "--prompt-ids '': empty"),
        (["--prompt-ids", "1,x"], "--prompt-ids '1,x': expected comma-separated integers"),
        (["--budget", "513"], "--budget 513: expected 1..512"),
        (["--top-p", "0"], "--top-p 0.0: expected in (0, 1]"),
        (["--target", "/nonexistent", "--draft", "/nonexistent"], "--target /nonexistent: no such directory"),
    ],
)
def test_generate_refuses_before_any_work(capsys, argv, named):
    assert named in refusal(capsys, generate.main, ["--device", "cpu", *argv])


def test_init_draft_refusals(pair_dirs, tmp_path, capsys):
    target, _ = pair_dirs  # a 3-layer target
    base = ["--target", str(target), "--layers", "1", "--block-size", "4"]
    assert "--target /nonexistent: no such directory" in refusal(
        capsys, init_draft.main, ["--target", "/nonexistent", "--out", str(tmp_path / "x")]
    )
    assert "--taps 20: expected 1..3" in refusal(capsys, init_draft.main, [*base, "--out", str(tmp_path / "t"), "--taps", "20"])
    assert "--block-size 1: expected >= 2" in refusal(
        capsys, init_draft.main, [*base, "--out", str(tmp_path / "b"), "--block-size", "1"]
    )
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("keep me")
    assert f"--out {full}: not empty; --force" in refusal(capsys, init_draft.main, [*base, "--out", str(full), "--taps", "2"])
    assert init_draft.main([*base, "--out", str(full), "--taps", "2", "--force"]) == 0
    assert (full / "notes.txt").read_text() == "keep me" and (full / "config.json").is_file()


def test_a_wrong_shaped_checkpoint_is_refused_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text('{"architectures": ["Nothing"]}')
    line = refusal(capsys, init_draft.main, ["--target", str(bad), "--out", str(tmp_path / "o")])
    assert line.startswith(f"error: --target {bad}: not a config this accepts (KeyError")


def test_init_draft_formats(pair_dirs, tmp_path, capsys):
    """--format writes a drafter of that format that loads strictly; bad head arguments are refused in one line."""
    from sglang_dflash.models.dflash_draft import DFlashDrafter

    target, _ = pair_dirs
    base = ["--target", str(target), "--layers", "1", "--block-size", "4", "--taps", "2"]
    for fmt, extra, module in (("dflash2", ["--conv", "3,8", "--selector", "4,3"], "candidate_selector"),
                               ("dspark", ["--markov", "4,gated"], "markov_head")):  # fmt: skip
        assert init_draft.main([*base, "--out", str(tmp_path / fmt), "--format", fmt, *extra]) == 0
        drafter = DFlashDrafter.from_pretrained(tmp_path / fmt)
        assert drafter.config.format == fmt and hasattr(drafter, module)
    capsys.readouterr()
    assert "--markov 4: expected two values" in refusal(
        capsys, init_draft.main, [*base, "--out", str(tmp_path / "x"), "--format", "dspark", "--markov", "4"]
    )
    assert "markov_head_type 'lstm'" in refusal(
        capsys, init_draft.main, [*base, "--out", str(tmp_path / "y"), "--format", "dspark", "--markov", "4,lstm"]
    )
