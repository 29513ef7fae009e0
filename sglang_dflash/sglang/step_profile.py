"""Where a speculative decode step's time goes: per-phase times of the workers' steps, by batch size.

Off unless SGLANG_DFLASH_PROFILE names a JSON file (TP rank 0 writes it). Then every decode step records a
CUDA event at each phase boundary (`mark`); a step's events are read once the GPU has passed its last one, without
a device sync (a sync a step would stop SGLang's overlap scheduler from running ahead, and the timed server would not
be the served one). After every `every` steps (default 1), at most once in `min_interval_s` unless the batch size
changed (the server's: 0.25 s, so that rewriting the file adds nothing noticeable to a step's host time; the steps of
the last quarter second and those still on the GPU are lost when the server is killed), the file is rewritten with,
per batch size, the median microseconds of each phase and of the whole step (outside the timed phases). Intervals
are read on the GPU's timeline, so a phase's time includes the host time the GPU spent waiting for it (Python, host
syncs). On CPU the host clock is read.

    {"1": {"steps": 63, "median_us": {"drafter": 410.2, "tree": 35.1, ..., "step": 9120.4},
           "host_median_us": {"drafter": 380.0, ...}, "interval_median_us": 9400.2, "widths": {"16": 60, "32": 3}},
     "8": {...}}

host_median_us are the same phases on the host's clock (the time Python spent issuing each phase): a phase
whose GPU time is close to its host time kept the GPU waiting on the host. interval_median_us is the host time from
one step's start to the next's, where both have the batch size: the served wall time a decode step, the scheduler's
work between steps included (a step that a prefill interrupts is an outlier the median drops). widths: with the
width controller (SGLANG_DFLASH_WIDTHS), how many steps verified each width (all steps ended, read or not).

With SGLANG_DFLASH_PROFILE_KERNELS=K as well, one step of each batch size, its K-th (or, where the batch size
changed at it, the next), also runs under torch.profiler (CUDA activity, the kernels of graph replays too; on CPU the
host ops) and FILE's `.kernels.txt` lists them, most time first, one table per batch size.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections import Counter, defaultdict
from pathlib import Path

import torch

from .. import env


class StepProfile:
    def __init__(self, path: str | os.PathLike | None, device: torch.device, every: int = 1, min_interval_s: float = 0.0):
        self.path = Path(path) if path else None
        self.cuda = device.type == "cuda"
        self.every, self.min_interval_s = every, min_interval_s
        self.last_write = float("-inf")
        self.ended: Counter[int] = Counter()  # steps ended by batch size (read or not)
        self.marks: list[tuple[str, object]] = []
        self.times: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))  # bs -> phase -> us
        self.host: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))  # the same, host clock
        self.steps = 0
        self.kernel_step = env.PROFILE_KERNELS.integer(0)  # each batch size's step whose kernels are listed; 0: none
        self.kernel_tables: dict[int, str] = {}  # batch size -> its listed step's kernels
        self.profiler = None
        self.last_batch_size: int | None = None  # the next step's, as `start` guesses it
        self.pending: list[tuple[int, list]] = []  # (batch size, marks) of steps the GPU has not finished
        self.intervals: dict[int, list[float]] = defaultdict(list)  # bs -> host us from a step's start to the next's
        self.last_start: tuple[int, float] | None = None  # (batch size, host time) of the last ended step's start
        self.widths: dict[int, Counter[int]] = defaultdict(Counter)  # bs -> verify width -> steps

    @classmethod
    def from_env(cls, device: torch.device, rank: int) -> StepProfile:
        return cls(env.PROFILE.get() if rank == 0 else None, device, min_interval_s=0.25)

    @property
    def on(self) -> bool:
        return self.path is not None

    def _stamp(self):
        """(GPU event or host time, host time)."""
        now = time.perf_counter()
        if not self.cuda:
            return now, now
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event, now

    def start(self) -> None:
        if self.on:
            bs = self.last_batch_size
            seen = self.ended[bs]
            if self.kernel_step and bs not in self.kernel_tables and seen + 1 >= self.kernel_step:
                activity = torch.profiler.ProfilerActivity.CUDA if self.cuda else torch.profiler.ProfilerActivity.CPU
                self.profiler = torch.profiler.profile(activities=[activity])
                self.profiler.__enter__()
            self.marks = [("start", self._stamp())]

    def mark(self, phase: str) -> None:
        """The phase that ends now (it began at the previous mark)."""
        if self.on and self.marks:
            self.marks.append((phase, self._stamp()))

    def end(self, batch_size: int, width: int | None = None) -> None:
        """The step of batch_size requests ends; width: the verify width the controller chose (None: none chose)."""
        if self.on and width is not None:
            self.widths[batch_size][width] += 1
        if not self.on or len(self.marks) < 2:
            if self.profiler is not None:  # a step with no phase: nothing to list
                self.profiler.__exit__(None, None, None)
                self.profiler = None
            return
        started = self.marks[0][1][1]
        if self.last_start is not None and self.last_start[0] == batch_size:
            self.intervals[batch_size].append(1e6 * (started - self.last_start[1]))
        self.last_start = (batch_size, started)
        self.pending.append((batch_size, self.marks))
        self.marks = []
        self.steps += 1
        self.ended[batch_size] += 1
        self._read(wait=self.profiler is not None)  # the listed step is read at once (the profiler syncs anyway)
        if self.profiler is not None:
            per = self.times[batch_size]
            self.profiler.__exit__(None, None, None)
            if batch_size == self.last_batch_size:  # else the guess missed: the next step of batch_size is listed
                table = self.profiler.key_averages().table(sort_by=f"{'cuda' if self.cuda else 'cpu'}_time_total", row_limit=40)
                self.kernel_tables[batch_size] = (
                    f"step {self.steps}, batch size {batch_size}, its step {len(per['step'])}\n{table}\n"
                )
                self.path.with_suffix(".kernels.txt").write_text("\n".join(t for _, t in sorted(self.kernel_tables.items())))
            self.profiler = None
        changed, self.last_batch_size = batch_size != self.last_batch_size, batch_size
        if self.steps % self.every == 0 and (changed or started - self.last_write >= self.min_interval_s):
            self.last_write = started
            self.write()

    def _read(self, wait: bool = False) -> None:
        """Record the pending steps the GPU has finished, oldest first (all of them, waiting, where `wait`)."""
        if self.cuda:
            gap = lambda a, b: 1e3 * a.elapsed_time(b)  # noqa: E731 (ms -> us)
        else:
            gap = lambda a, b: 1e6 * (b - a)  # noqa: E731
        while self.pending:
            batch_size, marks = self.pending[0]
            last = marks[-1][1][0]
            if self.cuda and not wait and not last.query():
                return
            if self.cuda and wait:
                last.synchronize()
            per, host = self.times[batch_size], self.host[batch_size]
            spans = [(phase, a, b) for (_, a), (phase, b) in zip(marks, marks[1:])]
            for phase, (a, ha), (b, hb) in [*spans, ("step", marks[0][1], marks[-1][1])]:
                per[phase].append(gap(a, b))
                host[phase].append(1e6 * (hb - ha))
            self.pending.pop(0)

    def summary(self) -> dict:
        return {
            str(bs): {
                "steps": len(phases["step"]),
                "median_us": {p: round(statistics.median(v), 2) for p, v in phases.items()},
                "host_median_us": {p: round(statistics.median(v), 2) for p, v in self.host[bs].items()},
                **({"interval_median_us": round(statistics.median(self.intervals[bs]), 2)} if self.intervals[bs] else {}),
                **({"widths": {str(n): c for n, c in sorted(self.widths[bs].items())}} if self.widths[bs] else {}),
            }
            for bs, phases in sorted(self.times.items())
        }

    def write(self) -> None:
        if self.on:
            self._read()
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.summary(), indent=1))
            tmp.replace(self.path)
