"""The verify graphs' memory estimate (`sglang_dflash.sglang.graph_memory`) on hand-worked Qwen3.6-27B numbers, and what
server-argument resolution does with it: SGLang's default graph sizes cut to those that fit, sizes the user gave kept
with a warning."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from sglang_dflash.sglang import graph_memory as gm

QWEN36_27B = dict(vocab_size=248_320, layer_types=["linear_attention"] * 3 * 16 + ["full_attention"] * 16,
                  linear_num_key_heads=16, linear_key_head_dim=128,
                  linear_num_value_heads=48, linear_value_head_dim=128)  # fmt: skip
A6000_SPEC_SIZES = [*range(1, 9), *range(10, 33, 2)]  # SGLang 0.5.11's sizes for speculative decoding up to 32


def test_a_verified_tokens_bytes_at_27b_one_rank_shapes():
    # logits: 8 x 248,320 = 1,986,560; each of 48 GDN layers, per rank of 2: 4 x (4,096 + 6,144 + 6,144) / 2 = 32,768
    assert gm.verify_graph_token_bytes(QWEN36_27B, 2) == 1_986_560 + 48 * 32_768 == 3_559_424
    assert gm.verify_graph_token_bytes(dict(vocab_size=100), 1) == 800  # no GDN layer: the logits alone


def test_sizes_within_a_budget():
    token = 3_559_424
    assert sum(A6000_SPEC_SIZES) == 288 and gm.verify_graphs_gib(A6000_SPEC_SIZES, 32, token) == pytest.approx(30.55, abs=0.01)
    # 4 GiB / (32 x 3,559,424 B) = 37.7 requests: sizes 1 to 8 (36) fit, 10 more would not
    assert gm.graph_sizes_within(A6000_SPEC_SIZES, 32, token, 4.0) == list(range(1, 9))
    assert gm.graph_sizes_within([4, 1, 2], 32, token, 100.0) == [1, 2, 4]
    assert gm.graph_sizes_within([8, 16], 64, token, 0.1) == [8]  # at least the smallest


def test_resolution_warns_with_the_graph_size_that_fits(caplog):
    """0.5.11: sizes the user gave (or where it is not known whether they did) stay, with a warning."""
    from sglang_dflash.sglang.server_args import fit_graph_memory, graph_batch_sizes

    field = "cuda_graph_bs"
    args = SimpleNamespace(**{field: list(A6000_SPEC_SIZES)}, disable_cuda_graph=False, max_running_requests=48, tp_size=2)
    with caplog.at_level(logging.WARNING):
        fit_graph_memory(args, "DDTREE", 32, QWEN36_27B)
    assert "20 batch sizes up to 32 would keep an estimated 30.6 GiB" in caplog.text
    assert "3.6 MB a verified token, 32 a request" in caplog.text
    assert "--cuda-graph-max-bs 8 keeps them near 3.8 GiB" in caplog.text
    caplog.clear()
    for quiet in (dict(args.__dict__, **{field: [1, 8]}), dict(args.__dict__, disable_cuda_graph=True)):
        fit_graph_memory(SimpleNamespace(**quiet), "DDTREE", 32, QWEN36_27B)
    assert caplog.text == ""
    assert graph_batch_sizes(SimpleNamespace(**dict(args.__dict__, max_running_requests=12))) == [*range(1, 9), 10, 12]
    assert graph_batch_sizes(SimpleNamespace(disable_cuda_graph=False, max_running_requests=8)) is None  # not known yet
    decode = SimpleNamespace(cuda_graph_bs_decode=[1, 2], disable_cuda_graph=False, max_running_requests=8)
    assert graph_batch_sizes(decode) is None  # 0.5.23's: at the worker's start (`fit_decode_graphs`), with its default


def test_resolution_cuts_sglangs_default_sizes_to_those_that_fit(caplog):
    """0.5.11 with no --cuda-graph-bs or --cuda-graph-max-bs (the plugin marks it before SGLang fills in its sizes):
    the sizes become 1 to 8, whose verify graphs fit the 4 GiB (by hand above), with one line; a list that fits is left
    alone."""
    from sglang_dflash.sglang.server_args import USER_GRAPH_SIZES, fit_graph_memory

    args = SimpleNamespace(cuda_graph_bs=list(A6000_SPEC_SIZES), cuda_graph_max_bs=32, disable_cuda_graph=False,
                           max_running_requests=48, tp_size=2, **{USER_GRAPH_SIZES: False})  # fmt: skip
    with caplog.at_level(logging.WARNING):
        fit_graph_memory(args, "DDTREE", 32, QWEN36_27B)
    assert args.cuda_graph_bs == list(range(1, 9)) and args.cuda_graph_max_bs == 8
    assert "batch sizes up to 8, not SGLang's default 32: the verify graphs of its 20 sizes" in caplog.text
    assert "30.6 GiB (3.6 MB a verified token, 32 a request), these 3.8 GiB" in caplog.text
    caplog.clear()
    fit_graph_memory(args, "DDTREE", 32, QWEN36_27B)  # now within: unchanged, silent
    assert args.cuda_graph_bs == list(range(1, 9)) and caplog.text == ""


@pytest.mark.parametrize("locked", [set(), {("decode", "max_bs")}, {("decode", "bs")}])
def test_decode_graphs_cut_at_worker_start_unless_the_user_set_them(tmp_path, caplog, locked):
    """0.5.23 resolves its decode graph sizes after our arguments: the worker cuts them in SGLang's decode graph config
    before the target's graphs (SGLang's default spec sizes up to 32 at 32 nodes: 1 to 8, as by hand above), or, where
    the user set them (`_cuda_graph_config_locked`), keeps them with a warning that names 0.5.23's flag."""
    import json

    from sglang_dflash.sglang.server_args import fit_decode_graphs

    (tmp_path / "config.json").write_text(json.dumps(QWEN36_27B))
    args = SimpleNamespace(model_path=str(tmp_path), revision=None, disable_cuda_graph=False, max_running_requests=48,
                           tp_size=2, speculative_num_draft_tokens=32, _cuda_graph_config_locked=locked)  # fmt: skip
    decode = SimpleNamespace(bs=[*A6000_SPEC_SIZES, 40, 44, 48], max_bs=48)  # 40-48: past 32 requests in 0.5.23's list
    args.max_running_requests = 32
    with caplog.at_level(logging.WARNING):
        fit_decode_graphs(args, decode, "DDTREE")
    if locked:
        assert decode.bs == [*A6000_SPEC_SIZES, 40, 44, 48] and decode.max_bs == 48
        assert "--cuda-graph-max-bs-decode 8 keeps them near 3.8 GiB" in caplog.text
    else:
        assert decode.bs == list(range(1, 9)) and decode.max_bs == 8
        assert "batch sizes up to 8, not SGLang's default 32" in caplog.text and "--cuda-graph-max-bs-decode" in caplog.text
    caplog.clear()
    off = SimpleNamespace(bs=list(A6000_SPEC_SIZES), max_bs=32)
    fit_decode_graphs(SimpleNamespace(**dict(args.__dict__, disable_cuda_graph=True)), off, "DDTREE")
    assert off.bs == list(A6000_SPEC_SIZES) and caplog.text == ""


