"""CUDA graphs for one decode-loop step, shared by the standalone engine and the SGLang workers' drafter."""

from __future__ import annotations

import contextlib
import time

import torch
from torch import Tensor


def sync_time(device: torch.device) -> float:
    """time.perf_counter() after the device's queued work (no sync on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


class CapturedStep:
    """fn(*inputs) captured in a CUDA graph, replayed on copies of its inputs.

    `examples` give the static inputs' shapes and dtypes and the values of the warm-up and capture runs. Callers
    pass request slots -1 there, for which every commit goes to scratch (GDN / conv commits skip negative
    slots, K/V and drafter-context scatters land in the caches' scratch row), so capturing never writes into a
    live request's caches. `for_requests`: fn(roots, slots, lens) of R requests, a decode step.

    `context`: for an fn with collectives (a TP-sharded drafter), a context manager factory such as SGLang's
    `graph_capture`, which switches its communicators to graph-capturable ones and yields the stream to capture on
    (`.stream`); warm-up and capture then run inside it.

    `pool`: a memory pool (`torch.cuda.graph_pool_handle()`) shared with other captures, as SGLang's graphs of its
    batch sizes share one: for steps of which one replays at a time and whose outputs are read before the next
    replay of any of them (best captured largest first)."""

    def __init__(self, fn, examples: tuple[Tensor, ...], context=None, pool=None):
        device = examples[0].device
        start = sync_time(device)
        self.inputs = [e.clone() for e in examples]
        with context() if context is not None else contextlib.nullcontext() as ctx:
            stream = ctx.stream if ctx is not None else torch.cuda.Stream(device)
            stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(stream):
                for _ in range(2):
                    fn(*self.inputs)
            torch.cuda.current_stream(device).wait_stream(stream)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, pool=pool, stream=stream):
                self.out = fn(*self.inputs)
        self.capture_s = sync_time(device) - start  # kept out of the decode time

    @classmethod
    def for_requests(cls, fn, R: int, device: torch.device, context=None, pool=None) -> CapturedStep:
        zeros = torch.zeros(R, dtype=torch.long, device=device)
        return cls(fn, (zeros, torch.full_like(zeros, -1), zeros), context, pool)

    def __call__(self, *inputs: Tensor):
        for static, x in zip(self.inputs, inputs, strict=True):
            static.copy_(x)
        self.graph.replay()
        return self.out
