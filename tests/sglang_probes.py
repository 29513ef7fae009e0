"""Code run in fresh interpreters by the SGLang tests (plugin and patch series alike)."""

import textwrap

# replay_slots(mark_attr) -> {mark: GDN state slots}: SGLang's MambaAttnBackendBase._replay_metadata on two real
# requests (the first of sequence length 1) in a CUDA graph of batch 3 (one padding row, fill value 1), with the
# verify input unmarked (None) and marked with its real request count (2) under the attribute mark_attr.
REPLAY_SLOTS = textwrap.dedent(
    """
    def replay_slots(mark_attr):
        from types import SimpleNamespace

        import torch
        import sglang.srt.layers.attention.hybrid_linear_attn_backend as m
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        be = object.__new__(m.MambaAttnBackendBase)
        be.topk = 1  # SGLang 0.5.11 reads the backend's speculative_eagle_topk
        mapping = torch.tensor([10, 11, 12, 13])  # req_pool_idx -> GDN state slot
        be.req_to_token_pool = SimpleNamespace(get_mamba_indices=lambda idx: mapping[idx],
                                               translate_mamba_indices=lambda idx: idx)  # 0.5.23: virtual = physical
        be.state_indices_list = [torch.full((i + 1,), -7, dtype=torch.int32) for i in range(4)]
        be.query_start_loc_list = [torch.zeros(i + 2, dtype=torch.int32) for i in range(4)]
        be.cached_cuda_graph_verify_query_start_loc = torch.arange(0, 5 * 16, 16, dtype=torch.int32)
        # SGLang 0.5.23 caches the fill value at construction and has a fused path we leave off
        be._graph_seq_len_fill_value, be._fused_state_indices_ok, be.replayssm_write_pos_list = 1, False, None
        slots = {}
        for mark in (None, 2):
            spec = SimpleNamespace(topk=1, draft_token_num=16, ragged_verify_layout=None)  # 0.5.23 reads the layout
            if mark is not None:
                setattr(spec, mark_attr, mark)
            meta = be._replay_metadata(3, torch.tensor([2, 3, 0]), ForwardMode.TARGET_VERIFY, spec, torch.tensor([1, 9, 1]))
            slots[str(mark)] = meta.mamba_cache_indices.tolist()
        return slots
    """
)
