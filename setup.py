"""Ships `sglang_dflash.pth` at the root of site-packages (pyproject.toml has everything else).

SGLang 0.5.10.post1 has no plugin loader and spawns its schedulers in fresh processes, so there the plugin
registers itself through a .pth line that Python runs at every start (sglang_dflash/sglang/plugin/bootstrap.py:
a path lookup when SGLang is absent or loads plugins itself, as 0.5.11 does through the entry point).
"""

import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH = "sglang_dflash.pth"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), PTH)


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        self.copy_file(SOURCE, os.path.join(self.build_lib, PTH))

    def get_outputs(self, include_bytecode=True):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, PTH)]


class EditableWheelWithPth(editable_wheel):
    """pip install -e: editable wheels map packages only, so the .pth joins the files unpacked into the wheel
    (the hook setuptools uses for namespace packages' .pth files)."""

    def _install_namespaces(self, installation_dir, pth_prefix):
        super()._install_namespaces(installation_dir, pth_prefix)
        shutil.copy(SOURCE, os.path.join(installation_dir, PTH))


setup(cmdclass={"build_py": BuildPyWithPth, "editable_wheel": EditableWheelWithPth})
