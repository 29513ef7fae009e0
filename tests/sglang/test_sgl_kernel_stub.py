"""The test-only sgl_kernel stand-in (tests/sgl_kernel_stub/, used by the SGLang CPU tests and the GPU
harness benchmarks/gpu/harness.py): each torch op against an independent plain-torch reference, and
its behaviour as `sgl_kernel` (version, dist-info, missing ops raise by name, shadowing warns) in a
fresh interpreter, since importing it as `sgl_kernel` hooks the import system and torch.library.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from paths import STUB

pytestmark = pytest.mark.sglang  # also run against the second supported SGLang release (.ci/run)


@pytest.fixture(scope="module")
def stub():
    """The stand-in loaded under a private name: its ops only, no import hook or torch.library namespace."""
    spec = importlib.util.spec_from_file_location("_sgl_kernel_stand_in_under_test", STUB / "sgl_kernel" / "__init__.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


DTYPES = [torch.float32, torch.bfloat16, torch.float16]
TOL = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (1.6e-2, 1e-2), torch.float16: (1e-3, 1e-3)}


def rms_ref(x: torch.Tensor, w: torch.Tensor, eps: float, gemma: bool) -> torch.Tensor:
    scale = (1.0 + w.double()) if gemma else w.double()
    return F.rms_norm(x.double(), (x.shape[-1],), scale, eps)


def inputs(dtype, shape=(3, 5, 64), seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 3).to(dtype)
    w = (torch.randn(shape[-1], generator=g) * 0.5 + 1).to(dtype)
    r = torch.randn(shape, generator=g).to(dtype)
    return x, w, r


def close(actual, expected, dtype):
    rtol, atol = TOL[dtype]
    assert actual.dtype == dtype
    torch.testing.assert_close(actual.double(), expected.double(), rtol=rtol, atol=atol)


def test_op_list_is_the_probe_set(stub):
    assert stub.STAND_IN and stub.__version__ == "0.4.2"
    for name in stub.OPS:
        assert callable(getattr(stub, name)), name
    assert set(stub.OPS) == {
        "rmsnorm",
        "fused_add_rmsnorm",
        "gemma_rmsnorm",
        "gemma_fused_add_rmsnorm",
        "silu_and_mul",
        "gelu_and_mul",
        "gelu_tanh_and_mul",
    }


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("gemma", [False, True])
def test_rmsnorm(stub, dtype, gemma):
    op = stub.gemma_rmsnorm if gemma else stub.rmsnorm
    x, w, _ = inputs(dtype)
    x0 = x.clone()
    close(op(x, w, 1e-6), rms_ref(x, w, 1e-6, gemma), dtype)
    assert torch.equal(x, x0)  # input untouched
    out = torch.empty_like(x)
    res = op(x, w, eps=1e-2, out=out, enable_pdl=False)
    assert res is out
    close(out, rms_ref(x, w, 1e-2, gemma), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("gemma", [False, True])
def test_fused_add_rmsnorm_in_place(stub, dtype, gemma):
    op = stub.gemma_fused_add_rmsnorm if gemma else stub.fused_add_rmsnorm
    x, w, r = inputs(dtype, shape=(7, 128), seed=1)
    total = x.double() + r.double()  # the sum is normalised before it is rounded to the residual's dtype
    assert op(x, r, w, 1e-5) is None
    close(r, total, dtype)
    close(x, rms_ref(total, w, 1e-5, gemma), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "name, act",
    [
        ("silu_and_mul", lambda t: t * torch.sigmoid(t)),
        ("gelu_and_mul", lambda t: 0.5 * t * (1 + torch.erf(t / 2**0.5))),
        ("gelu_tanh_and_mul", lambda t: 0.5 * t * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (t + 0.044715 * t**3)))),
    ],
)
def test_act_and_mul(stub, dtype, name, act):
    op = getattr(stub, name)
    x, _, _ = inputs(dtype, shape=(4, 3, 96), seed=2)
    d = x.shape[-1] // 2
    ref = act(x[..., :d].double()) * x[..., d:].double()
    y = op(x)
    assert y.shape == (4, 3, d)
    close(y, ref, dtype)
    out = torch.empty(4, 3, d, dtype=dtype)
    assert op(x, out=out, enable_pdl=False) is out
    close(out, ref, dtype)


def run_fresh(code: str, pythonpath: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(pythonpath))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=120)


def test_as_sgl_kernel_in_a_fresh_interpreter():
    code = """
        import warnings
        warnings.simplefilter("error")  # no shadowing warning: nothing else named sgl_kernel here
        import importlib.metadata, torch
        import sgl_kernel
        from sgl_kernel import rmsnorm
        from sgl_kernel.elementwise import some_fused_op  # any submodule imports; its ops raise by name
        assert sgl_kernel.STAND_IN and sgl_kernel.__version__ == "0.4.2"
        assert importlib.metadata.version("sglang-kernel") == "0.4.2"  # SGLang's version check
        assert hasattr(torch.ops.sgl_kernel, "moe_fused_gate")  # SGLang registers a fake for it
        from sgl_kernel.utils import is_arch_support_pdl
        assert is_arch_support_pdl() is False  # no PDL: SGLang 0.5.23's triton backend asks at construction
        for call in (lambda: sgl_kernel.build_tree_kernel_efficient(1), lambda: some_fused_op()):
            try:
                call()
            except NotImplementedError as e:
                print("RAISED", e)
        x = torch.randn(2, 8)
        assert torch.allclose(rmsnorm(x, torch.ones(8)), x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
        print("OK")
    """
    out = run_fresh(code, [str(STUB)])
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-3000:]
    assert "RAISED sgl_kernel stand-in (test-only): sgl_kernel.build_tree_kernel_efficient is not implemented" in out.stdout
    assert "RAISED sgl_kernel stand-in (test-only): sgl_kernel.elementwise.some_fused_op is not implemented" in out.stdout


def test_warns_when_shadowing_another_sgl_kernel(tmp_path):
    (tmp_path / "sgl_kernel").mkdir()
    (tmp_path / "sgl_kernel" / "__init__.py").write_text("REAL = True\n")
    code = """
        import warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import sgl_kernel
        assert sgl_kernel.STAND_IN
        print("WARNED" if any("shadowing another sgl_kernel" in str(x.message) for x in w) else "SILENT")
    """
    out = run_fresh(code, [str(STUB), str(tmp_path)])
    assert out.returncode == 0 and "WARNED" in out.stdout, (out.stdout, out.stderr[-3000:])


@pytest.mark.parametrize("real", [False, True], ids=["absent", "installed"])
def test_flash_mla_stand_in_only_where_none_is_installed(tmp_path, real):
    """SGLang 0.5.23's EAGLE v2 worker imports FlashMLA's backend whatever the model; with the stand-in loaded, an
    absent `flash_mla` imports as ops that raise by name, and an installed one (even later on sys.path) wins."""
    if real:
        (tmp_path / "flash_mla").mkdir()
        (tmp_path / "flash_mla" / "__init__.py").write_text("REAL = True\n")
    code = """
        import sgl_kernel, flash_mla
        if "REAL" in vars(flash_mla):
            print("REAL")
        else:
            from flash_mla.flash_mla_interface import FlashMLASchedMeta
            try:
                flash_mla.fused_norm_rope_attn_rope_cast()
            except NotImplementedError as e:
                print("RAISED", e)
    """
    out = run_fresh(code, [str(STUB), str(tmp_path)])
    assert out.returncode == 0, out.stderr[-3000:]
    if real:
        assert out.stdout.strip() == "REAL"
    else:
        assert "RAISED sgl_kernel stand-in (test-only): flash_mla.fused_norm_rope_attn_rope_cast is not" in out.stdout