@pytest.mark.parametrize(
    "widths, cut, expected_gib",
    [
        ("auto", True, 36 * 31 * 3_559_424 / (1 << 30)),  # sizes cut to 1-8 (36 requests); tiers 1-16 narrower: 31 nodes
        ("auto", False, 288 * 31 * 3_559_424 / (1 << 30)),  # the sizes as given: 29.6 GiB
        ("8,16", True, 36 * 24 * 3_559_424 / (1 << 30)),
        ("off", True, 0.0),
        ("32", True, 0.0),  # the widest alone: no tier beside SGLang's own graphs
    ],
)
@pytest.mark.parametrize("backend", ["triton", "flashinfer"])
def test_width_tiers_graph_memory(tmp_path, monkeypatch, widths, cut, expected_gib, backend):
    """What the memory plan holds back for the verify-width tiers (`memory_plan.tiers_gib`): the narrower widths' verify
    graphs at the sizes captured, by hand (3.70 GiB at Qwen3.6-27B's one-rank shapes, SGLang's spec sizes cut to 1-8,
    32 nodes, SGLANG_DFLASH_WIDTHS=auto); with FlashInfer, 384 MiB more a narrower width (its backend's workspace);
    none without graphs."""
    import json

    from sglang_dflash.sglang.memory_plan import tiers_gib

    (tmp_path / "config.json").write_text(json.dumps(QWEN36_27B))
    monkeypatch.setenv("SGLANG_DFLASH_WIDTHS", widths)
    args = SimpleNamespace(model_path=str(tmp_path), revision=None, tp_size=2, speculative_num_draft_tokens=32,
                           speculative_algorithm="DDTREE", attention_backend=backend)  # fmt: skip
    monkeypatch.delenv("SGLANG_FLASHINFER_WORKSPACE_SIZE", raising=False)
    narrower = {"auto": 5, "8,16": 2}.get(widths, 0)
    workspace = narrower * 384 / 1024 if backend == "flashinfer" else 0.0
    assert tiers_gib(args, list(A6000_SPEC_SIZES), cut) == pytest.approx(expected_gib + workspace, rel=1e-12)
    assert tiers_gib(args, None, cut) == 0.0  # CUDA graphs off
    if widths == "auto":
        assert expected_gib == pytest.approx(3.6995 if cut else 29.6, abs=0.05)
