"""StepProfile (SGLANG_DFLASH_PROFILE) on CPU: the host clock stands in for CUDA events."""

from __future__ import annotations

import json
import time

import pytest
import torch

from sglang_dflash.env import PROFILE, PROFILE_KERNELS
from sglang_dflash.sglang.step_profile import StepProfile

ENV, ENV_KERNELS = PROFILE.name, PROFILE_KERNELS.name


def test_phases_by_batch_size(tmp_path):
    path = tmp_path / "profile.json"
    prof = StepProfile(path, torch.device("cpu"), every=2)
    for bs, pause in ((1, 0.002), (1, 0.004), (8, 0.006), (8, 0.006)):
        prof.start()
        time.sleep(pause)
        prof.mark("drafter")
        prof.mark("verify")
        time.sleep(pause)
        prof.mark("commit")
        prof.end(bs)
    data = json.loads(path.read_text())
    assert set(data) == {"1", "8"} and data["1"]["steps"] == 2 and data["8"]["steps"] == 2
    one, eight = data["1"]["median_us"], data["8"]["median_us"]
    assert set(one) == {"drafter", "verify", "commit", "step"}
    assert 2500 <= one["drafter"] < eight["drafter"] and one["verify"] < 1000
    assert abs(one["step"] - (one["drafter"] + one["verify"] + one["commit"])) < 1.0
    assert eight["step"] >= 12000
    host = data["8"]["host_median_us"]  # on CPU both clocks are the host's
    assert set(host) == set(eight) and abs(host["drafter"] - eight["drafter"]) < 1.0


def test_widths_are_counted_by_batch_size(tmp_path):
    """With the width controller each step's verify width is counted under its batch size; without, no key."""
    prof = StepProfile(tmp_path / "p.json", torch.device("cpu"))
    for bs, width in ((1, 32), (1, 32), (1, 1), (4, 16), (8, None)):
        prof.start()
        prof.mark("verify")
        prof.end(bs, width)
    data = prof.summary()
    assert data["1"]["widths"] == {"1": 1, "32": 2} and data["4"]["widths"] == {"16": 1} and "widths" not in data["8"]


def test_interval_is_the_host_time_from_one_steps_start_to_the_next(tmp_path):
    """interval_median_us: a step's start to the next step's of the same batch size, the time between steps (here
    4 ms of "scheduler" sleep) included; a change of batch size starts afresh."""
    prof = StepProfile(tmp_path / "p.json", torch.device("cpu"))
    for bs in (1, 1, 1, 1, 8, 8):
        prof.start()
        time.sleep(0.002)
        prof.mark("verify")
        prof.end(bs)
        time.sleep(0.004)
    data = prof.summary()
    assert 6000 <= data["1"]["interval_median_us"] < 12000 and data["1"]["median_us"]["step"] < 6000
    assert len(prof.intervals[1]) == 3 and len(prof.intervals[8]) == 1


def test_the_file_is_rewritten_at_most_once_an_interval_unless_the_batch_size_changes(tmp_path):
    """min_interval_s (the server's 0.25 s): a long interval writes the first step, then only when a new batch size
    begins, so the file's rewriting stays out of the steps' host time."""
    path = tmp_path / "p.json"
    prof = StepProfile(path, torch.device("cpu"), min_interval_s=3600)
    counts = []
    for bs in (1, 1, 1, 8, 8):
        prof.start()
        prof.mark("verify")
        prof.end(bs)
        counts.append({k: v["steps"] for k, v in json.loads(path.read_text()).items()})
    assert counts == [{"1": 1}, {"1": 1}, {"1": 1}, {"1": 3, "8": 1}, {"1": 3, "8": 1}]
    assert StepProfile.from_env(torch.device("cpu"), rank=1).min_interval_s == 0.25


class FakeEvent:
    """A CUDA event's interface on the host: `done` says whether the GPU has passed it; a sync is counted."""

    syncs = 0

    def __init__(self, t: float):
        self.t, self.done = t, False

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        FakeEvent.syncs += 1
        self.done = True

    def elapsed_time(self, other) -> float:
        return 1e3 * (other.t - self.t)  # ms


def test_steps_are_read_when_the_gpu_has_passed_them_without_a_sync(tmp_path, monkeypatch):
    """On CUDA a step is not synchronised at its end: it waits (pending) until its last event is done, so that the
    overlap scheduler may run ahead; then it is read in order, on the GPU's clock."""
    prof = StepProfile(tmp_path / "p.json", torch.device("cpu"))
    prof.cuda = True
    events = []
    clock = iter(range(100))

    def stamp():
        event = FakeEvent(float(next(clock)) / 1000)  # 1 ms apart
        events.append(event)
        return event, event.t

    monkeypatch.setattr(prof, "_stamp", stamp)
    FakeEvent.syncs = 0
    for _ in range(2):
        prof.start()
        prof.mark("verify")
        prof.end(1)
    assert prof.summary() == {} and len(prof.pending) == 2 and FakeEvent.syncs == 0
    events[1].done = True  # the first step's last event
    prof.write()
    assert prof.summary()["1"]["steps"] == 1 and len(prof.pending) == 1
    events[3].done = True
    prof.start()
    prof.mark("verify")
    prof.end(1)
    data = prof.summary()["1"]
    assert data["steps"] == 2 and data["median_us"]["verify"] == pytest.approx(1000) and FakeEvent.syncs == 0
    assert data["interval_median_us"] == pytest.approx(2000)


