"""CUDA graphs for one decode-loop step, shared by the standalone engine and the SGLang workers' drafter."""

from __future__ import annotations

import time

import torch
from torch import Tensor


def sync_time(device: torch.device) -> float:
    """time.perf_counter() after the device's queued work (no sync on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


class CapturedStep:
    """fn(roots, slots, lens) captured in a CUDA graph for R requests, replayed on copies of its inputs.

    Warm-up runs with slots = -1, for which every commit goes to scratch (GDN / conv commits skip
    negative slots, K/V and drafter-context scatters land in the caches' scratch row), so capturing
    never writes into a live request's caches."""

    def __init__(self, fn, R: int, device: torch.device):
        start = sync_time(device)
        self.roots = torch.zeros(R, dtype=torch.long, device=device)
        self.slots = torch.full((R,), -1, dtype=torch.long, device=device)
        self.lens = torch.zeros(R, dtype=torch.long, device=device)
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            for _ in range(2):
                fn(self.roots, self.slots, self.lens)
        torch.cuda.current_stream(device).wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = fn(self.roots, self.slots, self.lens)
        self.capture_s = sync_time(device) - start  # kept out of the decode time

    def __call__(self, roots: Tensor, slots: Tensor, lens: Tensor):
        self.roots.copy_(roots)
        self.slots.copy_(slots)
        self.lens.copy_(lens)
        self.graph.replay()
        return self.out
