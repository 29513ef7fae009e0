"""The GPU memory the TARGET_VERIFY CUDA graphs of DFLASH_CHAIN / DDTREE keep, estimated from the target's config
before any is captured (a leaf module: server-argument resolution warns with it).

SGLang captures a verify graph for every batch size up to --cuda-graph-max-bs, and each graph keeps its outputs and
what our tree verify records for the commit, in proportion to the tokens it verifies: at Qwen3.6-27B's one-rank
shapes the H100 capture logs read 3-5 MB a verified token (benchmarks/RESULTS.md), so the sizes SGLang picks for
speculative decoding by default would take tens of GB at 32 tokens a request."""

from __future__ import annotations

from itertools import accumulate

GRAPH_BUDGET_GIB = 4.0  # what SGLang's memory settings hold back for a speculative algorithm's graphs (EAGLE's 4 GB)


def verify_graph_token_bytes(target: dict, tp_size: int) -> int:
    """GPU bytes one verified token (a request's tree node) keeps in each captured TARGET_VERIFY graph of a hybrid GDN
    target (`target`: its text config): the graph's logits over the whole vocabulary (fp32, and as much again), and
    per GDN layer the tree verify's record for the commit (its input and keys, u: 4 bytes a conv channel and a value
    channel of this rank). An estimate: 3.6 MB at Qwen3.6-27B's one-rank shapes, where H100 capture logs read 3-5."""
    gdn = sum(t == "linear_attention" for t in target.get("layer_types", []))
    conv = 2 * target.get("linear_num_key_heads", 0) * target.get("linear_key_head_dim", 0)
    value = target.get("linear_num_value_heads", 0) * target.get("linear_value_head_dim", 0)
    return 8 * target["vocab_size"] + gdn * 4 * ((conv + value) + value) // tp_size


def verify_graphs_gib(batch_sizes: list[int], nodes: int, token_bytes: int) -> float:
    """GiB the verify graphs of these captured batch sizes keep, at `nodes` tokens a request."""
    return sum(batch_sizes) * nodes * token_bytes / (1 << 30)


def graph_sizes_within(batch_sizes: list[int], nodes: int, token_bytes: int, budget_gib: float) -> list[int]:
    """The longest run of the smallest captured batch sizes whose verify graphs fit budget_gib (at least the first)."""
    sizes = sorted(batch_sizes)
    fits = sum(total * nodes * token_bytes / (1 << 30) <= budget_gib for total in accumulate(sizes))
    return sizes[: max(fits, 1)]
