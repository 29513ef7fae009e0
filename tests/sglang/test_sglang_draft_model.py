"""The drafter on SGLang's layers, on CPU at TP=1 (gloo): it loads a z-lab-format checkpoint,
refuses a mismatched one, and its context K/V equal the plain-torch drafter's.

SGLang's runtime modules import `sgl_kernel`, whose compiled build cannot load without a GPU
driver; this test puts the import-only stand-in (tests/sgl_kernel_stub/, test-only: never on the
path where a real sgl_kernel imports) first on
sys.path when the real one is missing. Nothing tested here calls into it: in SGLang's CPU-engine
mode the layers used run their torch-native paths.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import torch
from model_helpers import save_tiny_target, tiny_target_config
from paths import use_sgl_kernel_stand_in
from safetensors.torch import load_file

from sglang_dflash.sglang.plugin.activate import installed_version
from sglang_dflash.sglang.plugin.versions import release

pytestmark = pytest.mark.sglang  # also run against the second supported SGLang release (.ci/run)

pytest.importorskip("sglang", reason="SGLang 0.5.10.post1 is installed by tests/setup_env.sh")
if release(installed_version()).registry:
    pytest.skip("the SGLang-layer drafter is the 0.5.10.post1 series' model; 0.5.23 serves ours through the core's "
                "drafter and has SGLang's own DFlashDraftModel", allow_module_level=True)  # fmt: skip

LIN, FULL = "linear_attention", "full_attention"


def free_port() -> int:
    """A port free right now (another run of this test may hold a fixed one)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def sgl(tmp_path_factory):
    # SGLang picks its CPU code paths (torch-native RoPE, norms) only in its CPU-engine mode, decided when
    # its layer modules are imported (a module-level `_is_cpu`); the variable is set for this file's tests and unset
    # afterwards, and layer modules an earlier test file imported take its value for that time too.
    import sys

    os.environ["SGLANG_USE_CPU_ENGINE"] = "1"
    imported = {m: m._is_cpu for name, m in list(sys.modules.items())
                if name.startswith("sglang.srt.layers") and isinstance(getattr(m, "_is_cpu", None), bool)}  # fmt: skip
    for m in imported:
        m._is_cpu = True
    use_sgl_kernel_stand_in()
    from sglang.srt.utils.common import is_cpu

    is_cpu.cache_clear()  # an earlier test file's imports may have cached it off
    from sglang.srt.distributed import init_distributed_environment, initialize_model_parallel

    init_distributed_environment(
        world_size=1, rank=0, local_rank=0, backend="gloo", distributed_init_method=f"tcp://127.0.0.1:{free_port()}"
    )
    initialize_model_parallel(1)
    from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

    root = tmp_path_factory.mktemp("sgl")  # SGLang's layers read the server's global arguments (RoPE: cache device)
    save_tiny_target(root, tiny_target_config(layer_types=(LIN, FULL)))
    set_global_server_args_for_scheduler(ServerArgs(model_path=str(root), device="cpu"))
    from sglang_dflash.sglang import draft_model

    yield draft_model
    os.environ.pop("SGLANG_USE_CPU_ENGINE")
    for m, value in imported.items():
        m._is_cpu = value
    is_cpu.cache_clear()  # cached: later imports in this process (other test files) must not take CPU-engine paths


def checkpoint(root: Path, hidden: int = 48, sliding: int | None = None) -> Path:
    from sglang_dflash.init_draft import init_draft

    save_tiny_target(root / "t", tiny_target_config(layer_types=(LIN, FULL, LIN), hidden=hidden))
    init_draft(root / "t", root / "d", num_layers=2, block_size=8, taps=3, sliding_window=sliding)
    return root / "d"


def load(sgl, path: Path):
    from transformers import AutoConfig

    model = sgl.DFlashDraftModel(AutoConfig.from_pretrained(path))
    model.load_weights(load_file(str(path / "model.safetensors")).items())
    return model


def test_loads_z_lab_checkpoint_and_matches_the_engine_drafter(sgl, tmp_path):
    from sglang_dflash.models.dflash_draft import DFlashDrafter

    path = checkpoint(tmp_path, sliding=4)
    ours, plain = load(sgl, path), DFlashDrafter.from_pretrained(path)
    assert ours.draft.layer_types == ("sliding_attention", "full_attention")
    assert ours.layers[0].self_attn.attn.sliding_window_size == 4 and ours.layers[1].self_attn.attn.sliding_window_size == -1
    taps = torch.randn(6, 3 * 48)
    positions = torch.arange(3, 9)
    features = ours.project_target_hidden(taps)
    torch.testing.assert_close(features, plain.hidden_norm(plain.fc(taps)), rtol=1e-5, atol=1e-5)
    for layer, ref in zip(ours.layers, plain.layers):
        k, v = layer.self_attn.context_kv(features, positions)
        k_ref, v_ref = ref.self_attn.kv(features[None], positions[None])
        torch.testing.assert_close(k, k_ref.reshape(6, -1), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(v, v_ref.reshape(6, -1), rtol=1e-5, atol=1e-5)


def test_refuses_mismatched_checkpoints(sgl, tmp_path):
    from transformers import AutoConfig

    good, other = checkpoint(tmp_path / "a"), checkpoint(tmp_path / "b", hidden=32)
    model = sgl.DFlashDraftModel(AutoConfig.from_pretrained(good))
    tensors = load_file(str(other / "model.safetensors"))
    with pytest.raises((ValueError, AssertionError, RuntimeError)):
        model.load_weights(tensors.items())
    tensors = load_file(str(good / "model.safetensors"))
    with pytest.raises(ValueError, match="missing tensors"):
        model.load_weights([(n, t) for n, t in tensors.items() if n != "fc.weight"])
    with pytest.raises(ValueError, match="unexpected tensor"):
        model.load_weights([*tensors.items(), ("layers.9.mlp.up_proj.weight", tensors["fc.weight"])])
