"""Counters for serving_suite.py, in every Python process of a server it starts (this folder is put first on the
server's PYTHONPATH; benchmark-only, never part of the package). With SERVING_COUNTERS=DIR set, each process appends
one line per event to DIR/<pid>.log once SGLang's modules load:

    retract N          ScheduleBatch.retract_decode retracted N requests
    evict T M          a prefix cache's evict() freed T KV tokens and M GDN states
    idle_check         the scheduler's idle memory check ran (its request-pool part; the KV part runs just before)

SGLang's idle check raises on a leak (SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE, on by default), so a leak ends
the server; the count says the check ran at all.
"""

import functools
import importlib.abc
import os
import sys

DIR = os.environ.get("SERVING_COUNTERS")
WATCHED = ("sglang.srt.managers.", "sglang.srt.mem_cache.")


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


def _instrument(module) -> None:
    for cls in list(vars(module).values()):
        if not isinstance(cls, type) or cls.__module__ != module.__name__:
            continue
        if cls.__name__ == "ScheduleBatch":
            _wrap(cls, "retract_decode", lambda r: f"retract {len(r[0])}" if r and r[0] else None)
        if "evict" in cls.__dict__:
            _wrap(cls, "evict", _evicted)
        if "_check_req_pool" in cls.__dict__:
            _wrap(cls, "_check_req_pool", lambda r: "idle_check")


class _Finder(importlib.abc.MetaPathFinder):
    """Instruments each watched module right after it executes."""

    def find_spec(self, name, path, target=None):
        if not name.startswith(WATCHED):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                exec_module = spec.loader.exec_module

                def run(module, exec_module=exec_module):
                    exec_module(module)
                    _instrument(module)

                spec.loader.exec_module = run
                return spec
            if spec is not None:
                return spec
        return None


if DIR:
    os.makedirs(DIR, exist_ok=True)
    sys.meta_path.insert(0, _Finder())
