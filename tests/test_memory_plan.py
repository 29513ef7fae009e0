"""What DFLASH/DDTREE change in SGLang's memory plan (`sglang_dflash.sglang.memory_plan`), on CPU: the drafter's
bytes held back before SGLang sizes its KV cache (equal to what the worker then allocates), and the per-node GDN
states SGLang reserves but the tree-GDN verify does not allocate, given back. SGLang's method is stood in for by
its arithmetic (no SGLang import)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from model_helpers import save_tiny_target, tiny_target_config

from sglang_dflash.init_draft import init_draft
from sglang_dflash.models.config import DraftConfig, read_config
from sglang_dflash.models.dflash_draft import DFlashDrafter
from sglang_dflash.sglang import memory_plan

GiB = 1 << 30
LIN, FULL = "linear_attention", "full_attention"


@pytest.fixture(scope="module")
def draft(tmp_path_factory):
    root = tmp_path_factory.mktemp("memory_plan")
    save_tiny_target(root / "target", tiny_target_config(layer_types=(LIN, LIN, LIN, FULL)))
    init_draft(root / "target", root / "draft", num_layers=2, block_size=16, taps=3)
    return root / "draft"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_draft_bytes_equal_what_the_worker_allocates(draft, dtype):
    config = DraftConfig.from_dict(read_config(draft))
    model = DFlashDrafter.from_pretrained(draft, dtype=dtype)
    cache = model.new_cache(num_slots=5, max_len=96)
    weights, context = memory_plan.draft_bytes(config, 5, 96, dtype)
    assert weights == sum(p.numel() * p.element_size() for p in model.parameters())
    assert context == 2 * cache.k.numel() * cache.k.element_size()


def test_draft_max_len(monkeypatch):
    monkeypatch.delenv(memory_plan.ENV_MAX_LEN, raising=False)
    assert memory_plan.draft_max_len(4096) == 4096 and memory_plan.draft_max_len(262144) == 8192
    monkeypatch.setenv(memory_plan.ENV_MAX_LEN, "1000")
    assert memory_plan.draft_max_len(4096) == 1000


@pytest.mark.parametrize(
    "algorithm, tree_gdn, held, refunded",
    [
        ("DDTREE", None, True, True),  # the default: drafter held back, per-node states of 31 requests given back
        ("DFLASH", "0", True, False),  # SGLang's per-node GDN path: its reservation stands
        ("EAGLE", None, False, False),  # other algorithms: untouched
    ],
)
def test_memory_plan(monkeypatch, draft, algorithm, tree_gdn, held, refunded):
    monkeypatch.delenv("SGLANG_DFLASH_EXPERIMENTAL_WORKER", raising=False)
    monkeypatch.delenv(memory_plan.ENV_MAX_LEN, raising=False)
    if tree_gdn is None:
        monkeypatch.delenv("SGLANG_DFLASH_TREE_GDN", raising=False)
    else:
        monkeypatch.setenv("SGLANG_DFLASH_TREE_GDN", tree_gdn)

    class ModelRunnerKVCacheMixin:  # SGLang 0.5.10's reservation, as handle_max_mamba_cache computes it
        def handle_max_mamba_cache(self, total_rest_memory):
            args, per_req = self.server_args, self.mambaish_config.mamba2_cache_params.mamba_cache_per_req
            return total_rest_memory - per_req * args.max_running_requests * args.speculative_num_draft_tokens / GiB

    memory_plan.patch_kv_cache_mixin(SimpleNamespace(ModelRunnerKVCacheMixin=ModelRunnerKVCacheMixin))
    runner = ModelRunnerKVCacheMixin()
    runner.server_args = SimpleNamespace(
        speculative_algorithm=algorithm, tp_size=1, max_running_requests=32, speculative_num_draft_tokens=33,
        enable_dp_attention=False, speculative_draft_model_path=str(draft), speculative_draft_model_revision=None,
    )  # fmt: skip
    runner.mambaish_config = SimpleNamespace(mamba2_cache_params=SimpleNamespace(mamba_cache_per_req=GiB // 16))
    runner.model_config = SimpleNamespace(context_len=2048, dtype=torch.bfloat16)
    runner.dp_size = 1
    weights, context = memory_plan.draft_bytes(DraftConfig.from_dict(read_config(draft)), 32, 2048, torch.bfloat16)
    expected = 100.0 - (weights + context) / GiB * held - (1 if refunded else 32) * 33 / 16
    assert runner.handle_max_mamba_cache(100.0) == pytest.approx(expected)
