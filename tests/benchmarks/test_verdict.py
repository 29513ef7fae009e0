"""The lossless verdict (benchmarks/gpu/verdict.py) on hand-worked cases, and how the harness pairs each speculative
run with stock's run of the same batch size and turn."""

from __future__ import annotations

import sys

import pytest
from paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
import harness  # noqa: E402
from verdict import NEAR_TIE, judge, top2_margins  # noqa: E402

STOCK = [[5, 6, 7, 8], [1, 2, 3]]
MARGINS = [[2.0, 0.1, 3.0, 0.2], [1.0, 1.0, 1.0]]  # stock's top-1 - top-2 logit at each of its positions


def test_equal_outputs_are_lossless():
    v = judge([list(o) for o in STOCK], STOCK, MARGINS)
    assert v.ok and v.equal == 2 and not v.ties and not v.failures


def test_a_first_difference_at_a_near_tie_of_stocks_logits_passes_and_is_listed():
    v = judge([[5, 9, 0, 0], [1, 2, 3]], STOCK, MARGINS)  # position 1, stock's margin 0.1; later tokens not compared
    assert v.ok and v.equal == 1 and v.ties == [(0, 1, 0.1)]
    assert "near ties p0@1 (m 0.1)" in v.summary()
    named = judge([[5, 9, 0, 0], [1, 2, 3]], STOCK, MARGINS, names=["rid-a", "rid-b"])  # the serving suite's requests
    assert "near ties rid-a@1 (m 0.1)" in named.summary()


@pytest.mark.parametrize(
    "ours, why",
    [
        ([[5, 6, 9, 8], [1, 2, 3]], "prompt 0: token 9 at 2, stock 7 with margin 3 >= 0.5"),  # a clear choice flipped
        ([[5, 6, 7, 8], [1, 2]], "prompt 1: 2 tokens, stock 3, equal where both have one"),
        ([[5, 6, 7, 8]], "1 outputs for 2 prompts"),
    ],
)
def test_anything_else_fails(ours, why):
    v = judge(ours, STOCK, MARGINS)
    assert not v.ok and v.failures == [why]


def test_unknown_margin_or_missing_outputs_fail():
    assert judge([[5, 9, 7, 8], [1, 2, 3]], STOCK, None).failures == ["prompt 0: differs at 1, stock's margin there unknown"]
    assert judge([[5, 6, 7, 8], [1, 2, 3, 4]], STOCK, MARGINS[:1]).failures == [
        "prompt 1: 4 tokens, stock 3, equal where both have one"
    ]
    assert judge(None, STOCK, MARGINS).failures == ["no output"]
    assert judge(STOCK, None, None).failures == ["no stock output to compare with"]


def test_margin_at_the_threshold_is_not_a_tie():
    assert not judge([[5, 6, 7, 9], [1, 2, 3]], STOCK, [[2.0, 0.1, 3.0, NEAR_TIE], [1.0] * 3]).ok


def test_top2_margins_from_sglangs_top_logprobs():
    rows = [[(-0.1, 7, None), (-2.6, 3, None)], [(-0.7, 2, None), (-0.75, 9, None)]]
    assert top2_margins(rows) == pytest.approx([2.5, 0.05])


def test_each_run_is_judged_against_stock_at_its_batch_size_and_turn():
    T = harness.SECOND_TURN
    run = harness.Run
    clear = dict(margins=[[9.0, 9.0]])
    stock = [run("sglang", 1, [[1, 2]], extra=dict(margins=[[0.1, 9.0]])), run("sglang", 8, [[1, 3]], extra=clear),
             run("sglang" + T, 1, [[4, 4]], extra=clear)]  # fmt: skip
    ours = [run("sglang-ddtree63", 1, [[7, 0]]), run("sglang-ddtree63", 8, [[1, 3]]), run("sglang-ddtree63" + T, 1, [[4, 5]]),
            run("sglang-dflash-chain", 8, None, error="crashed")]  # fmt: skip
    v = harness.sglang_verdicts(stock + ours)
    assert set(v) == {"sglang-ddtree63 b1", "sglang-ddtree63 b8", "sglang-ddtree63-turn2 b1", "sglang-dflash-chain b8"}
    assert v["sglang-ddtree63 b1"].ok and v["sglang-ddtree63 b1"].ties == [(0, 0, 0.1)]  # b1's stock: a tie there
    assert v["sglang-ddtree63 b8"].ok and v["sglang-ddtree63 b8"].equal == 1
    assert not v["sglang-ddtree63-turn2 b1"].ok  # the second turn's stock: margin 9 at the difference
    assert v["sglang-dflash-chain b8"].failures == ["no output"]
    assert not harness.sglang_verdicts(ours)["sglang-ddtree63 b8"].ok  # no stock in the call: nothing passes
