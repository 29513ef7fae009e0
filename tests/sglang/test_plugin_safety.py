"""Installing sglang-dflash never breaks a stock SGLang: a fake SGLang module tree (small stand-ins of the modules the
stock patches touch, with a dist-info naming its version) goes first on the path of a fresh interpreter, then

- with the shape the table expects, our names resolve (the fake tree is good enough to be patched);
- with one attribute renamed or one signature changed, nothing is patched, one warning line names the SGLang version
  and the attribute, SGLang's own import and server arguments work, and asking for DDTREE stops with one line;
- with an unknown version string, nothing is patched and nothing is said, unless DDTREE is asked for: then one line
  naming the supported versions.

The plugin comes in through its entry point, as SGLang 0.5.11's loader calls it, and hooks through the installed
SGLang's own `HookRegistry` (its file copied into the fake tree). No real SGLang is imported here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sglang_dflash.sglang.plugin.versions import SUPPORTED

pytestmark = pytest.mark.sglang  # also run against the second supported SGLang release (.ci/run)

SPEC_INFO = """
from enum import Enum, auto

class SpeculativeAlgorithm(Enum):
    EAGLE = auto()
    NONE = auto()

    @classmethod
    def from_string(cls, {name}):
        return cls.NONE if {name} is None else cls[{name}.upper()]
"""

SERVER_ARGS = """
from dataclasses import dataclass

@dataclass
class ServerArgs:
    speculative_algorithm: str | None = None

    def __post_init__(self):
        self._handle_model_specific_adjustments()
        self.{handle}()

    def _handle_model_specific_adjustments(self):
        pass

    def {handle}(self):
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
        SpeculativeAlgorithm.from_string(self.speculative_algorithm)

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--speculative-algorithm", choices=["EAGLE"])
"""

SCHEDULER = """
class Scheduler:
    def __init__(self, server_args, port_args=None):
        self.server_args = server_args
"""

# what the fresh interpreter does: activate as SGLang's scheduler process would (the entry point is loaded from inside
# the scheduler module), then report
PROBE = """
import argparse, json, sys
import sglang.srt.managers.scheduler
{load}
from sglang.srt.server_args import ServerArgs
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
from sglang_dflash.sglang.plugin.activate import hooked, refuse_if_asked
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
out = {{"stock": repr(ServerArgs(speculative_algorithm="EAGLE").speculative_algorithm),
        "eagle": repr(SpeculativeAlgorithm.from_string("EAGLE")),
        "hooked": [hooked(f) for f in (SpeculativeAlgorithm.from_string, ServerArgs.add_cli_args, ServerArgs.__post_init__,
                                      sglang.srt.managers.scheduler.Scheduler.__init__)],
        "choices": parser._actions[-1].choices}}
try:
    out["ddtree"] = repr(SpeculativeAlgorithm.from_string("DDTREE"))
except Exception as e:
    out["ddtree"] = type(e).__name__
try:
    refuse_if_asked(["launch_server", "--speculative-algorithm", "DDTREE"])
    out["refusal"] = None
except SystemExit as e:
    out["refusal"] = e.code
