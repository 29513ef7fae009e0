"""What the plugin takes from the installed SGLang exists there: every `from sglang... import name` in the package
(inside functions too) resolves on this release, except those of code paths another release takes, each listed below
with its reason; and on a registry release (0.5.23) the spec-v2 worker answers every question the scheduler asks a
spec worker without a GPU (`Scheduler.init_model_worker`, the memory plan, the result processor).

Both failures this guards against were first seen on the GPU machine: a getter 0.5.23 no longer re-exports from
`sglang.srt.distributed`, and a `BaseSpecWorker` property our worker had shadowed with a plain attribute.

SGLang's runtime modules import `sgl_kernel`; the import-only stand-in goes first on sys.path where the real one is
missing. Nothing here calls into it.
"""

from __future__ import annotations

import ast
import importlib
from types import SimpleNamespace

import pytest
import torch
from paths import ROOT, use_sgl_kernel_stand_in

from sglang_dflash.sglang.plugin.activate import installed_version
from sglang_dflash.sglang.plugin.versions import release

pytestmark = pytest.mark.sglang  # also run against the other supported SGLang releases (.ci/run)

sglang = pytest.importorskip("sglang", reason="SGLang is installed by tests/setup_env.sh")
RELEASE = release(installed_version() or "")
if RELEASE is None:
    pytest.skip(f"SGLang {installed_version()} is not a supported release", allow_module_level=True)

PKG = ROOT / "sglang_dflash"
# (our file, SGLang module it imports from) that only another release's code path reaches; a whole file: module None
REGISTRY_ONLY = {  # 0.5.23's registry, runtime context and spec-v2 helpers
    ("sglang/ddtree_worker_v2.py", "sglang.srt.speculative.eagle_utils"): "0.5.23's verify preparation",
    ("sglang/ddtree_worker_v2.py", "sglang.srt.speculative.draft_worker_common"): "0.5.23's draft input",
    ("sglang/ddtree_worker_v2.py", "sglang.srt.runtime_context"): "the TP rank, the tracking grid, graph input and sizes",
    ("sglang/ddtree_worker_v2.py", "sglang.srt.model_executor.runner.decode_cuda_graph_runner"): "a verify width's graphs",
    ("sglang/algorithm.py", "sglang.srt.speculative.spec_registry"): "the registered spec class",
    ("sglang/plugin/activate.py", "sglang.srt.speculative.spec_registry"): "registration",
    ("sglang/names.py", "sglang.srt.arg_groups.model_override_base"): "resolved server arguments",
    ("sglang/plugin/patches.py", "sglang.srt.runtime_context"): "the TP rank where the TpModelWorker has none",
}
SCHEMA_0_5_11 = {  # 0.5.11's spec-v2 schema (`ddtree_worker_v2_0511`)
    ("sglang/ddtree_worker_v2_0511.py", "sglang.srt.model_executor.cuda_graph_runner"): "a verify width's graphs",
    ("sglang/ddtree_worker_v2_0511.py", "sglang.srt.speculative.eagle_info_v2"): "its cache-location kernel, warmed up",
    # 0.5.23 dropped --enable-nan-detection and its crash_on_warnings
    ("sglang/ddtree_worker_v2_0511.py", "sglang.srt.utils"): "--enable-nan-detection's error under crash_on_warnings",
}


def elsewhere() -> dict:
    return dict(REGISTRY_ONLY if not RELEASE.registry else SCHEMA_0_5_11)


def sglang_imports():
    """(our file, line, SGLang module, name) for every absolute `from sglang.x import name` in the package."""
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("sglang."):
                for alias in node.names:
                    yield rel, node.lineno, node.module, alias.name


def resolves(module: str, name: str) -> str | None:
    """None where `from module import name` works, else why not."""
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        return f"no module ({e})"
    if hasattr(mod, name):
        return None
    try:
        importlib.import_module(f"{module}.{name}")
    except ImportError:
        return "no such name"
    return None


def test_every_sglang_name_we_import_exists_on_this_release():
    use_sgl_kernel_stand_in()
    skip = elsewhere()
    missing, skipped = [], set()
    for rel, line, module, name in sglang_imports():
        key = next((k for k in ((rel, None), (rel, module)) if k in skip), None)
        if key is not None:
            skipped.add(key)
            continue
        why = resolves(module, name)
        if why is not None:
            missing.append(f"sglang_dflash/{rel}:{line} from {module} import {name}: {why}")
    assert not missing, f"SGLang {installed_version()}:\n" + "\n".join(missing)
    assert skipped == set(skip), f"stale exceptions in this test's tables: {set(skip) - skipped}"


