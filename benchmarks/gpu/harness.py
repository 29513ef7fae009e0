"""GPU harness: stock SGLang's offline Engine (0.5.11, or --sglang 0.5.23) beside transformers and the standalone
engine.

On the GPU machine (torch 2.11 / CUDA 13 / Triton 3.6 / transformers 5.17, no package index):

    python3 benchmarks/gpu/harness.py --site /tmp/site [--tp 1|2] [--pair random|shipped] [--out $OUT]

(device call: carry [".whl"]; fill .whl/ first with benchmarks/gpu/fetch_wheels.sh where PyPI is reachable).

What it does, in order:
1. Environment. `--site DIR`: installs the carried wheels (.whl/gpu/*.whl, the packages of
   benchmarks/gpu/wheels.txt and wheels-RELEASE.txt, and .whl/sglang-RELEASE-*.whl, from fetch_wheels.sh RELEASE)
   into DIR, the one-liner being
       python3 -m pip install -q --no-index --no-deps --no-compile --target DIR .whl/gpu/*.whl .whl/sglang-RELEASE-*.whl
   The SGLang processes get PYTHONPATH = DIR:<repo>. If `import sgl_kernel` fails there (it does on
   that machine: SGLang's compiled wheel is built for torch 2.9), the TEST-ONLY stand-in
   tests/sgl_kernel_stub (seven ops in torch, every other op raising NotImplementedError by name)
   goes first on that PYTHONPATH, and the harness says so; a working sgl_kernel is never shadowed.
2. Checkpoints (in --work): a tiny random Qwen3.5 hybrid target in the format SGLang
   registers (transformers' Qwen3_5ForConditionalGeneration: 2 x [3 Gated DeltaNet + 1 gated
   attention] text layers, a 1-layer vision tower with deepstack_visual_indexes=[], weights drawn
   for peaked logits and rounded to bf16 so that every run reads the same numbers), and a random
   DFlash drafter for it from `python -m sglang_dflash.init_draft`. Random drafts are accepted about
   1.03 tokens per pass, so deep accepts never happen.
   `--pair shipped`: the trained tiny pair of sglang_dflash/assets/tiny-pair instead. Its target
   (a text-only Qwen3_5ForCausalLM with tied embeddings) is rewritten into the same format (text
   weights under model.language_model., lm_head.weight a copy of the embedding, tie off, a random
   1-layer vision tower), and its drafter is used as shipped. --vocab / --hidden / --groups /
   --draft-layers / --block-size then do not apply.
3. Prompts: --num-prompts prompts of varied lengths (1 to a few hundred tokens; prompt 0 is one
   token), --max-new-tokens greedy tokens each, EOS ignored. Random tokens, or with `--pair
   shipped` windows of the running Python's stdlib sources (the pair's training text) from line
   starts, in the shipped tokenizer.
4. Runs, each at batch 1 (one prompt at a time) and batch 8 (8 prompts in flight):
   - transformers' own greedy `generate` in float32, batch 1: the reference;
   - the standalone engine (`sglang_dflash.engine.generate`, --engine-dtype, CUDA graphs on):
     ar, dflash, ddtree at each of --budgets;
   - SGLang's offline Engine, one subprocess per configuration (bf16, triton attention, CUDA graphs
     on, TP --tp): `stock` now; with --speculative-algorithm, DFLASH_CHAIN / DDTREE (per budget) through
     the plugin, and DFLASH: SGLang's own built-in DFLASH, with the same drafter. The SGLang subprocesses start
     first and overlap with the reference runs (--no-overlap to serialise). With more than one group of --tp GPUs
     (two H200s at TP=1), one queue of configurations runs on each group at the same time (--no-parallel: one
     queue).
5. A table (stdout, and $OUT/table.md): per prompt and run, `=` when the greedy tokens equal
   transformers', else `!=@k` with k the first differing position and the reference's top-1 minus
   top-2 logit margin there (a small margin: bf16 rounding picked the other side of a near tie; a
   large one: a bug). Then per run: prompts equal to transformers and to the engine's AR.
6. The verdict (`verdict.py`, fixed before any run): each run of ours (per batch size and turn) against stock SGLang's
   of the same batch size and turn, which returns its top-2 logprobs for that: equal tokens, or the first difference
   at a near tie of stock's own logits. A call without the stock run cannot pass. Float32 engine runs must equal
   transformers.

Logs: --out (default $OUT, else WORK/out): harness.log, table.md, results.json and one
<run>.log per SGLang configuration (sglang.log, sglang-dflash.log, ...). --deadline S stops waiting after S seconds from start
(SGLang subprocesses are killed, unfinished runs reported as such) so a device call ends in time.

Adding a SGLang configuration is one entry in `sglang_runs` (name, plugin on/off, Engine kwargs).
Plugin runs need the plugin to reach every SGLang process (its entry point): the harness checks that SGLang
resolves DDTREE to ours and otherwise installs this repo editable into the machine's Python (`pip install --no-deps
--no-index --no-build-isolation -e .`; the GPU machine is disposable); stock runs set SGLANG_DFLASH_DISABLE=1, so they
stay stock either way.

CPU check (no GPU): `python benchmarks/gpu/harness.py --device cpu --skip-sglang --num-prompts 3 [--pair shipped]`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STUB = REPO / "tests" / "sgl_kernel_stub"
SERVER_SITE = Path(__file__).resolve().parent / "server_site"  # its sitecustomize: counters, no sampling JIT
FLASHINFER_JIT_SOURCES = """
import importlib.util, pathlib
spec = importlib.util.find_spec("flashinfer")
roots = [pathlib.Path(p) / "data" for p in (spec.submodule_search_locations if spec else [])]
print(any((r / "include").is_dir() and (r / "csrc" / "sampling.cu").exists() for r in roots))
"""
WHEELS = REPO / ".whl"
RELEASES = ("0.5.11", "0.5.23")
LIN, FULL = "linear_attention", "full_attention"
BATCHES = (1, 8)
WARM_UP_TOKENS = 96  # the width controller's 6 default widths take ~60 tokens a request to time (`width_control`)

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from verdict import NEAR_TIE, Verdict, judge, top2_margins  # noqa: E402

# ---------------------------------------------------------------------------------------------- logging


class Log:
    def __init__(self, path: Path | None):
        self.file = open(path, "a") if path else None
        self.t0 = time.time()

    def __call__(self, *parts) -> None:
        line = " ".join(str(p) for p in parts)
        print(line, flush=True)
        if self.file:
            self.file.write(line + "\n")
            self.file.flush()

    def stamp(self, *parts) -> None:
        self(f"[{time.time() - self.t0:6.1f}s]", *parts)


# ------------------------------------------------------------------------------------------ environment


def install_wheels(site: Path, release: str, log: Log) -> tuple | None:
    """Start installing the carried wheels into `site`: (pip process, marker, names) for finish_install, or None
    when the same set is already there."""
    carried = (WHEELS / "release").read_text().strip() if (WHEELS / "release").is_file() else None
    if carried != release:
        raise SystemExit(f"the carried wheels are for SGLang {carried}, not {release} (benchmarks/gpu/fetch_wheels.sh {release})")
    wheels = sorted((WHEELS / "gpu").glob("*.whl")) + sorted(WHEELS.glob(f"sglang-{release}-*.whl"))
    if not any(w.name.startswith("sglang-") for w in wheels) or len(wheels) < 2:
        raise SystemExit(f"no carried wheels under {WHEELS} (run benchmarks/gpu/fetch_wheels.sh and carry .whl)")
    marker = site / ".harness-wheels"
    names = "\n".join(w.name for w in wheels)
    if marker.is_file() and marker.read_text() == names:
        log.stamp(f"wheels: already installed in {site}")
        return None
    if site.exists():  # another set (another release, or an install cut short): its metadata would stay beside ours
        log.stamp(f"wheels: {site} holds another set or an unfinished install: removing it first")
        shutil.rmtree(site)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir"]
    cmd += ["--upgrade", "--target", str(site), *map(str, wheels)]
    log.stamp(f"wheels: installing {len(wheels)} into {site}")
    return subprocess.Popen(cmd), marker, names


def finish_install(install: tuple | None, log: Log) -> None:
    if install is None:
        return
    proc, marker, names = install
    if proc.wait() != 0:
        raise SystemExit(f"wheels: pip install failed (exit {proc.returncode})")
    marker.write_text(names)
    log.stamp("wheels: installed")


def probe_python(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


def sglang_env(site: Path | None, dtype: str, log: Log) -> dict:
    """Environment of the SGLang subprocesses: PYTHONPATH = [stand-in sgl_kernel if needed] : server_site : site :
    repo; the GDN conv-state pool in the model's dtype (SGLang keeps it bf16 by default, and its conv kernel then mixes
    types); torch.compile's recompiles logged with their reasons (a first-use stall that is one shows in the server
    log)."""
    path = [str(SERVER_SITE)] + ([str(site)] if site else []) + [str(REPO)]
    path += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), PYTHONUNBUFFERED="1", SGLANG_MAMBA_CONV_DTYPE=dtype)
    env["SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK"] = "1"  # 0.5.23 checks the kernel wheels' versions (slimmed / stand-in)
    env.setdefault("TORCH_LOGS", "recompiles")  # each torch.compile recompile, with its reason, in the server log
    r = probe_python("import sgl_kernel", env)
    if r.returncode == 0:
        log.stamp("sgl_kernel: the installed one imports; the test-only stand-in stays off the path")
    else:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        env["PYTHONPATH"] = os.pathsep.join([str(STUB)] + path)
        log.stamp(f"sgl_kernel: `import sgl_kernel` fails ({last[:200]}); using the TEST-ONLY stand-in {STUB.relative_to(REPO)}")
    if probe_python(FLASHINFER_JIT_SOURCES, env).stdout.strip() == "False":
        env["HARNESS_NO_SAMPLING_JIT"] = "1"
        log.stamp(
            "flashinfer: its JIT headers and sampling sources are not carried (slimmed wheel), so SGLang's DFLASH "
            "runs without its sampling-verify kernel, as on platforms that lack it (server_site/sitecustomize.py)"
        )
    pinned, installed = (["-", "-"] + probe_python(TORCH_PIN, env).stdout.split())[-2:]
    if pinned not in ("-", installed):
        env["SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND"] = "python"
        log.stamp(
            f"radix cache: SGLang pins torch {pinned}, this machine has {installed}; its Rust TreeCore (built for "
            f"{pinned}) panics on insert, so SGLang's own Python TreeCore serves (SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND)"
        )
    return env


# The pinned torch of a release with a Rust radix TreeCore ("-" for releases without one) and the installed torch.
TORCH_PIN = """
import importlib.metadata as m, importlib.util as u, re, torch
pins = [r.split("==")[1].split(";")[0].strip() for r in m.requires("sglang") or [] if re.match(r"torch\\s*==", r)]
try:
    rust = u.find_spec("sglang.srt.mem_cache.unified_cache.tree_core_registry") is not None
