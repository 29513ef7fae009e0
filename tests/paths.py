"""Where the tests' shared files are, for test modules in any subfolder of tests/ (conftest.py puts tests/ on sys.path)."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
STUB = TESTS / "sgl_kernel_stub"  # the import-only sgl_kernel stand-in
