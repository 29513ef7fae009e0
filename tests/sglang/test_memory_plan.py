"""What DFLASH/DDTREE change in SGLang's memory plan (`sglang_dflash.sglang.memory_plan`), on CPU: the drafter's
per-token context bytes in the cell size and its weights held back (equal to what the worker then allocates), and
the per-node GDN states SGLang reserves but the tree-GDN verify does not allocate, given back. SGLang's method is stood in for by
its arithmetic (no SGLang import)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from hooks import around
from model_helpers import save_tiny_target, tiny_target_config

from sglang_dflash import env
from sglang_dflash.init_draft import init_draft
from sglang_dflash.models.config import DraftConfig, read_config
from sglang_dflash.models.dflash_draft import DFlashDrafter
from sglang_dflash.sglang import memory_plan
from sglang_dflash.sglang.plugin import patches

GiB = 1 << 30
LIN, FULL = "linear_attention", "full_attention"


@pytest.fixture(scope="module")
def draft(tmp_path_factory):
    root = tmp_path_factory.mktemp("memory_plan")
    save_tiny_target(root / "target", tiny_target_config(layer_types=(LIN, LIN, LIN, FULL)))
    init_draft(root / "target", root / "draft", num_layers=2, block_size=16, taps=3)
    return root / "draft"


# The fixture's drafter in bf16, by hand: hidden 48, MLP 80, 4 query / 2 KV heads of 16, 2 layers, 3 taps, no biases.
# Per layer: q 48*64 + k 48*32 + v 48*32 + o 64*48 = 9216, q/k norms 2*16 = 32, MLP 3*48*80 = 11520, its two norms
# 2*48 = 96: 20864. Two layers 41728, fc 3*48*48 = 6912, hidden and final norms 2*48 = 96: 48736 parameters.
DRAFT_WEIGHT_BYTES = 48736 * 2
DRAFT_TOKEN_BYTES = 2 * 2 * 2 * 16 * 2  # K and V x 2 layers x 2 KV heads x head dim 16 x 2 bytes = 256


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_draft_bytes_equal_what_the_worker_allocates(draft, dtype):
    """Weights, and context K/V per pool entry: the dense cache (5 slots x 96 positions) and a pool of 700 entries
    read through a page table (the worker's layout) hold that many entries plus the scratch one."""
    config = DraftConfig.from_dict(read_config(draft))
    model = DFlashDrafter.from_pretrained(draft, dtype=dtype)
    weights, per_token = memory_plan.draft_bytes(config, dtype)
    assert weights == sum(p.numel() * p.element_size() for p in model.parameters())
    dense = model.new_cache(num_slots=5, max_len=96)
    paged = model.new_cache(5, 96, table=torch.zeros(5, 96, dtype=torch.int32), pool_size=700)
    for cache, entries in ((dense, 5 * 96), (paged, 700)):
        assert 2 * cache.k.numel() * cache.k.element_size() == per_token * (entries + 1)


def test_draft_max_len(monkeypatch):
    monkeypatch.delenv(env.DRAFT_MAX_LEN.name, raising=False)
    assert memory_plan.draft_max_len(4096) == 4096 and memory_plan.draft_max_len(262144) == 8192
    monkeypatch.setenv(env.DRAFT_MAX_LEN.name, "1000")
    assert memory_plan.draft_max_len(4096) == 1000


@pytest.mark.parametrize("algorithm", ["DDTREE", "DFLASH_CHAIN"])
def test_memory_plan(monkeypatch, draft, algorithm):
    """Per KV-cache token the drafter's context K/V joins the cell size (the pool configurator's hook); its
    weights are held back before the KV cache is sized; SGLang's per-node GDN reservation shrinks to one request (our
    tree verify keeps no per-node states). (The hooks exist only in a scheduler serving ours: `test_sglang_plugin`.)"""

    class ModelRunnerKVCacheMixin:  # SGLang's reservation, as handle_max_mamba_cache computes it
        def handle_max_mamba_cache(self, total_rest_memory):
            args, per_req = self.server_args, self.mambaish_config.mamba2_cache_params.mamba_cache_per_req
            return total_rest_memory - per_req * args.max_running_requests * args.speculative_num_draft_tokens / GiB

    class DefaultPoolConfigurator:  # 0.5.11
        def _compute_cell_size(self, mr, num_layers):
            return 1000 * num_layers

    around(ModelRunnerKVCacheMixin, "handle_max_mamba_cache", patches.handle_max_mamba_cache)
    around(DefaultPoolConfigurator, "_compute_cell_size", patches.compute_cell_size)
    runner = ModelRunnerKVCacheMixin()
    runner.server_args = SimpleNamespace(
        speculative_algorithm=algorithm, tp_size=1, max_running_requests=32, speculative_num_draft_tokens=33,
        enable_dp_attention=False, speculative_draft_model_path=str(draft), speculative_draft_model_revision=None,
        cuda_graph_bs=[1, 2], disable_cuda_graph=False,
    )  # fmt: skip
    runner.mambaish_config = SimpleNamespace(mamba2_cache_params=SimpleNamespace(mamba_cache_per_req=GiB // 16))
    runner.model_config = SimpleNamespace(context_len=2048, dtype=torch.bfloat16)
    runner.dp_size, runner.is_draft_worker = 1, False
    assert DefaultPoolConfigurator()._compute_cell_size(runner, 4) == 4000 + DRAFT_TOKEN_BYTES
    expected = 100.0 - DRAFT_WEIGHT_BYTES / GiB - 33 / 16  # the states of one request
    assert runner.handle_max_mamba_cache(100.0) == pytest.approx(expected, rel=0, abs=1e-12)  # the weights: 9e-5 GiB


def test_0_5_11_plan_holds_back_the_width_tiers(monkeypatch, draft):
    """With SGLANG_DFLASH_WIDTHS the 0.5.11 plan also holds back the narrower verify widths' graphs (captured after
    it), by hand: the fixture's target keeps 8 x 97 = 776 bytes of logits a verified token and, in each of its 3 GDN
    layers, 4 x ((2 x 2 x 8 + 4 x 12) + 4 x 12) = 512: 2,312 bytes; graphs at 1, 2 and 4 requests; tiers 1, 2, 4, 8
    beside 16 nodes: 15 narrower nodes a request."""

    class ModelRunnerKVCacheMixin:
        def handle_max_mamba_cache(self, total_rest_memory):
            return total_rest_memory

    around(ModelRunnerKVCacheMixin, "handle_max_mamba_cache", patches.handle_max_mamba_cache)
    runner = ModelRunnerKVCacheMixin()
    runner.server_args = SimpleNamespace(
        speculative_algorithm="DDTREE", tp_size=1, max_running_requests=4, speculative_num_draft_tokens=16,
        enable_dp_attention=False, speculative_draft_model_path=str(draft), speculative_draft_model_revision=None,
        model_path=str(draft.parent / "target"), revision=None, cuda_graph_bs=[1, 2, 4], disable_cuda_graph=False,
        attention_backend="triton",
    )  # fmt: skip
    runner.mambaish_config = SimpleNamespace(mamba2_cache_params=SimpleNamespace(mamba_cache_per_req=0))
    runner.model_config = SimpleNamespace(context_len=2048, dtype=torch.bfloat16)
    runner.dp_size, runner.is_draft_worker = 1, False
    monkeypatch.setenv(env.WIDTHS.name, "off")
    without = runner.handle_max_mamba_cache(100.0)
    assert without == pytest.approx(100.0 - DRAFT_WEIGHT_BYTES / GiB, rel=0, abs=1e-12)
    monkeypatch.setenv(env.WIDTHS.name, "auto")
    assert without - runner.handle_max_mamba_cache(100.0) == pytest.approx((1 + 2 + 4) * 15 * 2312 / GiB, rel=1e-9)
    runner.server_args.disable_cuda_graph = True  # no graphs: nothing for them
    assert runner.handle_max_mamba_cache(100.0) == pytest.approx(without, rel=0, abs=1e-12)


def test_draft_bytes_per_rank_of_the_sharded_drafter(monkeypatch):
    """At TP=2 the plan counts rank 0's shard (`tp_shard.shard_drafter`): its weights and its key/value heads; with
    SGLANG_DFLASH_DRAFT_TP=0, or heads that do not split, the whole drafter. Byte counts by hand, in bf16:
    whole, per layer q 48*32 + k 48*16 + v 48*16 + o 32*48 = 4608, q/k norms 2*8, MLP 3*48*40 = 5760, norms 2*48:
    10480; two layers 20960, fc 2*48*48 = 4608, hidden and final norms 96: 25664 parameters; per token K and V
    x 2 layers x 2 KV heads x 8 x 2 bytes = 128. Rank 0 of 2: half the heads and MLP rows, per layer q 48*16 +
    k 48*8 + v 48*8 + o 16*48 = 2304, norms 16, MLP 3*48*20 = 2880, norms 96: 5296; 10592 + 4704 (fc and norms,
    replicated) = 15296 parameters; one KV head: 64 bytes per token."""
    config = DraftConfig.from_dict(
        dict(hidden_size=48, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             head_dim=8, vocab_size=60, block_size=6, dflash_config=dict(target_layer_ids=[0, 2], mask_token_id=5))
    )  # fmt: skip
    whole, rank0 = (25664 * 2, 128), (15296 * 2, 64)
    monkeypatch.delenv(env.DRAFT_TP.name, raising=False)
    assert memory_plan.draft_bytes(config, torch.bfloat16) == whole
    assert memory_plan.draft_bytes(config, torch.bfloat16, tp_size=2) == rank0
    assert memory_plan.draft_tp_size(config, 2) == 2 and memory_plan.draft_tp_size(config, 3) == 1
    assert memory_plan.draft_bytes(config, torch.bfloat16, tp_size=3) == whole  # 4 heads do not split over 3
    monkeypatch.setenv(env.DRAFT_TP.name, "0")
    assert memory_plan.draft_bytes(config, torch.bfloat16, tp_size=2) == whole


@pytest.mark.sglang
@pytest.mark.parametrize(
    "ours, radix, expected",
    [  # hand-worked: 100 GiB left, 1/16 GiB of GDN state per request, 32 requests, 33 verify tokens
        (True, False, 100 - 33 / 16 - 33 / 16),  # 32 slots + padding; per-node states of one slot
        (True, True, 100 - 20 - 33 / 16),  # ratio 0.25: 20 GiB of slots (319 + padding), none reserved beside them
        (False, False, 100 - 33 / 16 - 33 * 33 / 16),  # EAGLE: SGLang's reservation of per-node states stands
    ],
)
@pytest.mark.parametrize("widths", ["off", "auto"])
def test_sglang_0_5_23_plans_one_slot_of_per_node_states(monkeypatch, draft, ours, radix, expected, widths):
    """SGLang 0.5.23's own `KVCacheConfigurator._handle_max_mamba_cache` (its run-time settings stood in for) under the
    plugin's hook: for ours (their tree verify) it plans GDN state slots as where no per-node states are kept, then takes
    off the one slot's the pool keeps; for another algorithm it is SGLang's own; its module is left as it was. With
    SGLANG_DFLASH_WIDTHS=auto, ours also holds back the narrower widths' verify graphs, by hand as in
    `test_0_5_11_plan_holds_back_the_width_tiers`: decode graphs at 1, 2 and 4 requests, tiers 1-32 beside 33 nodes
    (63 narrower nodes a request), 2,312 bytes a verified token; none where SGLang sizes the KV cache after capture."""

    from paths import use_sgl_kernel_stand_in

    from sglang_dflash.sglang.plugin.activate import installed_version
    from sglang_dflash.sglang.plugin.versions import release

    table = release(installed_version() or "")
    if table is None or not table.registry:
        pytest.skip(f"SGLang {installed_version()}: the plan is ModelRunnerKVCacheMixin's (test_memory_plan above)")
    use_sgl_kernel_stand_in()
    import sglang.srt.runtime_context as runtime_context
    from sglang.srt.mem_cache import kv_cache_configurator as kvc
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    from sglang_dflash.sglang.algorithm import DraftTreeAlgorithm  # what the registry hands SGLang (`test_sglang_plugin`)

    schedule = SimpleNamespace(max_running_requests=32, max_mamba_cache_size=None, mamba_full_memory_ratio=0.25)
    monkeypatch.setattr(kvc, "get_schedule", lambda: schedule)
    monkeypatch.setattr(kvc, "get_spec", lambda: SimpleNamespace(speculative_num_draft_tokens=33))
    monkeypatch.setattr(kvc, "get_memory", lambda: SimpleNamespace(disable_radix_cache=not radix, enable_unified_memory=False))
    monkeypatch.setattr(kvc, "get_exec", lambda: SimpleNamespace(mamba=SimpleNamespace(enable_linear_replayssm_spec=False)))
    decode = SimpleNamespace(bs=[1, 2, 4], max_bs=4)
    monkeypatch.setattr(runtime_context, "get_exec", lambda: SimpleNamespace(graph=SimpleNamespace(
        cuda_graph_config=SimpleNamespace(decode=decode))))  # fmt: skip
    monkeypatch.setenv(env.WIDTHS.name, widths)
    monkeypatch.setattr(kvc, "get_disagg", lambda: SimpleNamespace(disaggregation_mode="null", enable_pd_role_switch=False))
    monkeypatch.setattr(kvc, "get_context", lambda: SimpleNamespace(override=lambda _, **kw: vars(schedule).update(kw)))
    skips = kvc._pd_prefill_skips_mamba_spec_state
    monkeypatch.setattr(kvc.KVCacheConfigurator, "_handle_max_mamba_cache", kvc.KVCacheConfigurator._handle_max_mamba_cache)
    around(kvc.KVCacheConfigurator, "_handle_max_mamba_cache", patches.plan_mamba_states)

    class Plan(kvc.KVCacheConfigurator):  # what the method reads of the rest of the configurator
        def fused_entry_bytes(self, kind):
            return None

        def _calculate_mamba_ratio(self):
            return 1

    plan = object.__new__(Plan)
    plan.mambaish_config = SimpleNamespace(mamba2_cache_params=SimpleNamespace(layers=[0, 1, 2], mamba_cache_per_req=GiB // 16))
    plan.pp_size, plan.attn_dp_size, plan.is_draft_worker, plan.extra_mamba_cache_bytes_per_req = 1, 1, False, 0
    plan.hybrid_gdn_config, plan.hybrid_kda_config = object(), None
    name = "DDTREE" if ours else "EAGLE"
    plan.spec_algorithm = DraftTreeAlgorithm(name) if ours else SpeculativeAlgorithm.from_string(name)
    plan.server_args = SimpleNamespace(
        speculative_num_draft_tokens=33, speculative_algorithm=name, tp_size=1, max_running_requests=32,
        disable_cuda_graph=False, model_path=str(draft.parent / "target"), revision=None, attention_backend="triton",
        speculative_draft_model_path=str(draft), speculative_draft_model_revision=None,
    )  # fmt: skip
    tiers = (1 + 2 + 4) * 63 * 2312 / GiB if ours and widths == "auto" else 0.0
    plan.post_capture_kv_active = False
    assert plan._handle_max_mamba_cache(100.0) == pytest.approx(expected - tiers, rel=0, abs=1e-9)
    assert kvc._pd_prefill_skips_mamba_spec_state is skips
    plan.post_capture_kv_active = True
    assert plan._handle_max_mamba_cache(100.0) == pytest.approx(expected, rel=0, abs=1e-9)