except ModuleNotFoundError:
    rust = False
print(pins[0] if pins and rust else "-", torch.__version__.split("+")[0])
"""


# What SGLang's processes (and `python -m sglang.launch_server`) do first.
LOAD_PLUGINS = """
from sglang.srt.plugins import load_plugins
load_plugins()
"""
PLUGIN_CHECK = (
    LOAD_PLUGINS
    + """
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
print('sglang-dflash' in repr(SpeculativeAlgorithm.from_string('DDTREE')))
"""
)


_PLUGIN_ACTIVE: set[str] = set()  # the PYTHONPATHs the plugin was found active under (a check costs an SGLang import)


def ensure_plugin(env: dict, log: Log) -> None:
    """The plugin reaches SGLang (as `pip install sglang-dflash` leaves it: its entry point), else install it."""
    env = {k: v for k, v in env.items() if k != "SGLANG_DFLASH_DISABLE"}
    key = env.get("PYTHONPATH", "")
    if key in _PLUGIN_ACTIVE:
        return
    check = lambda: probe_python(PLUGIN_CHECK, env).stdout.strip().endswith("True")  # noqa: E731
    if check():
        _PLUGIN_ACTIVE.add(key)
        log.stamp("plugin: active")
        return
    log.stamp("plugin: not active; pip install --no-deps --no-index --no-build-isolation -e", REPO)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-build-isolation", "-e", str(REPO)],
        check=True,
        env=env,
    )
    if not check():
        raise RuntimeError("the plugin is still not active after the editable install")
    _PLUGIN_ACTIVE.add(key)


# ----------------------------------------------------------------------------------------- checkpoints


def target_configs(vocab: int, hidden: int, groups: int) -> tuple[dict, dict]:
    text = dict(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=4 * groups,
        layer_types=[LIN, LIN, LIN, FULL] * groups,
        full_attention_interval=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=64,
        linear_value_head_dim=64,
        linear_conv_kernel_dim=4,
        eos_token_id=None,
        pad_token_id=None,
    )
    return text, vision_config(hidden)


def vision_config(hidden: int) -> dict:
    """The smallest vision tower SGLang's Qwen3_5ForConditionalGeneration builds (1 layer, no deepstack)."""
    return dict(
        depth=1,
        hidden_size=64,
        intermediate_size=128,
        num_heads=2,
        out_hidden_size=hidden,
        patch_size=16,
        temporal_patch_size=2,
        spatial_merge_size=2,
        in_channels=3,
        deepstack_visual_indexes=[],
    )


def randomize_text_(model, seed: int) -> None:
    """Text weights with O(1) activations and peaked logits (transformers' 0.02 init gives near-ties everywhere)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        if "visual" in name:
            continue
        rnd = torch.randn(p.shape, generator=gen)
        if name.endswith("A_log"):
            p.data.copy_(torch.log(torch.rand(p.shape, generator=gen) * 15 + 1))
        elif name.endswith("dt_bias"):
            p.data.copy_(rnd * 0.5)
        elif "linear_attn.norm" in name:
            p.data.copy_(1 + 0.2 * rnd)
        elif "norm" in name:
            p.data.copy_(0.2 * rnd)
        elif "embed" in name:
            p.data.copy_(rnd)
        elif "conv1d" in name:
            p.data.copy_(rnd * 0.5)
        else:
            p.data.copy_(rnd * 1.5 / math.sqrt(p.shape[-1]))


def repo_env() -> dict:
    """This process's environment with the repository first on PYTHONPATH (for `python -m sglang_dflash...`)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))


