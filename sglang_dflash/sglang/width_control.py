"""Each decode step's verify width N for the DDTREE / DFLASH_CHAIN worker, chosen by cost (SGLANG_DFLASH_WIDTHS).

The worker drafts the widest tier's tree every step and verifies its first N nodes (`DraftTree.prefix`; N = 1, the
root alone, is plain decoding with the drafter's pass still run for the controller) through the target's graphs of that
width (one attention backend, graph runner and tree-verify workspace per tier). N is the tier
with the most expected tokens per second for the batch (`budget.plan_nodes`), from:

- `StepCosts`: a step's GPU seconds by (captured batch size, width), measured on the running server between two
  CUDA events around the step (drafter pass to commit) and averaged; a tier not yet measured at a batch size is
  verified to measure it (`StepWidth.nodes`; its first measurement arrives LAG steps later, so it is verified LAG times,
  and the least of the first SETTLE is kept). At TP > 1 every rank must pick the same width, so the ranks'
  measurements are averaged over a gloo group every `sync_every` steps and only then used;
- `budget.WidthController`: each request's last drafted tree, its node probabilities calibrated depth by depth by
  that request's acceptance so far (keys: request ids);
- `LaggedObservations`: the step's node probabilities, depths, accept lengths and events reach the host through
  asynchronous copies into pinned buffers, read `LAG` steps later (at the same step on every rank; the overlap
  scheduler has by then waited for that step itself, so reading never stalls the GPU).

Shapes: R requests, M = the widest tier's nodes - 1 candidates a request.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..budget import BudgetControl, VerifyCost, WidthController


def default_tiers(widest: int) -> tuple[int, ...]:
    """The widths offered up to `widest` nodes (the root included): 1 (the root alone: plain decoding, where
    speculation does not pay), the powers of two between, and `widest`."""
    tiers = {widest}
    n = 1
    while n < widest:
        tiers.add(n)
        n *= 2
    return tuple(sorted(tiers))


def parse_tiers(text: str, widest: int) -> tuple[int, ...] | None:
    """SGLANG_DFLASH_WIDTHS: "off" (None: every step verifies `widest`), "auto" (`default_tiers`) or comma-separated
    node counts in [1, widest]; the widest is always offered (it is --speculative-num-draft-tokens)."""
    text = text.strip().lower()
    if text == "off":
        return None
    if text == "auto":
        return default_tiers(widest)
    try:
        tiers = {int(t) for t in text.split(",") if t.strip()}
    except ValueError:
        raise ValueError(f"SGLANG_DFLASH_WIDTHS={text!r}: expected off, auto or comma-separated node counts") from None
    if any(not 1 <= t <= widest for t in tiers):
        raise ValueError(f"SGLANG_DFLASH_WIDTHS={text!r}: node counts must be in [1, {widest}] (1: the root alone; at "
                         "most --speculative-num-draft-tokens)")  # fmt: skip
    return tuple(sorted(tiers | {widest}))


LAG = 2  # steps between a step and the reading of its observation
SETTLE = 2  # a key's first measurements, of which the cost table keeps the least
OUTLIER = 1.5  # after those, a measurement counts at most this times the estimate


@dataclass
class StepCosts:
    """seconds[(bs, n)]: a step of a batch padded to captured size bs verifying n nodes a request: the least of its
    first SETTLE measurements, then an exponential average (weight `alpha` for the newest) of measurements capped at
    OUTLIER x the estimate. A stall inside a measured step (a first use, the host) only ever lengthens it, and a tier
    once costed too high is not picked again to correct it: an uncapped outlier had a server at batch 1 decode
    plainly for good. With `sync` (TP > 1: an in-place all-reduce sum of a host tensor over the ranks), measurements
    wait in `pending` until `flush`, which averages every rank's."""

    seconds: dict[tuple[int, int], float]
    alpha: float = 0.1
    sync: Callable[[Tensor], None] | None = None
    keys: tuple[tuple[int, int], ...] = ()  # with sync: every (bs, n) a rank may measure, in one order on every rank
    pending: dict[tuple[int, int], list[float]] = field(default_factory=dict)  # key -> [sum of seconds, count]
    counts: dict[tuple[int, int], int] = field(default_factory=dict)  # key -> measurements taken in

    def measured(self, bs: int, n: int, seconds: float) -> None:
        """A step's measured seconds: averaged in at once, or (with sync) at the next `flush`."""
        if self.sync is None:
            return self.update(bs, n, seconds)
        total = self.pending.setdefault((bs, n), [0.0, 0])
        total[0] += seconds
        total[1] += 1

    def flush(self) -> None:
        """With sync: every rank's pending measurements, averaged over ranks and steps, into the table (collective:
        every rank calls it at the same step)."""
        sums = torch.tensor([self.pending.get(k, [0.0, 0]) for k in self.keys], dtype=torch.float64).reshape(-1, 2)
        self.sync(sums)
        self.pending.clear()
        for k, (total, count) in zip(self.keys, sums.tolist()):
            if count > 0:
                self.update(*k, total / count)

    def update(self, bs: int, n: int, seconds: float) -> None:
        key = (bs, n)
        old, seen = self.seconds.get(key), self.counts.get(key, 0)
        if old is None or seen < SETTLE:
            self.seconds[key] = seconds if old is None else min(old, seconds)
        else:
            self.seconds[key] = (1 - self.alpha) * old + self.alpha * min(seconds, OUTLIER * old)
        self.counts[key] = seen + 1

    def unmeasured(self, bs: int, tiers: tuple[int, ...]) -> int | None:
        """The narrowest tier not measured at bs (nor waiting for a flush), if any."""
        return next((n for n in tiers if (bs, n) not in self.seconds and (bs, n) not in self.pending), None)

    def complete(self, bs: int, tiers: tuple[int, ...]) -> bool:
        """Every tier has a cost at bs."""
        return all((bs, n) in self.seconds for n in tiers)

    def control(self, bs: int, tiers: tuple[int, ...], requests: int) -> BudgetControl:
        """The tiers' costs at captured batch size bs (every one measured) for a batch of `requests` <= bs, as a
        `BudgetControl`: a forward of requests x n tokens for tier n costs what the graph of bs x n costs (keyed by
        bs x n, a batch of half the graph's rows or fewer fell into a narrower tier's price)."""
        times = [self.seconds[bs, n] for n in tiers]
        times = [max(times[: i + 1]) for i in range(len(times))]  # a wider tier measured faster (noise) costs as much
        return BudgetControl(VerifyCost(tuple(requests * n for n in tiers), tuple(times)), tiers)


