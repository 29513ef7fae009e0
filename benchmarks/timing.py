"""CUDA-graph timing shared by the benchmarks."""

from __future__ import annotations

import statistics

import torch
import triton


def graph_us(fn, reps: int = 1, warmup_ms: int = 50, rep_ms: int = 300) -> float:
    """Microseconds per call of fn: warmed up on a side stream, `reps` calls captured in one CUDA
    graph, median graph replay (triton.testing.do_bench) divided by reps."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    return triton.testing.do_bench(graph.replay, warmup=warmup_ms, rep=rep_ms, return_mode="median") * 1e3 / reps


def alternating_us(fns: dict, rounds: int = 3, reps: int = 10) -> dict:
    """A/B(/C...) in one process: `graph_us` of each fn in turn, `rounds` times, so that drift and the first-timing
    effect (benchmarks/RESULTS.md) fall on every side alike; the median per name."""
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(graph_us(fn, reps=reps))
    return {name: statistics.median(t) for name, t in times.items()}


def print_kernel_times(fn, reps: int, top: int, title: str) -> None:
    """Per-kernel CUDA time of fn, eager, warmed up: microseconds and launches per call, the `top` largest."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    print(title)
    for e in sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:top]:
        print(f"{e.device_time_total / reps:9.1f}  x{e.count // reps:<3d} {e.key[:90]}", flush=True)


def failure(e: Exception, limit: int = 300) -> str:
    """A benchmark row's note of a call that could not run here: the exception's type and the last line of its
    message, cut at `limit` characters."""
    return f"{type(e).__name__}: {str(e).splitlines()[-1][:limit] if str(e) else ''}"