print("OUT" + json.dumps(out))
"""

ENTRY_LOAD = "from sglang_dflash.sglang.plugin.entry import load; load()"


def fake_sglang(root: Path, version: str, name="name", handle="_handle_speculative_decoding") -> Path:
    files = {
        "sglang/__init__.py": "",
        "sglang/srt/__init__.py": "",
        "sglang/srt/speculative/__init__.py": "",
        "sglang/srt/speculative/spec_info.py": SPEC_INFO.format(name=name),
        "sglang/srt/server_args.py": SERVER_ARGS.format(handle=handle),
        "sglang/srt/managers/__init__.py": "",
        "sglang/srt/managers/scheduler.py": SCHEDULER,
        f"sglang-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n",
    }
    files["sglang/srt/plugins/__init__.py"] = ""
    files["sglang/srt/plugins/hook_registry.py"] = hook_registry_source()
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


def run_probe(tree: Path, load: str) -> tuple[dict, list[str]]:
    import json

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
    env.pop("SGLANG_DFLASH_DISABLE", None)
    done = subprocess.run([sys.executable, "-c", PROBE.format(load=load)], capture_output=True, text=True, env=env,
                          timeout=120, cwd=tree)  # fmt: skip
    assert "OUT" in done.stdout, done.stderr[-3000:]
    out = json.loads(done.stdout.split("OUT", 1)[1])
    out["refusal_lines"] = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    return out, [line for line in done.stderr.splitlines() if "sglang-dflash is off" in line and not line.startswith("error")]


def hook_registry_source() -> str:
    """The installed SGLang's `srt/plugins/hook_registry.py` (standard library imports only), found without importing
    SGLang."""
    import importlib.util

    spec = importlib.util.find_spec("sglang")
    if spec is None:
        pytest.skip("needs SGLang's hook_registry.py (tests/setup_env.sh installs SGLang)")
    return (Path(spec.origin).parent / "srt" / "plugins" / "hook_registry.py").read_text()


def test_the_fake_tree_is_patched_when_its_shape_matches(tmp_path):
    out, warnings = run_probe(fake_sglang(tmp_path, "0.5.11"), ENTRY_LOAD)
    assert out["ddtree"] == "<SpeculativeAlgorithm.DDTREE (sglang-dflash)>" and out["hooked"] == [True] * 4, out
    assert "DDTREE" in out["choices"] and out["refusal"] is None and not out["refusal_lines"] and not warnings, (out, warnings)


@pytest.mark.parametrize(
    "change, named",
    [
        (dict(handle="_handle_spec"), "ServerArgs._handle_speculative_decoding does not exist"),
        (dict(name="algo"), "SpeculativeAlgorithm.from_string takes (cls, algo)"),
    ],
)
def test_a_renamed_attribute_leaves_sglang_stock(tmp_path, change, named):
    version = "0.5.11"
    out, warnings = run_probe(fake_sglang(tmp_path, version, **change), ENTRY_LOAD)
    assert out["hooked"][:3] == [False] * 3 and out["ddtree"] == "KeyError" and out["choices"] == ["EAGLE"], out
    assert out["stock"] == "'EAGLE'" and out["eagle"] == "<SpeculativeAlgorithm.EAGLE: 1>", out
    assert len(warnings) == 1 and f"SGLang {version}" in warnings[0] and named in warnings[0], warnings
    assert out["refusal"] == 2 and len(out["refusal_lines"]) == 1, out
    assert out["refusal_lines"][0].startswith("error: --speculative-algorithm DDTREE needs sglang-dflash, which is off: SGLang")


def test_an_unknown_version_is_left_alone(tmp_path):
    out, warnings = run_probe(fake_sglang(tmp_path, "0.5.99"), ENTRY_LOAD)
    assert out["hooked"] == [False] * 4 and out["ddtree"] == "KeyError" and out["choices"] == ["EAGLE"], out
    assert out["stock"] == "'EAGLE'" and not warnings, (out, warnings)
    assert (
        out["refusal"] == 2
        and "SGLang 0.5.99 is not supported (supported: " + ", ".join(SUPPORTED) + ")" in out["refusal_lines"][0]
    )


OTHER_PLUGIN_FIRST = (
    "from sglang.srt.plugins.hook_registry import HookRegistry, HookType\n"
    "HookRegistry.register('sglang.srt.server_args.ServerArgs.__post_init__', lambda original, *a, **k: original(*a, **k),"
    " HookType.AROUND)\n"
    "HookRegistry.apply_hooks()\n" + ENTRY_LOAD
)


def test_a_target_another_plugin_patched_first_turns_the_plugin_off(tmp_path):
    """SGLang's HookRegistry patches a target once: a later plugin's hook on it is skipped without a word. Ours notice
    (the function does not go through our hook), say so in one line and refuse DDTREE; SGLang's own names work."""
    out, warnings = run_probe(fake_sglang(tmp_path, "0.5.11"), OTHER_PLUGIN_FIRST)
    assert out["hooked"][2] is False and out["stock"] == "'EAGLE'", out
    assert len(warnings) == 1 and "ServerArgs.__post_init__ did not take our hook" in warnings[0], warnings
    assert out["ddtree"] == "ValueError" and out["refusal"] == 2, out