class LaggedObservations:
    """A ring of `slots` pinned host buffers for the steps' observations, filled by asynchronous copies; `ready(step)`
    hands back those pushed `LAG` or more steps before `step`, oldest first (waiting for their copies, long done)."""

    def __init__(self, max_requests: int, width: int, device: torch.device, slots: int = 4):
        pin = device.type == "cuda"
        self.device, self.free = device, deque(range(slots))
        self.probs = torch.zeros(slots, max_requests, width, dtype=torch.float32, pin_memory=pin)
        self.depths = torch.zeros(slots, max_requests, width, dtype=torch.long, pin_memory=pin)
        self.accept_len = torch.zeros(slots, max_requests, dtype=torch.long, pin_memory=pin)
        self.pending: deque = deque()  # (step, slot, keys, nodes, M, graph bs, start event, end event)

    def push(self, step: int, keys: list, nodes: int, probs: Tensor, depths: Tensor, accept_len: Tensor,
             graph_bs: int | None, start=None) -> bool:  # fmt: skip
        """Queue step `step`'s observation: probs / depths [R, M], accept_len [R] on the device; start: the CUDA event
        recorded where the step began (None: not timed). False: every buffer is in flight, the observation dropped
        (on every rank alike: the ring is read at the same steps everywhere)."""
        if not self.free:
            return False
        slot, R, M = self.free.popleft(), len(keys), probs.shape[1]
        self.probs[slot, :R, :M].copy_(probs, non_blocking=True)
        self.depths[slot, :R, :M].copy_(depths, non_blocking=True)
        self.accept_len[slot, :R].copy_(accept_len, non_blocking=True)
        end = None
        if self.device.type == "cuda":
            end = torch.cuda.Event(enable_timing=start is not None)
            end.record()
        self.pending.append((step, slot, list(keys), nodes, M, graph_bs, start, end))
        return True

    def ready(self, step: int) -> list[tuple]:
        """(keys, nodes, probs [R, M], depths [R, M], accept lengths, graph bs, step seconds or None) of each step
        pushed at `step` - LAG or before, oldest first."""
        out = []
        while self.pending and self.pending[0][0] <= step - LAG:
            _, slot, keys, nodes, M, graph_bs, start, end = self.pending.popleft()
            if end is not None:
                end.synchronize()
            R = len(keys)
            seconds = start.elapsed_time(end) / 1e3 if start is not None and end is not None else None
            out.append((keys, nodes, self.probs[slot, :R, :M].clone(), self.depths[slot, :R, :M].clone(),
                        self.accept_len[slot, :R].tolist(), graph_bs, seconds))  # fmt: skip
            self.free.append(slot)
        return out


class StepWidth:
    """The worker's width per step: `nodes(keys, bs)` before drafting, `record(...)` after accepting."""

    def __init__(self, tiers: tuple[int, ...], max_depth: int, max_requests: int, device: torch.device,
                 costs: StepCosts | None = None, sync_every: int = 32):  # fmt: skip
        self.tiers, self.device, self.sync_every, self.step = tiers, device, sync_every, 0
        self.costs = costs if costs is not None else StepCosts({})
        self.width = WidthController(max_depth)
        self.observations = LaggedObservations(max_requests, max(tiers[-1] - 1, 1), device)

    def nodes(self, keys: list, graph_bs: int | None) -> int:
        """The width for a step of requests `keys` at captured batch size graph_bs (None: a batch past the captured
        sizes, a heavy load: the narrowest). The same on every TP rank: its inputs are read at fixed steps."""
        self.step += 1
        for obs_keys, nodes, probs, depths, accept_len, bs, seconds in self.observations.ready(self.step):
            self.width.observe(obs_keys, probs, depths, nodes, accept_len)
            if seconds is not None and bs is not None:
                self.costs.measured(bs, nodes, seconds)
        if self.costs.sync is not None and self.step % self.sync_every == 0:
            self.costs.flush()
        self.width.retain(keys)
        if graph_bs is None:
            return self.tiers[0]
        probe = self.costs.unmeasured(graph_bs, self.tiers)
        if probe is not None:
            return probe
        if not self.costs.complete(graph_bs, self.tiers):  # measured, averaged over the ranks at the next flush
            return self.tiers[-1]
        return self.width.nodes(keys, self.costs.control(graph_bs, self.tiers, len(keys)))

    def start(self):
        """A CUDA event recorded now, where a step begins (None off CUDA)."""
        if self.device.type != "cuda":
            return None
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def record(self, keys: list, nodes: int, probs: Tensor, depths: Tensor, accept_len: Tensor, graph_bs: int | None,
               start=None) -> None:  # fmt: skip
        """This step's drafted tree (node probabilities, depths [R, M]), its width and accept lengths [R] on the device,
        its captured batch size and `start` event."""
        self.observations.push(self.step, keys, nodes, probs, depths, accept_len, graph_bs, start)
