"""python -m sglang_dflash.launch: presets resolve to launch_server arguments, user arguments win."""

import pytest

from sglang_dflash import launch


def test_preset_then_user_arguments(capsys):
    assert (
        launch.main(["--preset", "a6000x2-qwen3.6-27b", "--dry-run", "--speculative-algorithm", "DFLASH_CHAIN", "--port", "3"])
        == 0
    )
    line = capsys.readouterr().out.strip()
    assert line.startswith("resolved: ") and "-m sglang.launch_server --model-path Qwen/Qwen3.6-27B --tp 2" in line
    # argparse keeps the last occurrence: the user's DFLASH_CHAIN after the preset's DDTREE
    assert line.index("--speculative-algorithm DDTREE") < line.index("--speculative-algorithm DFLASH_CHAIN")
    assert line.endswith("--port 3")


def test_unknown_preset_is_named():
    with pytest.raises(SystemExit):
        launch.main(["--preset", "nope", "--dry-run"])
    with pytest.raises(SystemExit, match="unknown preset"):
        launch.resolve("nope", [])


def test_a6000_preset_verifies_whole_sm86_blocks():
    """The A6000 preset's DDTREE tree fills whole blocks of the tree GDN verify on SM86: no padded rows and no root
    pass before them (2^k nodes beat 2^k + 1, benchmarks/RESULTS.md)."""
    import torch

    from sglang_dflash.kernels import device as gpu
    from sglang_dflash.kernels.tree_gdn import verify_blocks

    args = launch.resolve("a6000x2-qwen3.6-27b", [])
    nodes = int(args[args.index("--speculative-num-draft-tokens") + 1])
    sm86 = pytest.MonkeyPatch.context()
    with sm86 as m:
        m.setattr(gpu, "shared_memory_per_block", lambda device: 99 * 1024)
        root, block, blocks = verify_blocks(nodes, torch.device("cuda"))
    assert (root, block) == (0, 16) and block * blocks == nodes, (nodes, root, block, blocks)


@pytest.mark.parametrize(
    "argv, named",
    [
        (["--speculative-algorithm", "DDTREE"], "--speculative-algorithm DDTREE: needs --speculative-draft-model-path"),
        (["--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", "/nonexistent"],
         "--speculative-draft-model-path /nonexistent: no such directory"),
        (["--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", "z-lab/X",
          "--speculative-num-draft-tokens", "0"],
         "--speculative-num-draft-tokens 0: DDTREE needs --speculative-num-draft-tokens >= 2"),
        (["--speculative-algorithm", "DFLASH_CHAIN", "--speculative-draft-model-path", "TINY",
          "--speculative-num-draft-tokens", "40"],
         "--speculative-num-draft-tokens 40: DFLASH_CHAIN verifies a chain of at most the drafter's block size (16)"),
        (["--speculative-algorithm", "DFLASHX"], "--speculative-algorithm DFLASHX: expected one of "),
    ],
)  # fmt: skip
@pytest.mark.sglang  # the installed release's own names: run against each supported release (.ci/run)
def test_launch_refuses_before_sglang_starts(capsys, argv, named):
    """One line, exit code 2, before launch_server runs (the shipped drafter's block is 16); an unknown name is checked
    against the installed SGLang's own list, ours included."""
    from sglang_dflash.engine.load import tiny_pair

    pytest.importorskip("sglang", reason="SGLang is installed by tests/setup_env.sh")
    argv = [str(tiny_pair()[1]) if a == "TINY" else a for a in argv]
    with pytest.raises(SystemExit) as exit_:
        launch.main(["--dry-run", "--model-path", "m", *argv])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and err.count("\n") == 0 and named in err, err
    if "DFLASHX" in argv:
        assert "DDTREE" in err and "EAGLE" in err


def test_launch_refuses_a_wrong_shaped_drafter(tmp_path, capsys):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(SystemExit) as exit_:
        launch.main(["--dry-run", "--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and err.startswith(f"error: --speculative-draft-model-path {tmp_path}: not a config"), err


def test_launch_refuses_ours_on_an_unsupported_sglang(monkeypatch, capsys):
    from sglang_dflash.sglang.plugin import activate

    monkeypatch.setattr(activate, "state", activate._State())
    monkeypatch.setattr(activate, "installed_version", lambda: "0.5.99")
    with pytest.raises(SystemExit) as exit_:
        launch.main(["--dry-run", "--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", "z-lab/X"])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and err.count("\n") == 0, err
    assert err.startswith("error: --speculative-algorithm DDTREE needs sglang-dflash, which is off: SGLang 0.5.99 is not")
