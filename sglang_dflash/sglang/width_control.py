"""Each decode step's verify width N for the DDTREE / DFLASH_CHAIN worker, chosen by cost (SGLANG_DFLASH_WIDTHS).

The worker drafts the widest tier's tree every step and verifies its first N nodes (`DraftTree.prefix`; N = 1, the
root alone, is plain decoding with the drafter's pass still run for the controller) through the target's graphs of that
width (one attention backend, graph runner and tree-verify workspace per tier). N is the tier
with the most expected tokens per second for the batch (`budget.plan_nodes`), from:

- `StepCosts`: a step's GPU seconds by (captured batch size, width), measured on the running server between two
  CUDA events around the step (drafter pass to commit) and averaged; a tier not yet measured at a batch size is
  verified once to measure it (`StepWidth.nodes`);
- `budget.WidthController`: each request's last drafted tree, its node probabilities calibrated depth by depth by
  that request's acceptance so far (keys: request ids);
- `LaggedObservations`: the step's node probabilities, depths, accept lengths and events reach the host without a
  sync: asynchronous copies into pinned buffers, read once the step's end event has passed (a step or two later
  under the overlap scheduler); a step that finds every buffer still in flight drops its observation, never waits.

Shapes: R requests, M = the widest tier's nodes - 1 candidates a request.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

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


@dataclass
class StepCosts:
    """seconds[(bs, n)]: a step of a batch padded to captured size bs verifying n nodes a request, an exponential
    average (weight `alpha` for the newest) of the measured steps."""

    seconds: dict[tuple[int, int], float]
    alpha: float = 0.1

    def update(self, bs: int, n: int, seconds: float) -> None:
        old = self.seconds.get((bs, n))
        self.seconds[bs, n] = seconds if old is None else (1 - self.alpha) * old + self.alpha * seconds

    def unmeasured(self, bs: int, tiers: tuple[int, ...]) -> int | None:
        """The narrowest tier not measured at bs, if any."""
        return next((n for n in tiers if (bs, n) not in self.seconds), None)

    def control(self, bs: int, tiers: tuple[int, ...]) -> BudgetControl:
        """The tiers' costs at captured batch size bs (every one measured) as a `BudgetControl`: a forward of bs x n
        tokens for tier n (the batch's R x n tokens fall into it, as the graph pads them)."""
        times = [self.seconds[bs, n] for n in tiers]
        times = [max(times[: i + 1]) for i in range(len(times))]  # a wider tier measured faster (noise) costs as much
        return BudgetControl(VerifyCost(tuple(bs * n for n in tiers), tuple(times)), tiers)


class LaggedObservations:
    """A ring of `slots` pinned host buffers for the steps' observations, filled by asynchronous copies; `ready` hands
    back those whose copies are done, oldest first, without waiting."""

    def __init__(self, max_requests: int, width: int, device: torch.device, slots: int = 4):
        pin = device.type == "cuda"
        self.device, self.free = device, deque(range(slots))
        self.probs = torch.zeros(slots, max_requests, width, dtype=torch.float32, pin_memory=pin)
        self.depths = torch.zeros(slots, max_requests, width, dtype=torch.long, pin_memory=pin)
        self.accept_len = torch.zeros(slots, max_requests, dtype=torch.long, pin_memory=pin)
        self.pending: deque = deque()  # (slot, keys, nodes, M, graph bs, start event, end event)

    def push(self, keys: list, nodes: int, probs: Tensor, depths: Tensor, accept_len: Tensor, graph_bs: int | None,
             start=None) -> bool:  # fmt: skip
        """Queue a step's observation: probs / depths [R, M], accept_len [R] on the device; start: the CUDA event
        recorded where the step began (None: not timed). False: every buffer is in flight, the observation dropped."""
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
        self.pending.append((slot, list(keys), nodes, M, graph_bs, start, end))
        return True

    def ready(self) -> list[tuple]:
        """(keys, nodes, probs [R, M], depths [R, M], accept lengths, graph bs, step seconds or None) of each finished
        copy, oldest first."""
        out = []
        while self.pending and (self.pending[0][6] is None or self.pending[0][6].query()):
            slot, keys, nodes, M, graph_bs, start, end = self.pending.popleft()
            R = len(keys)
            seconds = start.elapsed_time(end) / 1e3 if start is not None and end is not None else None
            out.append((keys, nodes, self.probs[slot, :R, :M].clone(), self.depths[slot, :R, :M].clone(),
                        self.accept_len[slot, :R].tolist(), graph_bs, seconds))  # fmt: skip
            self.free.append(slot)
        return out


class StepWidth:
    """The worker's width per step: `nodes(keys, bs)` before drafting, `record(...)` after accepting."""

    def __init__(self, tiers: tuple[int, ...], max_depth: int, max_requests: int, device: torch.device,
                 costs: StepCosts | None = None):  # fmt: skip
        self.tiers, self.device = tiers, device
        self.costs = costs if costs is not None else StepCosts({})
        self.width = WidthController(BudgetControl(VerifyCost((1,), (1.0,)), tiers), max_depth)
        self.observations = LaggedObservations(max_requests, tiers[-1] - 1, device)

    def nodes(self, keys: list, graph_bs: int | None) -> int:
        """The width for a step of requests `keys` at captured batch size graph_bs (None: a batch past the captured
        sizes, a heavy load: the narrowest)."""
        for obs_keys, nodes, probs, depths, accept_len, bs, seconds in self.observations.ready():
            self.width.observe(obs_keys, probs, depths, nodes, accept_len)
            if seconds is not None and bs is not None:
                self.costs.update(bs, nodes, seconds)
        self.width.retain(keys)
        if graph_bs is None:
            return self.tiers[0]
        probe = self.costs.unmeasured(graph_bs, self.tiers)
        if probe is not None:
            return probe
        self.width.control = self.costs.control(graph_bs, self.tiers)
        return self.width.nodes(keys)

    def start(self):
        """A CUDA event recorded now, where a step begins (None off CUDA)."""
        if self.device.type != "cuda":
            return None
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def record(self, keys: list, nodes: int, probs: Tensor, depths: Tensor, accept_len: Tensor, graph_bs: int | None,
               start=None) -> None:  # fmt: skip
        """A step's drafted tree (node probabilities, depths [R, M]), its width and accept lengths [R] on the device,
        its captured batch size and `start` event."""
        self.observations.push(keys, nodes, probs, depths, accept_len, graph_bs, start)
