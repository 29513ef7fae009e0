"""patches/<release>/: the plugin as a patch series against the newest supported SGLang release (patches/generate.py).

Run with the release that has a series installed (0.5.23; with another the module skips): the series must equal a
fresh generation from the plugin's code, apply cleanly and in order to the release's source (the installed sglang
package, copied into the repository's `python/sglang` layout), compile, and give a patched SGLang where DDTREE and
DFLASH_CHAIN are built in: checked in a fresh interpreter whose path starts with the patched tree (and the
import-only sgl_kernel stand-in, tests/sgl_kernel_stub), with the installed plugin switched off
(SGLANG_DFLASH_DISABLE=1).
"""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import subprocess
import sys
import textwrap
from importlib.metadata import version

import pytest
from model_helpers import save_tiny_target, tiny_target_config
from paths import ROOT, STUB, TESTS
from sglang_probes import REPLAY_SLOTS

from sglang_dflash.init_draft import init_draft

pytestmark = pytest.mark.sglang  # also run against the second supported SGLang release (.ci/run)

pytest.importorskip("sglang", reason="SGLang is installed by tests/setup_env.sh")

PATCHES = ROOT / "patches"


def load_generator():
    spec = importlib.util.spec_from_file_location("sglang_dflash_patches_generate", PATCHES / "generate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


generate = load_generator()
RELEASE = version("sglang")
TARGET = generate.TARGETS.get(RELEASE)
if TARGET is None:
    pytest.skip(f"no patch series for the installed SGLang {RELEASE} (have {', '.join(generate.TARGETS)})",
                allow_module_level=True)  # fmt: skip
SERIES = PATCHES / RELEASE
REGENERATE = f"run `python patches/generate.py --release {RELEASE}` (with SGLang {RELEASE} installed)"


def run_fresh(code: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600,
                          cwd=TESTS, env={**os.environ, **(env or {})})  # fmt: skip


@pytest.fixture(scope="module")
def series():
    return (SERIES / "series").read_text().split()


def patched_files(series) -> list[tuple[str, bool]]:
    """(path, is a new file) of every file the series touches."""
    files = []
    for name in series:
        for section in (SERIES / name).read_text().split("\ndiff --git a/")[1:]:
            files.append((section.split(" b/", 1)[0], "\nnew file mode " in section.split("\n@@", 1)[0]))
    return files


@pytest.fixture(scope="module")
def patched(series, tmp_path_factory):
    """The installed release's pristine tree with the committed series applied in order (git apply --check, then
    apply); the same series also applies with `patch -p1`."""
    root = generate.make_upstream_tree(tmp_path_factory.mktemp("sglang"))
    plain = generate.make_upstream_tree(tmp_path_factory.mktemp("sglang_patch"))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    for name in series:
        for args in (["--check", "--whitespace=error"], []):
            out = subprocess.run(["git", "apply", *args, str(SERIES / name)], cwd=root, capture_output=True, text=True)
            assert out.returncode == 0, f"{name} does not apply{' (--check)' if args else ''}: {out.stderr}"
        patch = ["patch", "-p1", "--forward", "-s", "-i", str(SERIES / name)]
        out = subprocess.run(patch, cwd=plain, capture_output=True, text=True)
        assert out.returncode == 0, f"{name} does not apply with patch -p1: {out.stdout}{out.stderr}"
    for path, _ in patched_files(series):
        assert (root / path).read_bytes() == (plain / path).read_bytes(), f"git apply and patch -p1 differ on {path}"
    return root


def test_series_is_generated_from_the_plugin_code(series, tmp_path):
    names = generate.write(tmp_path, RELEASE)
    assert names == series, f"patches/{RELEASE}/series is stale: {REGENERATE}"
    committed = sorted(p.name for p in SERIES.glob("[0-9][0-9][0-9][0-9]-*.patch"))
    assert committed == sorted(names), f"patches/{RELEASE}/ holds other patches than the series: {REGENERATE}"
    for name in [*names, "series", "README.md"]:
        assert (tmp_path / name).read_bytes() == (SERIES / name).read_bytes(), f"patches/{RELEASE}/{name} is stale: {REGENERATE}"


def test_generator_refuses_an_unknown_source():
    with pytest.raises(generate.UnsupportedSource, match="found 0 times"):
        generate.edit("class SpeculativeAlgorithm:\n", "    NGRAM = auto()\n", "", "spec_info.py")
    edit = generate.Edit("spec_info.py", "SpeculativeAlgorithm.is_none", "    NGRAM = auto()\n", "")
    text = "class SpeculativeAlgorithm:\n    NGRAM = auto()\n\n    def is_none(self):\n        return False\n"
    with pytest.raises(generate.UnsupportedSource, match="outside SpeculativeAlgorithm.is_none"):
        generate.check_within(text, edit)


def test_series_applies_and_compiles(patched, series, tmp_path):
    for name in series:
        text = (SERIES / name).read_text()
        assert text.startswith("From ") and "\nSubject: [PATCH " in text, name
    changed = [path for path, _ in patched_files(series)]
    assert "python/sglang/srt/speculative/spec_info.py" in changed
    for path in changed:
        if path.endswith(".py"):
            py_compile.compile(str(patched / path), cfile=str(tmp_path / "check.pyc"), doraise=True)


def modules(paths) -> list[str]:
    return [p.removeprefix("python/").removesuffix(".py").replace("/", ".").removesuffix(".__init__") for p in paths]


def test_patched_modules_import(patched, series):
    """Every module the series adds or edits imports (its SGLang and core imports resolve), on the stand-in; without
    SGLANG_USE_CPU_ENGINE, whose GDN backend path asks the stand-in for an op it does not have."""
    names = modules(sorted({path for path, _ in patched_files(series) if path.endswith(".py") and path.startswith("python/")}))
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    print('IMPORTED', importlib.import_module(name).__file__)"
    env = {"PYTHONPATH": os.pathsep.join([str(STUB), str(patched / "python"), os.environ.get("PYTHONPATH", "")]),
           "SGLANG_DFLASH_DISABLE": "1"}  # fmt: skip
    out = run_fresh(code, *names, env=env)
    imported = [line.split(" ", 1)[1] for line in out.stdout.splitlines() if line.startswith("IMPORTED ")]
    assert len(imported) == len(names), out.stderr[-4000:]
    assert all(f.startswith(str(patched)) for f in imported), imported


# ServerArgs from the command line `--speculative-algorithm DDTREE` and from keyword arguments, on CPU; SGLang asserts
# a CUDA device for extra_buffer (the radix cache's strategy on hybrid targets): the probe says it has one.
PROBE = REPLAY_SLOTS + textwrap.dedent(
    """
    import argparse, importlib, json, sys
    import sglang
    import sglang.srt.server_args as s; s.is_cuda = lambda: True
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    # the input stays in the fields, resolution declared beside them; extra_buffer asks the platform
    from sglang.srt.arg_groups.model_override_base import resolved_view
    import sglang.srt.arg_groups.mamba_hook as m; m._platform_supports_mamba_cache_extra_buffer = lambda: True

    names_module, target, draft = sys.argv[1:]
    out = {"sglang": sglang.__file__}
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    out["choices"] = next(a.choices for a in parser._actions if "--speculative-algorithm" in a.option_strings)

    def resolved(make):
        a = make()
        algo = SpeculativeAlgorithm.from_string(a.speculative_algorithm)
        row = dict(algo=algo.name, is_eagle=algo.is_eagle(), spec_v2=getattr(algo, "supports_spec_v2", lambda: None)())
        try:
            a.resolve_once()  # resolution is a step of its own
        except Exception as e:
            return dict(row, error=f"{type(e).__name__}: {e}")
        v = resolved_view(a)
        row.update({k: getattr(v, k, None) for k in ("speculative_algorithm", "speculative_num_steps",
                    "speculative_eagle_topk", "speculative_num_draft_tokens", "disable_overlap_schedule",
                    "mamba_radix_cache_strategy")})
        worker = algo.create_worker(a)
        row["worker"] = f"{worker.__module__}.{worker.__name__}"
        return row

    cli = ["--model-path", target, "--speculative-draft-model-path", draft, "--device", "cpu", "--random-seed", "0",
           "--speculative-algorithm", "DDTREE", "--speculative-num-draft-tokens", "33"]
    out["ddtree"] = resolved(lambda: ServerArgs.from_cli_args(parser.parse_args(cli)))
    out["dflash"] = resolved(lambda: ServerArgs(model_path=target, speculative_draft_model_path=draft, device="cpu",
                                                random_seed=0, speculative_algorithm="DFLASH"))
    out["chain"] = resolved(lambda: ServerArgs(model_path=target, speculative_draft_model_path=draft, device="cpu",
                                               random_seed=0, speculative_algorithm="dflash_chain"))
    # the GDN graph-replay fix (sglang_probes.REPLAY_SLOTS)
    out.update({f"slots_{k}": v for k, v in replay_slots(importlib.import_module(names_module).NUM_REQS_ATTR).items()})
    out["code"] = [f.__code__.co_filename for f in (SpeculativeAlgorithm.from_string.__func__, ServerArgs.__post_init__)]
    print("RESULTS" + json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair")
    save_tiny_target(root / "target", tiny_target_config(layer_types=("linear_attention",) * 3 + ("full_attention",)))
    init_draft(root / "target", root / "draft", num_layers=2, block_size=16, taps=3)
    return root


def test_patched_sglang_resolves_ddtree_to_our_algorithm(patched, series, pair):
    new_modules = modules(path for path, new in patched_files(series) if new and path.endswith(".py"))
    worker, names = TARGET.module("worker_v2"), TARGET.module("names")
    assert worker in new_modules and names in new_modules
    assert f"sglang.srt.models.{TARGET.prefix}" not in new_modules  # SGLang's own DFlashDraftModel stays
    env = {
        "PYTHONPATH": os.pathsep.join([str(STUB), str(patched / "python"), os.environ.get("PYTHONPATH", "")]),
        "SGLANG_USE_CPU_ENGINE": "1",
        "SGLANG_DFLASH_DISABLE": "1",
    }
    out = run_fresh(PROBE, names, str(pair / "target"), str(pair / "draft"), env=env)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULTS")]
    assert lines, out.stdout[-2000:] + out.stderr[-4000:]
    res = json.loads(lines[0].removeprefix("RESULTS"))
    assert res["sglang"].startswith(str(patched)), res["sglang"]
    assert all(f.startswith(str(patched)) for f in res["code"]), f"the installed plugin wrapped SGLang: {res['code']}"
    assert res["choices"] is None  # a free-form option: any registered or built-in name
    ddtree = res["ddtree"]
    # spec v2: not EAGLE (and no supports_spec_v2 to ask), topk 2 x 16 steps
    assert (ddtree["algo"], ddtree["is_eagle"], ddtree["spec_v2"]) == ("DDTREE", False, None)
    steps = [ddtree[f"speculative_{k}"] for k in ("num_steps", "eagle_topk", "num_draft_tokens")]
    assert steps == [16, 2, 33], ddtree
    # the spec-v2 worker keeps SGLang's default scheduler (overlap)
    assert ddtree["disable_overlap_schedule"] is False and ddtree["mamba_radix_cache_strategy"] == "extra_buffer"
    assert ddtree["worker"] == f"{worker}.DDTreeWorkerV2"
    chain = res["chain"]
    assert chain["speculative_algorithm"] == chain["algo"] == "DFLASH_CHAIN" and chain["worker"] == f"{worker}.DDTreeWorkerV2"
    # DFLASH stays SGLang's own (which refuses a CPU device)
    assert res["dflash"]["algo"] == "DFLASH" and "DFLASH speculative decoding is not supported" in res["dflash"]["error"]
    assert res["slots_None"] == [12, -1, -1]  # unmarked verify inputs: SGLang's behaviour, unchanged
    assert res["slots_2"] == [12, 13, -1]  # marked: both real requests keep their state slots


REGISTRY = """
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
from sglang.srt.speculative.spec_registry import CustomSpecAlgo, _assert_custom_spec_algo_conforms, _reserved_names

_assert_custom_spec_algo_conforms(CustomSpecAlgo)  # SGLang's own guard: every enum predicate on the plugin class
SpeculativeAlgorithm.register("SOME_PLUGIN")(lambda server_args: object)  # what a plugin does: must still work
plugin = SpeculativeAlgorithm.from_string("some_plugin")
print("PREDICATES", plugin.is_ddtree(), plugin.is_dflash_chain(), SpeculativeAlgorithm.DDTREE.is_ddtree())
print("RESERVED", sorted({"DDTREE", "DFLASH_CHAIN"} & _reserved_names()))
"""


def test_ported_unit_tests_pass_on_the_patched_tree(patched, series):
    """The series' own tests (test/registered/unit/spec/<prefix>/, generate.PORTED_TESTS) pass on the patched tree,
    run as SGLang's CI would: pytest in their folder, the patched sglang first on the path (and the sgl_kernel
    stand-in), the installed plugin off."""
    folder = patched / "test" / "registered" / "unit" / "spec" / TARGET.prefix
    assert sorted(p.name for p in folder.iterdir() if p.suffix == ".py") == sorted(generate.PORTED_TESTS.values())
    env = {**os.environ, "SGLANG_DFLASH_DISABLE": "1",
           "PYTHONPATH": os.pathsep.join([str(STUB), str(patched / "python"), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", "."], cwd=folder,
                         capture_output=True, text=True, timeout=1200, env=env)  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and " failed" not in out.stdout and "skipped" not in out.stdout, out.stdout[-500:]


def test_patched_registry_still_takes_plugins(patched):
    """Upstream's registry contract on the patched tree (the one its spec-registry unit tests check): the plugin base
    class answers every predicate the enum has, so registering a plugin still works; our names are reserved."""
    env = {"PYTHONPATH": os.pathsep.join([str(STUB), str(patched / "python"), os.environ.get("PYTHONPATH", "")]),
           "SGLANG_DFLASH_DISABLE": "1"}  # fmt: skip
    out = run_fresh(REGISTRY, env=env)
    assert "PREDICATES False False True" in out.stdout, out.stderr[-3000:]
    assert "RESERVED ['DDTREE', 'DFLASH_CHAIN']" in out.stdout, out.stdout