def convert_shipped_target(out: Path, seed: int) -> None:
    """The shipped tiny target (Qwen3_5ForCausalLM, tied embeddings, keys model.*) saved to `out` as the
    Qwen3_5ForConditionalGeneration the random target is: keys model.language_model.*, lm_head.weight = the
    embedding, tie_word_embeddings false at both levels, eos none, a random vision tower (seeded), bf16 (exact copies),
    and the pair's tokenizer files. The harness sends token ids; a server that tokenizes text may not split it as the
    shipped pair does: transformers 5.19 loads model type qwen3_5 as its Qwen3_5Tokenizer, whose own pre-tokenizer
    replaces the file's (ours and stock's servers alike, so the verdict compares like with like)."""
    import torch
    from safetensors.torch import load_file
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    from sglang_dflash.engine.load import tiny_pair

    src = tiny_pair()[0]
    text = json.loads((src / "config.json").read_text())
    text = {k: v for k, v in text.items() if k not in ("architectures", "dtype", "transformers_version")}
    text.update(tie_word_embeddings=False, eos_token_id=None, full_attention_interval=4)  # SGLang reads the interval
    if text["layer_types"] != [LIN, LIN, LIN, FULL] * (len(text["layer_types"]) // 4):
        raise ValueError(f"shipped target: SGLang derives layer types from full_attention_interval, not {text['layer_types']}")
    cfg = Qwen3_5Config(text_config=text, vision_config=vision_config(text["hidden_size"]), tie_word_embeddings=False)
    cfg.eos_token_id = None
    torch.manual_seed(seed)
    model = Qwen3_5ForConditionalGeneration(cfg).eval()
    weights = {f"model.language_model.{k.removeprefix('model.')}": w for k, w in load_file(src / "model.safetensors").items()}
    weights["lm_head.weight"] = weights["model.language_model.embed_tokens.weight"]
    missing, unexpected = model.load_state_dict(weights, strict=False)
    assert not unexpected and all(k.startswith("model.visual.") for k in missing), (missing, unexpected)
    model = model.to(torch.bfloat16)
    model.generation_config.eos_token_id = None
    model.save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json"):  # for servers that tokenize (live_server.py)
        shutil.copyfile(src / name, out / name)


def build_checkpoints(work: Path, args, log: Log) -> tuple[Path, Path]:
    import torch
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    target, draft = work / "target", work / "draft"
    if args.pair == "shipped":
        from sglang_dflash.engine.load import tiny_pair
        from sglang_dflash.models import DraftConfig, TargetConfig, check_pair, read_config

        convert_shipped_target(target, args.seed)
        draft = tiny_pair()[1]
        check_pair(TargetConfig.from_dict(read_config(target)), DraftConfig.from_dict(read_config(draft)))
        log.stamp(f"checkpoints: shipped tiny target converted to {target} (bf16); shipped drafter {draft}")
        return target, draft
    text, vision = target_configs(args.vocab, args.hidden, args.groups)
    cfg = Qwen3_5Config(text_config=text, vision_config=vision, tie_word_embeddings=False)
    cfg.eos_token_id = None
    torch.manual_seed(args.seed)
    model = Qwen3_5ForConditionalGeneration(cfg).float().eval()
    randomize_text_(model, args.seed)
    model = model.to(torch.bfloat16)  # every run reads these bf16 numbers (the references upcast them exactly)
    model.generation_config.eos_token_id = None
    model.save_pretrained(target)
    del model
    cmd = [sys.executable, "-m", "sglang_dflash.init_draft", "--target", str(target), "--out", str(draft)]
    cmd += ["--layers", str(args.draft_layers), "--block-size", str(args.block_size), "--seed", str(args.seed + 1)]
    cmd += ["--format", args.draft_format]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=repo_env())
    log.stamp(f"checkpoints: target {target} ({4 * args.groups} layers, hidden {args.hidden}, vocab {args.vocab}, bf16);",
              out.stdout.strip())  # fmt: skip
    return target, draft