@pytest.fixture
def worker_v2(monkeypatch):
    """A DDTreeWorkerV2 whose drafter load is replaced by a small module and a target worker stand-in."""
    if not RELEASE.registry:
        pytest.skip(f"0.5.23's spec-v2 schema (SGLang {installed_version()}'s: test_ddtree_worker_v2.py)")
    use_sgl_kernel_stand_in()
    import sglang.srt.runtime_context as runtime_context

    from sglang_dflash.sglang import ddtree_worker_v2
    from sglang_dflash.sglang.worker_common import ContextLengths, DDTreeWorkerBase

    target = SimpleNamespace(
        model_runner=SimpleNamespace(attn_backend="target-attn", spec_algorithm=None, prewarm_sampling=lambda: "prewarmed"),
        word="target",
    )

    def load(self, server_args, gpu_id, tp_rank, target_worker):
        self.drafter = torch.nn.Linear(3, 5, dtype=torch.bfloat16)  # 15 + 5 bf16 values: 40 bytes
        self._target_worker, self.model_runner, self.ctx_lens = target_worker, target_worker.model_runner, ContextLengths(2)
        self.ctx_lens.set(0, 7)
        self.ctx_lens.set(1, 9, up_to=12)

    monkeypatch.setattr(DDTreeWorkerBase, "_load_drafter", load)
    monkeypatch.setattr(runtime_context, "get_parallel", lambda: SimpleNamespace(tp_rank=0))
    args = SimpleNamespace(speculative_algorithm="DDTREE")
    return ddtree_worker_v2.DDTreeWorkerV2(server_args=args, gpu_id=0, nccl_port=0, target_worker=target)


def test_v2_worker_answers_the_scheduler(worker_v2, monkeypatch):
    from sglang.srt.speculative.base_spec_worker import BaseSpecWorker, HiCacheDraftMode

    w = worker_v2
    assert isinstance(w, BaseSpecWorker)  # the result processor calls note_request_finished only then
    assert w.preloaded_weights_bytes == 40  # the target's memory plan counts the drafter's weights
    assert w.draft_worker is None and w.target_worker.word == "target"
    assert w.weight_update_runners() == [] and w.primary_draft_kv_pool is None and w.weight_load_time == 0.0
    assert w.draft_parallel_layout is None and w.draft_swa_window == 0
    assert w.hicache_draft_plan.mode == HiCacheDraftMode.NONE
    assert isinstance(w.graph_memory_usage, dict) and isinstance(w.graph_time_usage, dict)
    assert w.spec_v2_attn_backends[0] == "target-attn" and w.prewarm_sampling() == "prewarmed"
    # the overlap scheduler publishes host sequence lengths when any of these asks (the step reads them)
    from sglang.srt.managers import overlap_utils

    monkeypatch.setattr(
        overlap_utils, "get_exec", lambda: SimpleNamespace(overlap=SimpleNamespace(enable_two_batch_overlap=False))
    )
    monkeypatch.setattr(overlap_utils, "get_spec", lambda: SimpleNamespace(speculative_algorithm="EAGLE"))
    sync_free = SimpleNamespace(needs_cpu_seq_lens=False)  # e.g. the triton backend
    assert not overlap_utils.decide_needs_cpu_seq_lens((sync_free,))
    assert overlap_utils.decide_needs_cpu_seq_lens((sync_free, *w.spec_v2_attn_backends[1:]))
    w.note_request_finished(rid="r", natural_stop=True)
    w.init_hicache_draft_plan()
    w.clear_cache_pool()
    assert w.ctx_lens.low == w.ctx_lens.high == [0, 0]
    assert w.word == "target"  # anything else the scheduler asks of a spec worker: the target worker's
    with pytest.raises(AttributeError):
        w.no_such_attribute


def test_request_slot_reads_this_releases_req():
    """The workers find a request's req_to_token row on the installed release's own Req (0.5.23 moved it into
    `req.kv`; the first GPU run of the spec-v2 worker's context bookkeeping stopped on that)."""
    use_sgl_kernel_stand_in()
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.sampling.sampling_params import SamplingParams

    from sglang_dflash.sglang.worker_common import request_slot

    req = Req("r", "x", [1, 2], SamplingParams())
    assert request_slot(req) is None  # no row before the scheduler allocates one
    holder = req.kv if hasattr(getattr(req, "kv", None), "req_pool_idx") else req
    holder.req_pool_idx = 5
    assert request_slot(req) == 5


def test_a_request_aborted_at_admission_passes_the_workers_guard(monkeypatch):
    """The admission hook aborts an unsupported request with this release's `Req.set_finish_with_abort`; SGLang still
    prefills it (one token), parameters as sent, so the worker's batch guard must let it through (the first GPU
    serving run stopped the server on a min_new_tokens request there); one not aborted still stops the step."""
    use_sgl_kernel_stand_in()
    from sglang.srt.managers import schedule_batch
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.sampling.sampling_params import SamplingParams

    from sglang_dflash.sglang.worker_common import DDTreeWorkerBase

    # its log line asks for the TP rank (0.5.11: a function; 0.5.23: the runtime context): rank 0 here
    if hasattr(schedule_batch, "get_tensor_model_parallel_rank"):
        monkeypatch.setattr(schedule_batch, "get_tensor_model_parallel_rank", lambda: 0)
    else:
        monkeypatch.setattr(schedule_batch, "get_parallel", lambda: SimpleNamespace(tp_rank=0))
    worker = object.__new__(DDTreeWorkerBase)
    worker.name = "DDTREE"
    aborted, live = (Req(rid, "x", [1, 2], SamplingParams(min_new_tokens=4)) for rid in ("a", "b"))
    aborted.set_finish_with_abort("sglang-dflash workers do not support min_new_tokens yet")
    worker._check_batch(SimpleNamespace(reqs=[aborted]))
    with pytest.raises(ValueError, match="min_new_tokens"):
        worker._check_batch(SimpleNamespace(reqs=[aborted, live]))
