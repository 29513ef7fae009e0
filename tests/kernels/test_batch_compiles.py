"""The kernels a server step launches outside CUDA graphs (the verify's mask, the greedy walk, the KV and GDN
commits, the tree build and walk) compile a bounded number of times whatever the batch size: a build keyed by the
request count R is a 0.1-0.2 s stall the first time a server's batch reaches that count (seen in the server at 27B
shapes: 80-240 ms `prepare` steps at 13, 16 and 31 requests, from the mask's block sized by R).

Counted without a GPU: each wrapper runs on CPU tensors with Triton's launch intercepted, and a build is what
`launch_specs.kernel_spec` says Triton compiles (constexprs, signature, multiple-of-16 hints on ints not marked
do_not_specialize). The bound is by hand: one build for every R, and for the greedy walk one per power of two of
programs a request (1 to 32: six).
"""

from __future__ import annotations

from collections import defaultdict
from unittest import mock

import pytest
import torch
from launch_specs import fresh_package_without_interpreter, intercepted_launches, kernel_spec

REQUESTS = (1, 2, 3, 5, 7, 8, 9, 13, 16, 17, 24, 31, 32, 33, 48, 64, 100, 128, 131)
N, DEPTHS, VOCAB = 32, 15, 4096
HV, K, CONV_D, CONV_W = 4, 16, 64, 4
SLOTS = 256  # the state pool's (a server's: fixed, whatever the batch)


def step_calls(kernels, R: int) -> dict:
    """{name: call} of the out-of-graph launches of one server step at R requests (small head sizes: the builds'
    keys do not depend on them)."""
    e, long, bf16 = torch.empty, torch.long, torch.bfloat16
    slots, accepted = torch.arange(R), e(R, DEPTHS + 1, dtype=long)
    gdn, conv = kernels.tree_gdn.tree_gdn, kernels.tree_conv.tree_conv

    def gdn_commit():  # every GDN layer's commit in one launch, by address (the server's)
        ctx = gdn.TreeGDNTritonContext(e(R, N, HV, K), e(R, N, HV), e(R, N, 1, K))
        gdn.tree_gdn_commit_triton(e(3, SLOTS, HV, K, K), slots, gdn.context_tables([ctx] * 3), accepted)

    def conv_commit():
        layers = kernels.layer_table.LayerTable.of([e(R, N, CONV_D, dtype=bf16)] * 3)
        conv.tree_conv_commit_triton(e(3, SLOTS, CONV_D, CONV_W - 1, dtype=bf16), slots, layers, accepted)

    return {
        "custom_mask": lambda: kernels.tree_attention.sglang_custom_mask_kernel(
            e(R, N, N, dtype=torch.bool), torch.full((R,), 100), 100 * R
        ),
        "greedy_walk": lambda: kernels.tree_walk.greedy_walk(
            e(R, N, dtype=long), e(R, N, dtype=long), e(R, N, VOCAB, dtype=bf16), DEPTHS
        ),
        "tree_walk": lambda: kernels.tree_walk.tree_walk(*(e(R, N, dtype=long) for _ in range(4)), DEPTHS),
        "commit": lambda: kernels.accept_commit.commit_accepted_kernel(
            e(SLOTS, 512, dtype=torch.int32), slots, slots, e(R, N, dtype=long), accepted, slots, slots
        ),
        "tree_build": lambda: kernels.tree_build.tree_build(
            e(R, DEPTHS, N - 1), e(R, DEPTHS, N - 1, dtype=long), e(R, dtype=long), N - 1
        ),
        "gdn_commit": gdn_commit,
        "conv_commit": conv_commit,
    }  # fmt: skip


def builds_by_call(sms: int) -> dict[str, int]:
    """{call: distinct builds over REQUESTS} on a device of `sms` SMs."""
    seen = []  # (call, kernel, args, kwargs)
    with fresh_package_without_interpreter() as kernels:
        for name in ("accept_commit", "tree_build", "tree_walk", "layer_table", "tree_conv", "tree_gdn"):
            __import__(f"sglang_dflash.kernels.{name}")
        for R in REQUESTS:
            for name, call in step_calls(kernels, R).items():
                with (
                    intercepted_launches() as launches,
                    mock.patch.object(kernels.device, "multiprocessor_count", lambda device: sms),
                ):
                    call()
                assert launches, f"{name}: no launch"
                seen += [(name, *launch) for launch in launches]
    builds = defaultdict(list)  # specs outside the block: Triton's type mangling imports modules that need its interpreter
    for name, kernel, args, kwargs in seen:
        spec = (kernel, kernel_spec(kernel, args, kwargs))
        if spec not in builds[name]:
            builds[name].append(spec)
    return {name: len(specs) for name, specs in builds.items()}


@pytest.mark.parametrize("sms", [132, 84])  # an H100 / H200, an RTX A6000
def test_step_kernels_build_a_bounded_number_of_times(sms):
    builds = builds_by_call(sms)
    assert builds.pop("greedy_walk") <= 6  # programs a request: 1, 2, 4, 8, 16 or 32
    assert builds == {name: 1 for name in builds}, builds
