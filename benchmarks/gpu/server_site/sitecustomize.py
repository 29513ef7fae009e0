"""Loaded first in every Python process of an SGLang server or Engine that the GPU scripts start (this folder goes
first on its PYTHONPATH; benchmark-only, never part of the package). Each part acts only under its variable:

SERVING_COUNTERS=DIR (serving_suite.py): each process appends one line per event to DIR/<pid>.log once SGLang's
modules load:

    retract N          ScheduleBatch.retract_decode retracted N requests
    evict T M          a prefix cache's evict() or evict_for_alloc() freed T KV tokens and M GDN states
    idle_check         the scheduler's idle memory check ran (its request-pool part; the KV part runs just before)

SGLang's idle check raises on a leak (SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE, on by default), so a leak ends
the server; the count says the check ran at all.

HARNESS_NO_SAMPLING_JIT=1 (harness.sglang_env, where the carried FlashInfer lacks the headers and sources that
sampling kernels JIT-build from): SGLang's DFLASH takes the path SGLang takes on platforms without its sampling-verify
kernel and FlashInfer's renorm ops (their names None: its torch renorm, its stock sampling rehearsal at start-up,
non-greedy verify off), instead of failing at start-up. Its greedy verify is untouched; its sampled requests are not
verified as SGLang's kernel verifies them, so no sampling figure of SGLang's DFLASH comes from a run with it on.
"""

import functools
import importlib.abc
import os
import sys

DIR = os.environ.get("SERVING_COUNTERS")
COUNTED = ("sglang.srt.managers.", "sglang.srt.mem_cache.")
NO_SAMPLING_JIT = os.environ.get("HARNESS_NO_SAMPLING_JIT") == "1"
SAMPLING_OPS = "sglang.srt.speculative.dflash_utils"


def _log(line: str) -> None:
    with open(os.path.join(DIR, f"{os.getpid()}.log"), "a") as f:
        f.write(line + "\n")


def _wrap(cls, name: str, event) -> None:
    original = cls.__dict__.get(name)
    if original is None or getattr(original, "_serving_counter", False):
        return

    @functools.wraps(original)
    def counted(*args, **kwargs):
        result = original(*args, **kwargs)
        line = event(result)
        if line:
            _log(line)
        return result

    counted._serving_counter = True
    setattr(cls, name, counted)


def _evicted(result) -> str | None:
    tokens, states = getattr(result, "num_tokens_evicted", 0), getattr(result, "mamba_num_evicted", 0)
    return f"evict {tokens} {states}" if tokens or states else None


def _no_sampling_jit(module) -> None:
    for name in ("top_k_renorm_prob", "top_p_renorm_prob", "tree_speculative_sampling_target_only"):
        if hasattr(module, name):
            setattr(module, name, None)
    if hasattr(module, "_DFLASH_SAMPLING_VERIFY_AVAILABLE"):  # computed from the kernel's name at import
        module._DFLASH_SAMPLING_VERIFY_AVAILABLE = False


def _count(module) -> None:
    for cls in list(vars(module).values()):
        if not isinstance(cls, type) or cls.__module__ != module.__name__:
            continue
        if cls.__name__ == "ScheduleBatch":
            _wrap(cls, "retract_decode", lambda r: f"retract {len(r[0])}" if r and r[0] else None)
        for name in ("evict", "evict_for_alloc"):  # 0.5.23 evicts for an allocation through the second
            if name in cls.__dict__:
                _wrap(cls, name, _evicted)
        if "_check_req_pool" in cls.__dict__:
            _wrap(cls, "_check_req_pool", lambda r: "idle_check")


def _after(name: str):
    """What to do to module `name` right after it executes, or None."""
    if DIR and name.startswith(COUNTED):
        return _count
    if NO_SAMPLING_JIT and name == SAMPLING_OPS:
        return _no_sampling_jit
    return None


class _Finder(importlib.abc.MetaPathFinder):
    """Runs _after's action on each module it names, right after the module executes."""

    def find_spec(self, name, path, target=None):
        action = _after(name)
        if action is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                exec_module = spec.loader.exec_module

                def run(module, exec_module=exec_module):
                    exec_module(module)
                    action(module)

                spec.loader.exec_module = run
                return spec
            if spec is not None:
                return spec
        return None


if DIR:
    os.makedirs(DIR, exist_ok=True)
if DIR or NO_SAMPLING_JIT:
    sys.meta_path.insert(0, _Finder())
