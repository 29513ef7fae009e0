"""The worker's width per step (`width_control`): tiers, the measured cost table, the lagged observations (on CPU the
copies are synchronous, so an observation is ready at once; steps are not timed there, costs are given) and the width
it picks, against hand-worked rates."""

import pytest
import torch

from sglang_dflash.sglang.width_control import LaggedObservations, StepCosts, StepWidth, default_tiers, parse_tiers


def test_tiers():
    assert default_tiers(32) == (1, 2, 4, 8, 16, 32) and default_tiers(33) == (1, 2, 4, 8, 16, 32, 33)
    assert default_tiers(2) == (1, 2)
    assert parse_tiers("auto", 16) == (1, 2, 4, 8, 16) and parse_tiers("8, 4", 16) == (4, 8, 16)
    assert parse_tiers("off", 16) is None and parse_tiers(" OFF ", 16) is None and parse_tiers("1", 16) == (1, 16)
    for bad, message in (("0,4", r"\[1, 16\]"), ("4,17", r"\[1, 16\]"), ("four", "comma-separated")):
        with pytest.raises(ValueError, match=message):
            parse_tiers(bad, 16)


def test_cost_table_averages_and_never_rewards_width():
    costs = StepCosts({(4, 2): 1.0, (4, 8): 0.9, (4, 16): 2.0, (8, 2): 1.5}, alpha=0.5)
    control = costs.control(4, (2, 8, 16), 4)
    assert control.cost.tokens == (8, 32, 64) and control.cost.seconds == (1.0, 1.0, 2.0)  # 0.9: noise, as 1.0
    one = costs.control(4, (2, 8, 16), 1)  # a batch of 1 padded to 4: each width at its own graph's cost
    assert one.cost.tokens == (2, 8, 16) and one.cost.of(16) == 2.0  # keyed by 4 x n, 1 x 16 would cost tier 8's 1.0
    assert costs.unmeasured(8, (2, 8, 16)) == 8 and costs.unmeasured(4, (2, 8, 16)) is None


def test_cost_table_keeps_the_least_first_measurement_and_caps_outliers():
    """SETTLE = 2, OUTLIER = 1.5, alpha 0.5, hand-worked: a first step stalled (50 s) then 2 s: 2; then 3 s averages to
    2.5; a 100 s stall counts as 1.5 x 2.5 = 3.75 (estimate 3.125), and a run of 10 s steps still moves it, by
    half of 1.5x the estimate a step (3.906, 4.883). A given cost counts as no measurement: the next one's minimum with
    it."""
    costs = StepCosts({(1, 4): 2.0}, alpha=0.5)
    for seconds, expected in ((50.0, 50.0), (2.0, 2.0), (3.0, 2.5), (100.0, 3.125), (10.0, 3.90625), (10.0, 4.8828125)):
        costs.update(8, 8, seconds)
        assert costs.seconds[8, 8] == pytest.approx(expected)
    costs.update(1, 4, 3.0)
    assert costs.seconds[1, 4] == 2.0


def test_observations_come_back_in_order_and_a_full_ring_drops():
    """Pushed at steps 1 and 2, read from step 3 and 4 on (LAG = 2); a push with both slots in flight is dropped."""
    obs = LaggedObservations(max_requests=3, width=4, device=torch.device("cpu"), slots=2)
    probs, depths = torch.rand(2, 4), torch.randint(1, 3, (2, 4))
    assert obs.push(1, ["a", "b"], 3, probs, depths, torch.tensor([1, 0]), 2)
    assert obs.push(2, ["c"], 2, probs[:1, :2], depths[:1, :2], torch.tensor([2]), None)
    assert not obs.push(3, ["d"], 2, probs[:1], depths[:1], torch.tensor([0]), 1)
    assert obs.ready(2) == []
    first = obs.ready(3)
    assert [(k, n, a, bs, s) for k, n, _, _, a, bs, s in first] == [(["a", "b"], 3, [1, 0], 2, None)]
    assert torch.equal(first[0][2], probs)
    second = obs.ready(10)
    assert [(k, n, a) for k, n, _, _, a, _, _ in second] == [(["c"], 2, [2])] and torch.equal(second[0][3], depths[:1, :2])
    assert obs.ready(11) == [] and obs.push(11, ["d"], 2, probs[:1], depths[:1], torch.tensor([0]), 1)


def test_width_per_step_hand_worked():
    """Tiers 2 / 4 at captured batch size 2 (2 requests): nothing observed yet: the narrowest. Then trees of node
    probabilities [0.9, 0.8, 0.7] (depths 1, 2, 3), all verified and all accepted: factors 2 / (p + 1), so the nodes
    count 0.947, 0.889, 0.824: width 4 expects 2 + 2 x 2.660 = 7.32 tokens, in 2.0 s 3.66/s against width 2's
    (2 + 2 x 0.947) / 1.0 s = 3.89/s: width 2; in 1.5 s width 4 wins (4.88/s). A batch past the captured sizes
    verifies the narrowest; a request never seen counts as the mean of the others (the same width), and requests
    absent from a step are forgotten; a step of none seen counts each as the last request observed (the same width)."""
    probs = torch.tensor([[0.9, 0.8, 0.7]] * 2)
    depths = torch.tensor([[1, 2, 3]] * 2)
    for wide_s, expected in ((2.0, 2), (1.5, 4)):
        width = StepWidth((2, 4), 3, 2, torch.device("cpu"), StepCosts({(2, 2): 1.0, (2, 4): wide_s}))
        assert width.nodes(["a", "b"], 2) == 2
        width.record(["a", "b"], 4, probs, depths, torch.tensor([3, 3]), 2)
        assert width.nodes(["a", "b"], 2) == 2  # the observation is read LAG = 2 steps on
        assert width.nodes(["a", "b"], 2) == expected and width.nodes(["a", "b"], None) == 2
        assert width.nodes(["a", "c"], 2) == expected and set(width.width.drafted) == {"a"}
        assert width.nodes(["d"], 2) == expected