def prompt_lengths(n: int) -> list[int]:
    """n varied lengths: short, around the 64-token chunk size, and a few hundred tokens; the first is 1."""
    lengths = [1, 3, 9, 17, 33, 64, 95, 130, 200, 300]
    return [lengths[i % len(lengths)] + (i // len(lengths)) * 7 for i in range(n)]


def make_prompts(n: int, vocab: int, seed: int) -> list[list[int]]:
    """n prompts of random tokens < vocab - 1, at prompt_lengths(n)."""
    import random

    rng = random.Random(seed)
    return [[rng.randrange(vocab - 1) for _ in range(length)] for length in prompt_lengths(n)]


def shipped_tokenizer():
    """The shipped tiny pair's tokenizer (`tokenizers.Tokenizer`)."""
    from tokenizers import Tokenizer

    from sglang_dflash.engine.load import tiny_pair

    return Tokenizer.from_file(str(tiny_pair()[0] / "tokenizer.json"))


def text_prompts(n: int, seed: int) -> list[list[int]]:
    """n prompts at prompt_lengths(n), each a window of a top-level stdlib module of the running Python (the text the
    shipped pair was trained on) that starts at a line start, in the shipped tokenizer."""
    import inspect
    import random

    tokenizer = shipped_tokenizer()
    files = sorted(Path(inspect.getfile(inspect)).parent.glob("*.py"))
    rng = random.Random(seed)
    prompts = []
    for length in prompt_lengths(n):
        ids = []
        while len(ids) < length:  # else another file or line
            lines = rng.choice(files).read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
            start = rng.randrange(len(lines) or 1)
            ids = tokenizer.encode("".join(lines[start : start + length]), add_special_tokens=False).ids
        prompts.append(ids[:length])
    return prompts


def shared_prefix(prompts: list[list[int]]) -> list[list[int]]:
    """The prompts for a prefix-cache run: the first (the one-token prompt) as it is, the second the longest prompt,
    every later one that whole prompt followed by its own. SGLang's hybrid (GDN) prefix cache can only match up to
    where it holds a GDN state, such as the end of a cached prompt, so later requests reuse the second one whole."""
    base = max(prompts, key=len)
    return [prompts[0], base] + [base + p for p in prompts[2:]]


TRACK_INTERVAL = 32  # --radix-cache: extra_buffer's tracking interval, so that most decodes cross a tracking point


def track_interval(nodes: int) -> int:
    """The smallest multiple of TRACK_INTERVAL that SGLang accepts for a verify of `nodes` tokens."""
    return TRACK_INTERVAL * -(-nodes // TRACK_INTERVAL)


SECOND_TURN = "-turn2"  # --radix-cache: the suffix of a configuration's second-turn results
STOCK, BUILTIN = "sglang", "sglang-builtin-dflash"  # the stock run's name (ours: STOCK-...), SGLang's own DFLASH's


def turns(args) -> list[str]:
    """Result-name suffixes of each SGLang configuration: its run and, with --radix-cache, its second turn."""
    return ["", SECOND_TURN] if args.radix_cache else [""]


def chunks(items: list, size: int) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


# -------------------------------------------------------------------------------------------------- runs


@dataclass
class Run:
    name: str  # table column (without the batch)
    batch: int
    outputs: list[list[int]] | None = None  # per prompt
    error: str | None = None
    wall_s: float | None = None
    extra: dict = field(default_factory=dict)  # e.g. accept lengths, SGLang meta_info

    @property
    def key(self) -> str:
        return f"{self.name} b{self.batch}"


@dataclass
class SGLangRun:
    """One SGLang Engine configuration, run in its own subprocess at every batch size."""

    name: str
    plugin: bool  # False: SGLANG_DFLASH_DISABLE=1 (stock SGLang even where the plugin is installed)
    engine_kwargs: dict
    env: dict = field(default_factory=dict)  # extra environment of its subprocess

    def environ(self, base: dict, log: Log) -> dict:
        """Its subprocess's environment: base and its own, with the plugin active (installed if needed) or off."""
        env = dict(base, **self.env)
        if self.plugin:
            ensure_plugin(env, log)
        else:
            env["SGLANG_DFLASH_DISABLE"] = "1"
        return env


RENAMED_0_5_23 = {
    "cuda_graph_max_bs": "cuda_graph_max_bs_decode",
    "cuda_graph_bs": "cuda_graph_bs_decode",
    "disable_piecewise_cuda_graph": "disable_prefill_cuda_graph",
    "mamba_scheduler_strategy": "mamba_radix_cache_strategy",
}


def spelled(args, kwargs: dict) -> dict:
    """Engine arguments in the release's spelling (written in 0.5.11's)."""
    if args.sglang == "0.5.23":
        return {RENAMED_0_5_23.get(k, k): v for k, v in kwargs.items()}
    return kwargs


def sglang_base_kwargs(args, target: Path) -> dict:
    """Engine arguments stock SGLang runs with on the GPU machine (with the sgl_kernel stand-in), in the release's
    spelling."""
    return spelled(args, _base_kwargs(args, target))


def _base_kwargs(args, target: Path) -> dict:
    return dict(
        model_path=str(target),
        tp_size=args.tp,
        dtype=args.sglang_dtype,  # the conv-state pool follows (SGLANG_MAMBA_CONV_DTYPE in sglang_env)
        attention_backend=args.attention_backend,
        sampling_backend="pytorch",
        disable_cuda_graph=args.no_cuda_graph,
        cuda_graph_max_bs=max(args.batches),
        disable_piecewise_cuda_graph=True,  # piecewise graphs need weak_ref_tensor, not in the stand-in
        mem_fraction_static=args.mem_fraction,
        max_running_requests=max(args.batches),
        context_length=1024,
        skip_tokenizer_init=True,
        enable_multimodal=False,
        disable_radix_cache=not args.radix_cache,
        disable_custom_all_reduce=True,
        enforce_disable_flashinfer_allreduce_fusion=True,  # else TP=2 JIT-builds FlashInfer's fusion workspace (minutes)
        random_seed=args.seed,
        log_level="info",
    )


def sglang_runs(args, target: Path, draft: Path) -> list[SGLangRun]:
    """The SGLang configurations: stock, then one per speculative algorithm (and DDTREE budget)."""
    base = sglang_base_kwargs(args, target)
    stock = base
    if args.radix_cache:  # ours take extra_buffer (server_args.resolve_radix_cache); SGLang's auto gives stock no_buffer
        stock = dict(base, **spelled(args, dict(mamba_scheduler_strategy="extra_buffer")), mamba_track_interval=TRACK_INTERVAL)
    runs = [SGLangRun(STOCK, plugin=False, engine_kwargs=stock)]
    env = dict(item.split("=", 1) for item in args.plugin_env)

    def spec(algo: str, nodes: int | None) -> dict:  # nodes None: a chain's default, the drafter's block
        kw = dict(base, speculative_algorithm=algo, speculative_draft_model_path=str(draft), speculative_num_draft_tokens=nodes)
        if args.radix_cache:
            kw["mamba_track_interval"] = track_interval(nodes or json.loads((draft / "config.json").read_text())["block_size"])
        return kw

    for algo in args.speculative_algorithm:
        if algo == "DFLASH_CHAIN":
            runs.append(SGLangRun("sglang-dflash-chain", plugin=True, engine_kwargs=spec(algo, None), env=env))
        elif algo == "DFLASH":  # SGLang's own (0.5.11); the plugin stays installed, as a user would have it
            runs.append(SGLangRun(BUILTIN, plugin=True, engine_kwargs=spec(algo, None), env={}))
        else:  # DDTREE: the root and `budget` nodes
            runs += [SGLangRun(f"sglang-ddtree{b}", True, spec(algo, b + 1), env) for b in args.budgets]
    if args.also_without_graphs:  # to tell a graph-replay problem from a logic one
        runs += [
            SGLangRun(f"{r.name}-nograph", r.plugin, dict(r.engine_kwargs, disable_cuda_graph=True), r.env)
            for r in runs
            if r.plugin
        ]
    if args.also_no_overlap:  # ours under SGLang's non-overlap scheduler, synchronously (0.5.23)
        runs += [SGLangRun(f"{r.name}-nooverlap", r.plugin, dict(r.engine_kwargs, disable_overlap_schedule=True), r.env)
                 for r in runs if r.plugin and r.name != BUILTIN]  # fmt: skip
    if args.also_backend_attention:  # the full-attention layers' verify through SGLang's backend, not the tree attention
        runs += [
            SGLangRun(f"{r.name}-backendattn", r.plugin, r.engine_kwargs, dict(r.env, SGLANG_DFLASH_TREE_ATTENTION="0"))
            for r in runs
            if r.plugin
        ]
    if args.also_widths:  # the verify width chosen per step by cost
        runs += [SGLangRun(f"{r.name}-widths", r.plugin, r.engine_kwargs, dict(r.env, SGLANG_DFLASH_WIDTHS=args.also_widths))
                 for r in runs if r.plugin and r.name != BUILTIN]  # fmt: skip
    return select_runs(runs, args.runs)


def select_runs(runs: list, names: list[str] | None) -> list:
    """The runs named (--runs), in that order; all of them without names."""
    if not names:
        return runs
    return sorted((r for r in runs if r.name in names), key=lambda r: names.index(r.name))


def sglang_worker(spec_file: str) -> int:
    """Subprocess body: one SGLang Engine, the prompts at each batch size, results written after each."""
    spec = json.loads(Path(spec_file).read_text())
    import sgl_kernel
    import sglang
    from sglang.srt.entrypoints.engine import Engine

    stand_in = " (the TEST-ONLY stand-in)" if getattr(sgl_kernel, "STAND_IN", False) else ""
    print(f"harness: sglang {sglang.__version__} from {sglang.__file__}; sgl_kernel{stand_in} {sgl_kernel.__file__}", flush=True)

    results: dict = {"batches": {}}
    out = Path(spec["result"])
    t0 = time.time()
    engine = Engine(**spec["engine_kwargs"])
    results["startup_s"] = time.time() - t0
    print(f"harness: engine up in {results['startup_s']:.1f} s", flush=True)
    params = {"max_new_tokens": spec["max_new_tokens"], "temperature": 0.0, "ignore_eos": True}
    try:
        # warm-up at each batch size outside the timed batches: Triton JIT and autotuning of every shape, and the width
        # controller's cost table (a server's first steps at each batch size time each width, two steps a width); then
        # each prompt alone, a prefill and a step: the prefill kernels' first use at each length compiled them inside
        # the first engine's timed batches (about 0.6 s), and later engines read them from Triton's disk cache
        t = time.time()
        for batch in spec["batches"]:
            engine.generate(input_ids=[spec["prompts"][-1]] * batch, sampling_params=dict(params, max_new_tokens=WARM_UP_TOKENS))
        for prompt in spec["prompts"]:
            engine.generate(input_ids=[prompt], sampling_params=dict(params, max_new_tokens=2))
        results["warmup_s"] = time.time() - t

        # stock: each output position's top-1 - top-2 logit (the verdict's near ties), from SGLang's top-2 logprobs
        logprobs = dict(return_logprob=True, top_logprobs_num=2) if spec.get("margins") else {}

        def greedy(key: str, inputs: list[list[int]], batch: int, **extra) -> None:
            """The inputs `batch` at a time into results["batches"][key], written out after each."""
            t = time.time()
            outputs, metas, margins = [], [], []
            for group in chunks(inputs, batch):
                res = engine.generate(input_ids=group, sampling_params=params, **logprobs)
                res = [res] if isinstance(res, dict) else res
                outputs += [r["output_ids"] for r in res]
                metas += [r.get("meta_info", {}) for r in res]
            for meta in metas if logprobs else ():
                margins.append(top2_margins(meta["output_top_logprobs"]))
                for k in [k for k in meta if "logprobs" in k]:
                    del meta[k]
            if logprobs:
                extra["margins"] = margins
            results["batches"][key] = dict(outputs=outputs, meta=metas, wall_s=time.time() - t, **extra)
            out.write_text(json.dumps(results))
            print(f"harness: {key} at batch {batch} done in {time.time() - t:.1f} s", flush=True)

        for batch in spec["batches"]:
            greedy(str(batch), spec["prompts"], batch)
        for batch in spec["batches"] if spec.get("second_turn") else ():  # each prompt + its output, continued
            turn = [p + o for p, o in zip(spec["prompts"], results["batches"][str(batch)]["outputs"])]
            greedy(f"{batch}{SECOND_TURN}", turn, batch, prompts=turn)
        if spec.get("sampled"):  # all prompts in flight, sampled: it must finish (every TP rank takes rank 0's decisions)
            t = time.time()
            sampled = dict(params, temperature=0.8, top_p=0.9, top_k=50)
            res = engine.generate(input_ids=spec["prompts"], sampling_params=sampled)
            results["sampled"] = dict(
                tokens=sum(len(r["output_ids"]) for r in res), meta=[r.get("meta_info", {}) for r in res], wall_s=time.time() - t
            )
            out.write_text(json.dumps(results))
            print(f"harness: sampled batch done in {time.time() - t:.1f} s", flush=True)
    finally:
        engine.shutdown()
    return 0


class SGLangQueue(threading.Thread):
    """Runs the SGLang configurations one after another, each in a subprocess (own process group)."""

    def __init__(self, runs, env, prompts, args, work: Path, out: Path, log: Log):
        super().__init__(daemon=True)
        self.runs, self.env, self.prompts, self.args, self.work, self.out, self.log = runs, env, prompts, args, work, out, log
        self.results: dict[str, Run] = {}
        self.proc: subprocess.Popen | None = None
        self.stopped = False

    def run(self) -> None:
        for cfg in self.runs:
            if self.stopped:
                break
            self.one(cfg)

    def one(self, cfg: SGLangRun) -> None:
        args = self.args
        result = self.work / f"{cfg.name}.json"
        result.unlink(missing_ok=True)
        spec = dict(engine_kwargs=cfg.engine_kwargs, prompts=self.prompts, max_new_tokens=args.max_new_tokens)
        spec.update(batches=list(args.batches), result=str(result), sampled=args.sampled, second_turn=args.radix_cache)
        spec.update(margins=not cfg.plugin)
        spec_file = self.work / f"{cfg.name}.spec.json"
        spec_file.write_text(json.dumps(spec))
        try:
            env = cfg.environ(self.env, self.log)
        except Exception as e:  # reported in the table
            self.fail(cfg, f"plugin: {e!r}")
            return
        logfile = self.out / f"{cfg.name}.log"
        self.log.stamp(
            f"{cfg.name}: starting SGLang Engine (TP={args.tp}, plugin {'on' if cfg.plugin else 'off'}), log {logfile}"
        )
        t0 = time.time()
        with open(logfile, "w") as f:
            self.proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--_sglang-worker", str(spec_file)],
                env=env,
                stdout=f,
                stderr=subprocess.STDOUT,
                cwd=str(self.work),
                start_new_session=True,
            )
            rc = self.proc.wait()
        data = json.loads(result.read_text()) if result.is_file() else {"batches": {}}
        tail = logfile.read_text().strip().splitlines()[-1:] if logfile.is_file() else []
        for turn, batch in itertools.product(turns(args), args.batches):
            got = data["batches"].get(f"{batch}{turn}")
            run = Run(cfg.name + turn, batch)
            if got:
                run.outputs, run.wall_s = got["outputs"], got["wall_s"]
                run.extra = dict(startup_s=data.get("startup_s"), meta=got["meta"], sampled=data.get("sampled"))
                if "prompts" in got:  # the second turn's own prompts
                    run.extra["prompts"] = got["prompts"]
                if "margins" in got:
                    run.extra["margins"] = got["margins"]
                verify = sum(m.get("spec_verify_ct") or 0 for m in got["meta"])
                tokens = sum(m.get("completion_tokens") or 0 for m in got["meta"])
                run.extra["passes"] = verify or tokens  # target forward passes (stock: one per token)
                if verify:  # speculative runs: tokens per target pass, as bench_serving reads them
                    run.extra["tokens_per_pass"] = tokens / verify
            else:
                why = "stopped at the deadline" if self.stopped else f"exit {rc}"
                run.error = f"{why}: {tail[0][:300] if tail else 'no output'} (see {logfile.name})"
            self.results[run.key] = run
        self.log.stamp(f"{cfg.name}: exit {rc} after {time.time() - t0:.1f} s")

    def fail(self, cfg: SGLangRun, msg: str) -> None:
        self.log.stamp(f"{cfg.name}: {msg}")
        for name in (cfg.name + turn for turn in turns(self.args)):
            for batch in self.args.batches:
                self.results[f"{name} b{batch}"] = Run(name, batch, error=msg)

    def stop(self) -> None:
        self.stopped = True
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the worker and the scheduler processes it spawned
            except ProcessLookupError:
                pass


def hf_reference(target: Path, prompts, args, device: str, log: Log) -> tuple[Run, list[list[float]]]:
    """transformers' greedy generate (float32, one prompt at a time) and the top-1 - top-2 logit margins along it."""
    import torch
    from transformers import Qwen3_5ForConditionalGeneration

    t0 = time.time()
    model = Qwen3_5ForConditionalGeneration.from_pretrained(str(target), dtype=torch.float32).to(device).eval()
    model.generation_config.eos_token_id = None
    outputs, margins = [], []
    with torch.no_grad():
        for p in prompts:
            ids = torch.tensor([p], device=device)
            gen = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=args.max_new_tokens,
                min_new_tokens=args.max_new_tokens,
                do_sample=False,
            )
            new = gen[0, len(p) :].tolist()
            logits = model(input_ids=gen[:, :-1]).logits[0, len(p) - 1 :].float()
            top = logits.topk(2, dim=-1).values
            assert logits.argmax(-1).tolist() == new, "transformers: generate and a full forward disagree"
            outputs.append(new)
            margins.append((top[:, 0] - top[:, 1]).tolist())
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    run = Run("transformers fp32", 1, outputs=outputs, wall_s=time.time() - t0)
    log.stamp(f"transformers: {len(prompts)} prompts in {run.wall_s:.1f} s")
    return run, margins


def teacher_forced_gaps(target: Path, prompts, runs: list[Run], device: str, log: Log) -> None:
    """For every run's outputs, transformers' float32 logits along prompt + output (teacher-forced: each position sees
    the run's own prefix) and the gap max(logits) - logits[emitted token] at each new token, into run.extra["gaps"].
    A correct greedy run has gap 0 everywhere except where its own arithmetic (bf16 vs float32) turned a near tie; a
    wrong state, position or mask shows as large gaps. Unlike comparing free-running outputs, one flip does not
    make every later token differ."""
    import torch
    from transformers import Qwen3_5ForConditionalGeneration

    model = Qwen3_5ForConditionalGeneration.from_pretrained(str(target), dtype=torch.float32).to(device).eval()
    with torch.no_grad():
        for run in runs:
            if run.outputs is None:
                continue
            gaps = []
            for p, out in zip(run.extra.get("prompts") or prompts, run.outputs):
                if not out:
                    gaps.append([])
                    continue
                seq = torch.tensor([p + out[:-1]], device=device)
                logits = model(input_ids=seq).logits[0, len(p) - 1 :].float()
                emitted = torch.tensor(out, device=device)
                gaps.append((logits.max(-1).values - logits.gather(1, emitted[:, None])[:, 0]).tolist())
            run.extra["gaps"] = gaps
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    log.stamp(f"teacher-forced gaps for {sum(r.outputs is not None for r in runs)} runs")


def gap_summary(run: Run) -> tuple[int, int, float]:
    """(tokens that are not transformers' argmax, tokens, largest gap) of a run with gaps."""
    flat = [g for row in run.extra.get("gaps", []) for g in row]
    return sum(g > 0 for g in flat), len(flat), max(flat, default=0.0)


def engine_runs(target: Path, draft: Path, prompts, args, device: str, deadline: float, log: Log) -> list[Run]:
    import torch

    from sglang_dflash.engine import generate, load_pair

    dtype = getattr(torch, args.engine_dtype)
    tmodel, drafter = load_pair(target, draft, device=device, dtype=dtype)
    configs = [("ar", 0), ("dflash", 0)] + [("ddtree", b) for b in args.budgets]
    runs = []
    for algo, budget in configs:
        for batch in args.batches:
            name = f"engine {algo}{budget or ''}" + ("" if args.engine_dtype == "float32" else f" {args.engine_dtype}")
            run = Run(name, batch)
            runs.append(run)
            if time.time() > deadline:
                run.error = "skipped: deadline"
                continue
            t0 = time.time()
            try:
                outputs, passes = [], 0
                for group in chunks(prompts, batch):
                    res = generate(tmodel, group, args.max_new_tokens, algo, drafter, budget=budget or 64)
                    outputs += res.output_ids
                    passes += sum(map(len, res.accept_lens))
                run.outputs, run.wall_s = outputs, time.time() - t0
                # as for SGLang's runs: all output tokens (the prefill's first one included) / all verify passes
                run.extra = dict(tokens_per_pass=sum(map(len, outputs)) / max(passes, 1))
            except Exception as e:  # reported in the table
                run.error = repr(e)[:300]
            log.stamp(f"{run.key}: {'ok' if run.error is None else run.error} ({time.time() - t0:.1f} s)")
    return runs


# ------------------------------------------------------------------------------------------------ report


def first_diff(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def cell(run: Run, i: int, ref: Run, margins) -> str:
    if run.outputs is None:
        return "-"
    k = first_diff(run.outputs[i], ref.outputs[i])
    if k is None:
        return "="
    m = margins[i][k] if k < len(margins[i]) else float("nan")
    return f"!=@{k} ({m:.2g})"


def sglang_verdicts(runs: list[Run]) -> dict[str, Verdict]:
    """Each speculative SGLang run (per batch size and turn) judged against stock SGLang's run of the same batch size
    and turn (`verdict.judge`: equal tokens, or a first difference at a near tie of stock's own logits)."""
    stock = {(r.name.removeprefix(STOCK), r.batch): r for r in runs if r.name in (STOCK, STOCK + SECOND_TURN)}
    verdicts = {}
    for r in runs:
        if r.name.startswith(STOCK + "-") and r.name != STOCK + SECOND_TURN:
            peer = stock.get((SECOND_TURN if r.name.endswith(SECOND_TURN) else "", r.batch))
            verdicts[r.key] = judge(r.outputs, peer and peer.outputs, peer and peer.extra.get("margins"))
    return verdicts


def report(runs: list[Run], ref: Run, margins, prompts, args, log: Log, verdicts: dict[str, Verdict]) -> str:
    shown = [r for r in runs if r is not ref]
    common = [r for r in shown if "prompts" not in r.extra]  # a second turn has its own prompts: gaps only
    lines = [
        f"## Greedy tokens vs transformers (fp32), {len(prompts)} prompts x {args.max_new_tokens} new tokens, "
        f"SGLang TP={args.tp} {args.sglang_dtype}, CUDA graphs {'off' if args.no_cuda_graph else 'on'}",
        "",
        "`=`: equal to transformers; `!=@k (m)`: first difference at new token k, where transformers' "
        "top-1 minus top-2 logit margin is m; `-`: no result (see below).",
        "",
        "| # | prompt len | " + " | ".join(r.key for r in common) + " |",
        "|---|---|" + "---|" * len(common),
    ]
    for i, p in enumerate(prompts):
        lines.append(f"| {i} | {len(p)} | " + " | ".join(cell(r, i, ref, margins) for r in common) + " |")
    ar = next((r for r in runs if r.name == "engine ar" and r.batch == 1 and r.outputs), None)
    stock = next((r for r in runs if r.name == STOCK and r.batch == 1 and r.outputs), None)

    def equal(r: Run, other: Run | None) -> str:
        if other is None or "prompts" in r.extra:
            return "-"
        return f"{sum(a == b for a, b in zip(r.outputs, other.outputs))}/{len(prompts)}"

    lines += [
        "",
        "| run | equal to transformers | equal to engine ar b1 | equal to sglang b1 | wall s | notes |",
        "|---|---|---|---|---|---|",
    ]
    for r in shown:
        if r.outputs is None:
            lines.append(f"| {r.key} | - | - | - | - | {r.error} |")
            continue
        notes = []
        if "tokens_per_pass" in r.extra:
            notes.append(f"{r.extra['tokens_per_pass']:.2f} tokens/pass")
        cached = sum(m.get("cached_tokens") or 0 for m in r.extra.get("meta") or [])
        if cached:
            notes.append(f"{cached} prompt tokens from the prefix cache")
        sampled = r.extra.get("sampled")
        if sampled and r.batch == max(args.batches):
            notes.append(f"sampled batch (T 0.8, top-p 0.9, top-k 50): {sampled['tokens']} tokens in {sampled['wall_s']:.1f} s")
        if r.extra.get("startup_s") is not None:
            notes.append(f"engine start-up {r.extra['startup_s']:.0f} s")
        lines.append(f"| {r.key} | {equal(r, ref)} | {equal(r, ar)} | {equal(r, stock)} | {r.wall_s:.1f} | {', '.join(notes)} |")
    gapped = [r for r in shown if "gaps" in r.extra]
    if gapped:
        lines += [
            "",
            "Teacher-forced (transformers float32 along each run's own tokens): how many emitted tokens are not the argmax, "
            "and the largest gap max(logits) - logits[token]. Greedy runs of a correct server differ only at near ties.",
            "",
            "| run | tokens not the argmax | largest gap |",
            "|---|---|---|",
        ]
        for r in gapped:
            bad, n, worst = gap_summary(r)
            lines.append(f"| {r.key} | {bad}/{n} | {worst:.3g} |")
    if verdicts:
        lines += [
            "",
            f"Lossless verdict (`verdict.py`): tokens equal to stock SGLang's at the same batch size, or the first "
            f"difference at a near tie of stock's own logits (top-1 - top-2 < {NEAR_TIE}); SGLang's own DFLASH is judged "
            "alike but does not decide the harness's exit code.",
            "",
            "| run | verdict |",
            "|---|---|",
        ]
        lines += [f"| {key} | {'lossless' if v.ok else 'NOT lossless'}: {v.summary()} |" for key, v in verdicts.items()]
    ms = sorted(m for row in margins for m in row)
    if ms:
        lines += ["", f"transformers' top-1 - top-2 logit margins over all reference tokens: min {ms[0]:.3g}, "
                      f"median {ms[len(ms) // 2]:.3g}"]  # fmt: skip
    text = "\n".join(lines)
    log("\n" + text)
    return text


def gpu_groups(tp: int, gpus: int) -> list[str | None]:
    """CUDA_VISIBLE_DEVICES of each parallel queue: the machine's GPUs in groups of tp; [None] (no pinning) when
    they make one group at most."""
    if gpus < 2 * tp:
        return [None]
    return [",".join(str(g * tp + i) for i in range(tp)) for g in range(gpus // tp)]


class SGLangQueues:
    """SGLangQueue's interface over one queue per GPU group (`gpu_groups`), the runs dealt round-robin; queue i
    sees only its GPUs and takes SGLang ports 100 * i above the others'. Starts are staggered by `stagger` s."""

    def __init__(self, runs, env, prompts, args, work: Path, out: Path, log: Log, groups: list[str | None], stagger=5.0):
        self.runs, self.stagger = runs, stagger
        self.queues = []
        for i, group in enumerate(groups):
            mine = [replace(r, engine_kwargs=dict(r.engine_kwargs, port=30000 + 100 * i)) for r in runs[i :: len(groups)]]
            qenv = env if group is None else dict(env, CUDA_VISIBLE_DEVICES=group)
            if mine:
                self.queues.append(SGLangQueue(mine, qenv, prompts, args, work, out, log))
        if len(self.queues) > 1:
            log.stamp(f"SGLang runs in {len(self.queues)} parallel queues on GPUs {[g for g in groups]}")

    @property
    def results(self) -> dict[str, Run]:
        return {k: v for q in self.queues for k, v in q.results.items()}

    def start(self) -> None:
        for i, q in enumerate(self.queues):
            if i:
                time.sleep(self.stagger)  # SGLang picks free ports at start-up
            q.start()

    def join(self, timeout: float | None = None) -> None:
        end = None if timeout is None else time.time() + timeout
        for q in self.queues:
            q.join(None if end is None else max(0.0, end - time.time()))

    def is_alive(self) -> bool:
        return any(q.is_alive() for q in self.queues)

    def stop(self) -> None:
        for q in self.queues:
            q.stop()


# -------------------------------------------------------------------------------------------------- main


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="python3 benchmarks/gpu/harness.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--tp", type=int, choices=(1, 2), default=1, help="SGLang tensor parallelism (2 needs two GPUs)")
    p.add_argument("--site", type=Path, default=None, help="install the carried wheels here and run SGLang from it")
    p.add_argument("--sglang", choices=RELEASES, default=RELEASES[0], help="the SGLang release of the carried wheels")
    p.add_argument("--out", type=Path, default=None, help="logs and tables (default: $OUT, else WORK/out)")
    p.add_argument("--work", type=Path, default=Path("/tmp/sglang_dflash_harness"), help="checkpoints and scratch")
    p.add_argument("--num-prompts", type=int, default=8)
    p.add_argument(
        "--batches",
        type=lambda text: tuple(sorted({int(b) for b in text.split(",")})),
        default=BATCHES,
        help="requests in flight at once, comma-separated (default 1,8); the largest is the CUDA-graph and running-request cap",
    )
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--budgets", type=lambda s: [int(x) for x in s.split(",")], default=[16], help="DDTREE budgets (e.g. 16,64)")
    p.add_argument(
        "--speculative-algorithm",
        nargs="*",
        choices=("DFLASH_CHAIN", "DDTREE", "DFLASH"),
        default=[],
        help="also run SGLang with these: DFLASH_CHAIN / DDTREE through the plugin; DFLASH is SGLang's own (0.5.11)",
    )
    p.add_argument(
        "--sglang-dtype",
        choices=("bfloat16", "float16"),
        default="bfloat16",
        help="SGLang's dtype (its chunked GDN kernel refuses float32). Greedy tokens then differ from transformers' at "
        "near ties (stock SGLang bf16: margins up to 0.47 on the random tiny model), so our runs are judged against "
        "stock SGLang's at the same dtype (verdict.py); teacher-forced gaps against transformers are shown besides",
    )
    p.add_argument(
        "--attention-backend",
        choices=("triton", "flashinfer"),
        default="triton",
        help="SGLang's attention backend for every run: triton (the path the sgl_kernel stand-in is tested on), or flashinfer "
        "(what SGLang picks on Hopper for trees; its kernels are JIT-built with the machine's nvcc at start-up, from "
        "the flashinfer_python wheel in .whl/gpu)",
    )
    p.add_argument("--engine-dtype", choices=("float32", "bfloat16"), default="float32", help="standalone engine's dtype")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="for transformers and the standalone engine")
    p.add_argument("--skip-sglang", action="store_true", help="no SGLang runs (e.g. a CPU check of the rest)")
    p.add_argument("--skip-engine", action="store_true", help="no standalone-engine runs")
    p.add_argument("--no-overlap", action="store_true", help="start SGLang only after the reference runs")
    p.add_argument(
        "--runs",
        type=lambda s: s.split(","),
        default=None,
        help="only these SGLang runs, comma-separated, run in this order (e.g. sglang-dflash to debug it without the stock run)",
    )
    p.add_argument(
        "--also-no-overlap",
        action="store_true",
        help="each of our runs (and its -nograph variant) once more with --disable-overlap-schedule (-nooverlap): "
        "SGLang's non-overlap scheduler, the worker run synchronously (ours' other runs: SGLang's default, overlap); "
        "0.5.23 only: 0.5.11 runs ours under its overlap scheduler only",
    )
    p.add_argument(
        "--also-widths",
        default=None,
        metavar="TIERS",
        help="each of our runs (and its variants) once more with SGLANG_DFLASH_WIDTHS=TIERS (-widths): the verify width "
        "chosen per step by cost among TIERS (auto: 1, 2, 4, .. up to the run's)",
    )
    p.add_argument(
        "--also-backend-attention",
        action="store_true",
        help="each plugin run (and its -nograph variant) once more with SGLANG_DFLASH_TREE_ATTENTION=0: the "
        "full-attention layers verified by SGLang's attention backend instead of the plugin's tree attention (on by "
        "default on an H200 with these runs' triton backend)",
    )
    p.add_argument(
        "--sampled",
        action="store_true",
        help="after the greedy batches, every prompt at once with temperature 0.8 / top-p 0.9 / top-k 50: it must finish",
    )
    p.add_argument(
        "--radix-cache",
        action="store_true",
        help="SGLang's radix cache on (else off in every run; every run, stock too: extra_buffer tracking every "
        f"{TRACK_INTERVAL} tokens); every prompt after the second starts with the second whole, so that later requests "
        "hit the prefix cache, and a second turn (RUN-turn2) continues each prompt + its first output, so that it hits "
        "the states the workers tracked while decoding (the table counts the prompt tokens served from the cache)",
    )
    p.add_argument(
        "--plugin-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="environment of every plugin run (repeatable), e.g. SGLANG_DFLASH_DRAFT_TP=0 to replicate the drafter at TP > 1",
    )
    p.add_argument(
        "--parallel",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run SGLang configurations side by side, one per group of --tp GPUs (e.g. two at TP=1 on two GPUs)",
    )
    p.add_argument("--also-without-graphs", action="store_true", help="each plugin run once more without CUDA graphs")
    p.add_argument("--no-cuda-graph", action="store_true", help="SGLang without CUDA graphs")
    p.add_argument("--mem-fraction", type=float, default=0.3, help="SGLang's mem_fraction_static")
    p.add_argument("--deadline", type=float, default=0, help="seconds from start after which the harness stops waiting")
    p.add_argument(
        "--pair",
        choices=("random", "shipped"),
        default="random",
        help="random: a random target and drafter (sized by --vocab .. --block-size); shipped: the trained tiny pair of "
        "sglang_dflash/assets/tiny-pair on stdlib-source prompts (--vocab .. --block-size do not apply)",
    )
    p.add_argument("--vocab", type=int, default=512, help="random pair only")
    p.add_argument("--hidden", type=int, default=256, help="random pair only")
    p.add_argument(
        "--groups", type=int, default=2, help="random pair only: target layers = 4 x groups (3 GDN + 1 attention each)"
    )
    p.add_argument("--draft-layers", type=int, default=2, help="random pair only")
    p.add_argument("--block-size", type=int, default=16, help="random pair only")
    p.add_argument(
        "--draft-format",
        choices=("dflash", "dflash2", "dspark"),
        default="dflash",
        help="random pair only: the drafter's format (init_draft --format, its default heads); at TP=1 the workers "
        "draft with DFlash2's selector or DSpark's Markov head",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--_sglang-worker", dest="sglang_worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.pair == "shipped" and args.draft_format != "dflash":
        p.error("--draft-format: the shipped pair's drafter is DFlash-format (use --pair random)")
    if args.also_no_overlap and args.sglang == "0.5.11":
        p.error("--also-no-overlap: SGLang 0.5.11 runs ours under its overlap scheduler only")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.sglang_worker:
        return sglang_worker(args.sglang_worker)
    out = args.out or Path(os.environ.get("OUT") or args.work / "out")
    out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    log = Log(out / "harness.log")
    deadline = log.t0 + args.deadline if args.deadline > 0 else float("inf")
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before sglang_dflash's kernels are decorated
    log.stamp("harness:", " ".join(sys.argv[1:]) or "(defaults)")
    import torch
    import transformers

    log.stamp(f"torch {torch.__version__}, CUDA {torch.cuda.is_available()} ({torch.cuda.device_count()} GPUs), "
              f"transformers {transformers.__version__}")  # fmt: skip
    queue = None
    install = install_wheels(args.site, args.sglang, log) if args.site and not args.skip_sglang else None
    target, draft = build_checkpoints(args.work, args, log)  # while pip installs
    if not args.skip_sglang:
        finish_install(install, log)
        env = sglang_env(args.site, args.sglang_dtype, log)
    if args.pair == "shipped":
        prompts = text_prompts(args.num_prompts, args.seed)
    else:
        prompts = make_prompts(args.num_prompts, args.vocab, args.seed)
    if args.radix_cache:
        prompts = shared_prefix(prompts)
    log.stamp(f"prompts: lengths {[len(p) for p in prompts]}, {args.max_new_tokens} new tokens each")
    if not args.skip_sglang:
        groups = gpu_groups(args.tp, torch.cuda.device_count()) if args.parallel else [None]
        queue = SGLangQueues(sglang_runs(args, target, draft), env, prompts, args, args.work, out, log, groups)
        if not args.no_overlap:
            queue.start()
    ref, margins = hf_reference(target, prompts, args, args.device, log)
    runs = [ref]
    if not args.skip_engine:
        runs += engine_runs(target, draft, prompts, args, args.device, deadline, log)
    if queue is not None:
        if args.no_overlap:
            queue.start()
        queue.join(timeout=None if deadline == float("inf") else max(0.0, deadline - time.time()))
        if queue.is_alive():
            log.stamp("deadline reached: stopping SGLang")
            queue.stop()
            queue.join(timeout=30)
        for cfg in queue.runs:
            for name in (cfg.name + turn for turn in turns(args)):
                for batch in args.batches:
                    runs.append(queue.results.get(f"{name} b{batch}") or Run(name, batch, error="not run (deadline)"))
    if not args.skip_sglang:
        teacher_forced_gaps(target, prompts, [r for r in runs if r.name.startswith("sglang")], args.device, log)
    verdicts = sglang_verdicts(runs)
    table = report(runs, ref, margins, prompts, args, log, verdicts)
    (out / "table.md").write_text(table + "\n")
    (out / "results.json").write_text(
        json.dumps(dict(prompts=prompts, margins=margins, runs=[asdict(r) for r in runs], args=vars(args)), default=str)
    )
    ran = all(r.outputs is not None for r in runs)
    exact = [r.key for r in runs if r.outputs is not None and not r.name.startswith("sglang") and r.outputs != ref.outputs]
    lossy = [key for key, v in verdicts.items() if not v.ok and not key.startswith(BUILTIN)]
    want = len(prompts) * args.max_new_tokens
    unsampled = [r.key for r in runs if args.sampled and r.name.startswith("sglang") and r.outputs is not None
                 and (r.extra.get("sampled") or {}).get("tokens") != want]  # fmt: skip
    ok = ran and not exact and not lossy and not unsampled
    log.stamp(
        "verdict:",
        "all ran; float32 runs equal transformers; every run of ours equals stock SGLang's tokens, or differs first at "
        f"a near tie of stock's logits (margin < {NEAR_TIE})"
        if ok
        else f"FAILED: not all ran={not ran}, float32 runs differing={exact}, runs of ours not lossless={lossy}, "
        f"sampled batch incomplete={unsampled}",
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