def test_off_without_path(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(tmp_path / "p.json"))
    assert not StepProfile.from_env(torch.device("cpu"), rank=1).on  # only TP rank 0 writes
    prof = StepProfile.from_env(torch.device("cpu"), rank=0)
    assert prof.on
    monkeypatch.delenv(ENV)
    off = StepProfile.from_env(torch.device("cpu"), rank=0)
    off.start()
    off.mark("drafter")
    off.end(1)
    off.write()
    assert not off.on and off.summary() == {} and not list(tmp_path.iterdir())


def test_mark_before_start_is_ignored(tmp_path):
    prof = StepProfile(tmp_path / "p.json", torch.device("cpu"))
    prof.mark("drafter")  # e.g. the extend path's drafter call: no step begun
    prof.end(1)
    assert prof.summary() == {}


@pytest.mark.parametrize("rank_on_worker", [True, False], ids=["rank-on-worker", "rank-in-runtime-context"])
def test_stock_decode_forwards_are_timed_only_with_the_variable(tmp_path, monkeypatch, rank_on_worker):
    """The plugin's `profile_decode` hook: a TpModelWorker's DECODE forwards are timed as "decode" by batch size (stock
    SGLang's step, measured as the workers' are); other forward modes (our workers' verify and extend) are not. (It
    goes on only with SGLANG_DFLASH_PROFILE set: `test_sglang_plugin`.) The worker's rank: its attribute (0.5.11), or
    SGLang's runtime context where the worker has none (0.5.23, whose TpModelWorker has no tp_rank). The batch comes
    by position or by keyword, or not at all (0.5.23's verify forwards)."""
    from types import SimpleNamespace

    from hooks import around

    from sglang_dflash.sglang.plugin.patches import profile_decode

    if not rank_on_worker:
        context = pytest.importorskip("sglang.srt.runtime_context", reason="SGLang 0.5.23's runtime context")
        monkeypatch.setattr(context, "_PARALLEL", SimpleNamespace(tp_rank=0))

    def worker_class():
        class TpModelWorker:
            model_runner = SimpleNamespace(device="cpu")
            if rank_on_worker:
                tp_rank = 0

            def forward_batch_generation(self, batch=None, forward_batch=None, is_verify=False):
                time.sleep(0.002)
                return "out"

        return TpModelWorker

    def batch(decode: bool, bs: int):
        return SimpleNamespace(forward_mode=SimpleNamespace(is_decode=lambda: decode), seq_lens=[0] * bs)

    path = tmp_path / "stock.json"
    monkeypatch.setenv(ENV, str(path))
    cls = worker_class()
    around(cls, "forward_batch_generation", profile_decode)
    w = cls()
    for b in (batch(True, 1), batch(False, 1), batch(True, 1)):
        assert w.forward_batch_generation(b) == "out"
    assert w.forward_batch_generation(batch=batch(True, 4)) == "out"  # by keyword, as 0.5.23's callers pass it
    # 0.5.23's spec-v2 workers verify through a prepared forward batch and no batch: not a decode step
    assert w.forward_batch_generation(batch=None, forward_batch=batch(True, 2), is_verify=True) == "out"
    data = json.loads(path.read_text())
    assert data["1"]["steps"] == 2 and data["4"]["steps"] == 1
    assert set(data["1"]["median_us"]) == {"decode", "step"} and data["1"]["median_us"]["decode"] >= 1500


def test_one_steps_kernels_listed(tmp_path, monkeypatch):
    """SGLANG_DFLASH_PROFILE_KERNELS=2: only the second step runs under the profiler, and its ops are listed."""
    monkeypatch.setenv(ENV_KERNELS, "2")
    path = tmp_path / "profile.json"
    prof = StepProfile(path, torch.device("cpu"))
    x = torch.randn(64, 64)
    for op in (torch.mm, torch.linalg.inv, torch.mm):
        prof.start()
        op(x, x) if op is torch.mm else op(x)
        prof.mark("verify")
        prof.end(1)
        if prof.steps == 1:
            assert not path.with_suffix(".kernels.txt").exists()
    listed = path.with_suffix(".kernels.txt").read_text()
    assert listed.startswith("step 2, batch size 1, its step 2") and "linalg_inv" in listed and "aten::mm" not in listed


def test_each_batch_sizes_kernels_listed(tmp_path, monkeypatch):
    """SGLANG_DFLASH_PROFILE_KERNELS=2 over batch sizes 1, 1, 1, 4, 4, 4, 1: the second step of each batch size is
    listed (and only it), one table each, batch sizes in order; a step whose batch size `start` did not foresee is
    profiled but not listed (step 4, the first of batch size 4, is not profiled at all: batch size 1 was listed)."""
    monkeypatch.setenv(ENV_KERNELS, "2")
    path = tmp_path / "profile.json"
    prof = StepProfile(path, torch.device("cpu"))
    x = torch.randn(32, 32)
    ops = [torch.mm, torch.linalg.inv, torch.mm, torch.linalg.qr, torch.linalg.det, torch.mm, torch.linalg.svd]
    for op, bs in zip(ops, (1, 1, 1, 4, 4, 4, 1)):
        prof.start()
        op(x, x) if op is torch.mm else op(x)
        prof.mark("verify")
        prof.end(bs)
    one, four = path.with_suffix(".kernels.txt").read_text().split("step 5")
    assert one.startswith("step 2, batch size 1, its step 2") and "linalg_inv" in one
    assert four.startswith(", batch size 4, its step 2") and "linalg_det" in four
    for op in ("aten::mm", "linalg_qr", "linalg_svd"):
        assert op not in one + four
    assert json.loads(path.read_text())["4"]["steps"] == 3