def test_an_unmeasured_tier_is_verified_once_to_measure_it():
    """With tier 4 measured at batch size 2 but not tier 2, the next step at that size verifies 2 (narrowest unmeasured
    first), whatever the plan would say; a size where every tier is measured plans."""
    width = StepWidth((2, 4), 3, 2, torch.device("cpu"), StepCosts({(2, 4): 1.0, (1, 2): 1.0, (1, 4): 1.01}))
    width.record(["a"], 4, torch.tensor([[0.99, 0.98, 0.97]]), torch.tensor([[1, 2, 3]]), torch.tensor([3]), 1)
    width.step += 2  # the observation read
    assert width.nodes(["a"], 2) == 2 and width.nodes(["a"], 1) == 4


def test_tp_ranks_average_their_costs_at_the_same_steps():
    """With `sync` (TP > 1), a measurement waits for the flush every `sync_every` steps, where every rank's are
    averaged (a sum over two ranks stood in for: the other rank measured twice as long); meanwhile a measured tier is
    not probed again, and a size whose costs wait for the flush verifies the widest."""

    def two_ranks(t):  # the other rank's sums: twice the seconds, the same counts
        t.copy_(t + t * torch.tensor([2.0, 1.0]))

    costs = StepCosts({}, sync=two_ranks, keys=((1, 2), (1, 4)))
    width = StepWidth((2, 4), 3, 2, torch.device("cpu"), costs, sync_every=4)
    costs.measured(1, 2, 1.0)
    assert costs.seconds == {} and width.nodes(["a"], 1) == 4  # tier 2 measured, awaiting the flush; 4 unmeasured
    costs.measured(1, 4, 2.0)
    assert width.nodes(["a"], 1) == 4 and costs.seconds == {}  # step 2: both wait
    width.nodes(["a"], 1), width.nodes(["a"], 1)  # steps 3 and 4: the flush
    assert costs.seconds == {(1, 2): 1.5, (1, 4): 3.0} and costs.pending == {}


RANKS = """
import json, sys
import torch
import torch.distributed as dist
from sglang_dflash.sglang.width_control import StepCosts, StepWidth
rank, store = int(sys.argv[1]), sys.argv[2]
dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
keys = tuple((bs, n) for bs in (2,) for n in (1, 2, 4))
costs = StepCosts({}, sync=lambda sums: dist.all_reduce(sums), keys=keys)
width = StepWidth((1, 2, 4), 3, 2, torch.device("cpu"), costs, sync_every=8)
gen = torch.Generator().manual_seed(0)  # the same drafts and acceptance on both ranks, as the TP-merged ones are
chosen = []
for step in range(40):
    n = width.nodes(["a", "b"], 2)
    chosen.append(n)
    probs = torch.rand(2, 3, generator=gen).sort(dim=1, descending=True).values
    width.record(["a", "b"], n, probs, torch.tensor([[1, 2, 3]] * 2), torch.randint(0, n, (2,), generator=gen), 2)
    costs.measured(2, n, 1.0 + (0.3 if rank == 0 else 1.5) * n)  # this rank's own timing: wide steps slower on rank 1
print("CHOSEN" + json.dumps(dict(chosen=chosen, table=sorted(costs.seconds.items()))))
"""


def test_two_tp_ranks_timing_differently_pick_the_same_widths(tmp_path):
    """Two processes of a gloo world, the same drafts and acceptance but each rank timing its steps differently (wide
    steps far slower on rank 1: each alone would choose other widths from step 4 on): every step both choose the same
    width, and both end with the same cost table, the ranks' mean (1 node: 1.3 and 2.5 s, so 1.9)."""
    import json
    import subprocess
    import sys

    store = tmp_path / "store"
    procs = [subprocess.Popen([sys.executable, "-c", RANKS, str(rank), str(store)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for rank in (0, 1)]  # fmt: skip
    outs = [p.communicate(timeout=120)[0] for p in procs]
    lines = [next((line for line in out.splitlines() if line.startswith("CHOSEN")), out[-2000:]) for out in outs]
    rank0, rank1 = (json.loads(line.removeprefix("CHOSEN")) for line in lines)
    assert rank0 == rank1 and len(set(rank0["chosen"])) > 1
    first = dict((tuple(k), s) for k, s in rank0["table"])
    assert first[2, 1] == pytest.approx(1.9) and first[2, 4] == pytest.approx(1.0 + 0.9 * 4)
