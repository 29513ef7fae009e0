"""Where the tests' shared files are, for test modules in any subfolder of tests/ (conftest.py puts tests/ on sys.path)."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
STUB = TESTS / "sgl_kernel_stub"  # the import-only sgl_kernel stand-in


def use_sgl_kernel_stand_in() -> None:
    """Put the stand-in first on sys.path when the real `sgl_kernel` cannot be imported (it needs a GPU driver), so
    that SGLang's modules import; tests never call into it."""
    import sys

    try:
        import sgl_kernel  # noqa: F401
    except Exception:
        if str(STUB) not in sys.path:
            sys.path.insert(0, str(STUB))
