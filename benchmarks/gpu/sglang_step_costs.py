"""Step costs inside stock SGLang at Qwen3.6-27B shapes, on the GPU machine.

    python3 benchmarks/gpu/sglang_step_costs.py --site /tmp/site [--sglang 0.5.11|0.5.23] [--tp 1 [--tp2-shard]|2]
        [--budgets 32,64] [--runs sglang,sglang-mtp,sglang-eagle-tree,sglang-ddtree64] [--batches 1,8,32] [--out $OUT]
    python3 benchmarks/gpu/sglang_step_costs.py --plot OUT/step_costs.json [--out DIR]   # tokens/s table and plot again

(device call: carry [".whl"], as for harness.py; TP=2 needs `nvidia-h200-x2`.) Ran at TP=2 on two H200s:
benchmarks/RESULTS.md. Each 27B run takes about 100 s (start-up and graph capture): give 4 runs a 420 s deadline.

A Qwen3.6-27B-shaped target (64 layers, hidden 5120, 16 x [3 GDN + 1 gated attention], vocab 248,320)
with SGLang's random `load_format="dummy"` weights (no checkpoint is written, only config.json), and a
random bf16 5-layer DFlash drafter for it from `init_draft` (4 sliding-window layers + 1 full, block 16).
SGLang's offline Engine then decodes `--max-new-tokens` greedy tokens for `--num-prompts` prompts at
batch 1 and 8, CUDA graphs on, in one subprocess per configuration (harness.py's queue): stock decode,
SGLang's own DFLASH (the same drafter, timed by wall clock only), SGLang's own MTP
on 0.5.23 (what Qwen3.6 users run today: NEXTN with the target as its own draft, SGLang's one-layer
`Qwen3_5ForCausalLMMTP` with dummy weights; `sglang-mtp` a chain of 3 steps / 4 tokens, `sglang-eagle-tree` topk 4 x
3 steps / 8 tokens; wall clock only, `mtp_runs`), our DFLASH_CHAIN (chain of 16), DDTREE at each budget, their GDN
layers verified by our tree kernels; with --also-backend-attention each plugin run again
with SGLang's attention backend in the full-attention layers' verify (SGLANG_DFLASH_TREE_ATTENTION=0) instead of the
plugin's tree attention (on by default on an H200 with either backend, --attention-backend: triton by default, or
flashinfer, SGLang's pick for trees on Hopper). Random drafters accept about nothing.

Plugin runs time each decode step by phase on the GPU's timeline (SGLANG_DFLASH_PROFILE, `step_profile.py`; with
--list-kernels K they also list the kernels of each batch size's K-th step, SGLANG_DFLASH_PROFILE_KERNELS:
<run>.profile.kernels.txt, a step that then runs under torch.profiler and so is slower for the wall clock):
the drafter pass, tree build (DFLASH: argmax chain), verify set-up (EagleVerifyInput, KV slots), the target's
verify forward, accept, commit (bookkeeping), GDN commit, drafter context append; medians over the steps of
each batch size (a warm-up at each batch size comes first: the median drops its steps).
Plugin overhead = everything but the drafter pass and the verify forward. The stock run is timed the same way:
it runs with the plugin loaded and no speculative algorithm (so SGLang is stock), and the plugin's `profile_decode`
hook times each decode forward. Every run also gets

    wall ms per step = wall time of the batches / their forward steps,

prefills and the scheduler's work included; first-use compiles and autotuning happen in the warm-up before the
timed batches (harness.py). Profiled runs also give the decode interval: the host time from one decode step's start
to the next's (medians; the scheduler's work between steps included, prefills not): what a decode step costs as
served, against the profiled step's GPU time. The profile reads its events without a device sync, so SGLang's
overlap scheduler runs ahead as it does unprofiled. The table (stdout, $OUT/step_costs.md) gives all three, each
with its ratio to stock decode, and the phases. A second table gives each run's tokens per second by batch size (its
emitted tokens over its batches' wall time) against stock's, and a third its steady decode (requests x tokens a pass
over the median decode interval: what a long request sees, prefills left out), drawn in $OUT/tokens_per_s.png where
matplotlib is installed (else `--plot` draws it from $OUT/step_costs.json on any machine, which also holds the runs'
profiles). $OUT gets step_costs.{md,log,json,png} and each run's server log: at most 4 runs fit a device call's 8
files. CUDA graphs are captured at the
--batches sizes only (a batch between two pads up to the next); with --default-graphs at the sizes SGLang picks
itself, as in a server started with no graph flags. A last table gives each run's CUDA-graph memory, read from
SGLang's capture log lines (and our width tiers' line).

--forced-tau DFLASH_CHAIN=7.7,DDTREE=10.2 (BENCHMARK ONLY, TP=1): those runs accept a depth drawn per request and step
at that mean tokens per pass instead of the target's choice (`forced_acceptance.py`, reached through an entry point of
its own; the package has no such switch), so the step, commits included, runs at a realistic acceptance with the
random drafter. Their outputs are not the target's; the table's header says so. DFlash's published mean on
Qwen3.5-27B is 7.7 (Math500) / 9.1 (HumanEval) / 5.5 (MT-Bench); DDTree's papers add 2.5-3.1 on other targets.
That model accepts nothing past a tree's most probable path, so every budget that holds the path accepts alike.

--calibrated-tau 7.7,10.2 (BENCHMARK ONLY, TP=1; instead of --forced-tau): every run of ours drafts from one
calibrated distribution a depth and the target's token at each depth is drawn from it (`forced_acceptance.py`'s
marginal model, DDTree's own): a chain of the drafter's block accepts the first number of tokens a pass and DDTree's
best 511 prefixes (budget 511) the second (DDTree's published figures are at its best budget, 256-512), and each width
accepts what its tree holds, so that budgets and the width controller trade acceptance for cost. The per-budget
figures between are the model's (its shape: the same acceptance at every depth, ranks past the first geometric), not
data. The table's header gives them for each budget run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import forced_acceptance as forced  # noqa: E402
import harness as h  # noqa: E402

QWEN36_27B_TEXT = dict(
    vocab_size=248_320,
    hidden_size=5120,
    intermediate_size=17_408,
    num_hidden_layers=64,
    layer_types=[h.LIN, h.LIN, h.LIN, h.FULL] * 16,
    full_attention_interval=4,
    num_attention_heads=24,
    num_key_value_heads=4,
    head_dim=256,
    linear_num_key_heads=16,
    linear_num_value_heads=48,
    linear_key_head_dim=128,
    linear_value_head_dim=128,
    linear_conv_kernel_dim=4,
    partial_rotary_factor=0.25,
    rope_theta=10_000_000.0,
    eos_token_id=None,
    pad_token_id=None,
)


def tp2_shard(text: dict) -> dict:
    """One TP=2 rank's share of the text config: half the attention, GDN and MLP widths (hidden size and vocabulary
    kept: SGLang at TP=1 then holds the whole embedding and LM head, which TP=2 splits)."""
    half = ("num_attention_heads", "num_key_value_heads", "linear_num_key_heads", "linear_num_value_heads", "intermediate_size")
    return dict(text, **{k: text[k] // 2 for k in half})


def write_target(target: Path, text: dict = QWEN36_27B_TEXT) -> Path:
    """config.json of a Qwen3.5/3.6 target of these text shapes, as SGLang loads it (its weights: SGLang's dummy
    loader). The MTP runs take the same directory as their draft: SGLang builds its MTP layer from this config
    (`Qwen3_5ForCausalLMMTP`, one layer whatever the checkpoint's `mtp_num_hidden_layers`, which nothing reads), so
    the target needs no MTP field and stays the one every run loads."""
    from transformers import Qwen3_5Config

    _, vision = h.target_configs(512, text["hidden_size"], 1)
    cfg = Qwen3_5Config(text_config=text, vision_config=vision, tie_word_embeddings=False)
    cfg.eos_token_id = None
    cfg.architectures = ["Qwen3_5ForConditionalGeneration"]  # what SGLang picks the model class by
    cfg.save_pretrained(target)
    return target


BLOCK_SIZE = 16  # the random drafter's block: 15 drafted depths, as Qwen3.6-27B's DFlash drafter


def build(work: Path, log: h.Log, text: dict = QWEN36_27B_TEXT) -> tuple[Path, Path]:
    """config.json of the 27B-shaped target (weights: SGLang's dummy loader) and a random bf16 drafter for it (its
    heads follow the target's, as init_draft makes them)."""
    target, draft = write_target(work / "target27b", text), work / "draft27b"
    cmd = [sys.executable, "-m", "sglang_dflash.init_draft", "--target", str(target), "--out", str(draft), "--layers", "5",
           "--block-size", str(BLOCK_SIZE), "--sliding-window", "2048", "--dtype", "bfloat16", "--force"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, env=h.repo_env())  # --force: an earlier call's is remade
    if out.returncode != 0:
        raise SystemExit(f"sglang_step_costs: init_draft failed (exit {out.returncode}): {out.stderr.strip()[-2000:]}")
    log.stamp("checkpoints: Qwen3.6-27B-shaped target config (dummy weights);", out.stdout.strip())
    return target, draft


PHASES = ("drafter", "tree", "prepare", "verify", "accept", "commit", "gdn_commit", "context")
OVERHEAD = ("tree", "prepare", "accept", "commit", "gdn_commit", "context")


def batch_steps(run: h.Run) -> int:
    """Forward steps of a run's batches: per group of `batch` prompts, its longest request's target passes (one per
    token for stock, spec_verify_ct for the plugin), as SGLang ran the groups one after another."""
    meta = run.extra["meta"]
    groups = [meta[i : i + run.batch] for i in range(0, len(meta), run.batch)]
    return sum(max(m.get("spec_verify_ct") or m.get("completion_tokens") or 0 for m in g) for g in groups)


def acceptance_models(args, block_size: int) -> dict[str, str]:
    """SGLANG_DFLASH_BENCH_ACCEPTANCE by algorithm: --forced-tau's `depth` model at each algorithm's mean, or
    --calibrated-tau's `marginal` model for both; {} for the target's own acceptance."""
    depths = block_size - 1
    if args.forced_tau:
        return {a: "depth:" + ",".join(f"{x:.6f}" for x in forced.survival_from_tau(tau, depths))
                for a, tau in args.forced_tau.items()}  # fmt: skip
    if args.calibrated_tau:
        spec = "marginal:" + ",".join(f"{x:.9g}" for x in forced.rank_probs(*args.calibrated_tau, depths))
        return dict.fromkeys(("DFLASH_CHAIN", "DDTREE"), spec)
    return {}


def forced_runs(runs: list[h.SGLangRun], models: dict[str, str], work: Path, env: dict) -> None:
    """Our runs of each algorithm in `models` (`acceptance_models`) accept by that model, through
    `forced_acceptance`'s entry point first on their PYTHONPATH. Their outputs are not the target's."""
    root = forced.install(work)
    for run in runs:
        algorithm = run.engine_kwargs.get("speculative_algorithm")
        if run.plugin and algorithm in models and run.name != h.BUILTIN:
            path = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
            run.env = dict(run.env, PYTHONPATH=path, **{forced.ENV: models[algorithm]})


def model_taus(args, block_size: int) -> str:
    """--calibrated-tau: the model's tokens a pass of the chain (its first figure, by construction) and of each
    --budgets tree, for the table's header."""
    probs, depths = forced.rank_probs(*args.calibrated_tau, block_size - 1), block_size - 1
    trees = [f"DDTREE {b} {forced.expected_tau(probs, depths, int(b)):.2f}" for b in args.budgets.split(",")]
    return ", ".join([f"DFLASH_CHAIN {args.calibrated_tau[0]:.2f}", *trees])


MTP, EAGLE_TREE = "sglang-mtp", "sglang-eagle-tree"  # SGLang's own EAGLE/NEXTN with the target's MTP layer
# 0.5.23 only: its EAGLE runs on Triton and JIT-built CUDA kernels of its own (sglang.kernels.ops.speculative), while
# 0.5.11's imports sgl_kernel's compiled build_tree_kernel_efficient / verify_tree_greedy / fast_topk, which the GPU
# image's stand-in (tests/sgl_kernel_stub) does not have (0.5.11's server arguments resolve the same runs on CPU)
MTP_RELEASES = ("0.5.23",)
MTP_SHAPES = {  # speculative_num_steps, speculative_eagle_topk, speculative_num_draft_tokens
    MTP: (3, 1, 4),  # the usual MTP chain: 3 draft steps, 4 tokens verified
    EAGLE_TREE: (3, 4, 8),  # a tree: the top 4 per step over 3 steps, the best 8 tokens (root included) verified
}


def mtp_runs(args, target: Path) -> list[h.SGLangRun]:
    """SGLang's own MTP speculative decoding, what a Qwen3.5/3.6 user runs today: NEXTN (EAGLE's alias) with the target
    checkpoint as its own draft, which SGLang loads as `Qwen3_5ForCausalLMMTP` (its one MTP layer, sharing the
    target's embedding and LM head), as a chain (topk 1) and as a tree (topk > 1: spec v2's tree verify of the GDN
    layers). The drafter's weights are dummy too. With the plugin installed, as the user would have it (SGLang stays
    stock for an algorithm not ours); without our profile (the table gives their wall time per step and tokens per
    pass)."""
    if args.sglang not in MTP_RELEASES:
        return []
    base = h.sglang_base_kwargs(args, target)
    return [
        h.SGLangRun(name, plugin=True, engine_kwargs=dict(base, speculative_algorithm="NEXTN",
                    speculative_draft_model_path=str(target), speculative_draft_load_format="dummy",
                    speculative_num_steps=steps, speculative_eagle_topk=topk, speculative_num_draft_tokens=tokens))
        for name, (steps, topk, tokens) in MTP_SHAPES.items()
    ]  # fmt: skip


def step_runs(hargs, target: Path, draft: Path, work: Path, list_kernels: int = 0,
              default_graphs: bool = False) -> list[h.SGLangRun]:  # fmt: skip
    """The configurations, in --runs order: the harness's (stock, SGLang's DFLASH, ours), each with the plugin loaded
    and profiled (list_kernels > 0: that step's kernels listed), then SGLang's MTP (`mtp_runs`: wall clock only);
    every one on dummy weights. CUDA graphs at the timed batch sizes, or (default_graphs) at the sizes SGLang picks
    itself, as a server started without graph or request-count flags has them."""
    runs = h.sglang_runs(hargs, target, draft)
    for run in runs:
        profile = work / f"{run.name}.profile.json"
        # the stock run too: with the plugin loaded and no speculative algorithm SGLang is stock, and
        # the plugin's profile_decode hook times its decode forwards as the workers' steps are timed
        run.plugin, run.env = True, dict(run.env, SGLANG_DFLASH_PROFILE=str(profile))
        if list_kernels:
            run.env["SGLANG_DFLASH_PROFILE_KERNELS"] = str(list_kernels)
    runs = h.select_runs(runs + mtp_runs(hargs, target), hargs.runs)
    for run in runs:
        run.engine_kwargs.update(h.spelled(hargs, dict(load_format="dummy", context_length=2048)))
        if default_graphs:
            for name in ("cuda_graph_max_bs", "max_running_requests"):
                run.engine_kwargs.pop(h.spelled(hargs, {name: None}).popitem()[0], None)
        else:  # graphs at the timed batch sizes only (others pad up): at 27B shapes each captured size costs seconds
            run.engine_kwargs.update(h.spelled(hargs, dict(cuda_graph_bs=list(hargs.batches))))
        profile = work / f"{run.name}.profile.json"  # none left from an earlier call
        profile.unlink(missing_ok=True)
        profile.with_suffix(".kernels.txt").unlink(missing_ok=True)
    return runs


GRAPH_END = re.compile(r"Capture .*?graph end\..*?mem usage=([0-9.]+) GB")  # SGLang's, 0.5.11 and 0.5.23
TIERS_TOOK = re.compile(r"the narrower tiers took ([0-9.]+) GiB")  # the workers' width tiers (`_init_width_control`)


def graph_memory(log_text: str) -> tuple[list[float], float | None]:
    """From one server's log: the GPU memory each CUDA-graph capture took (SGLang's capture lines: target, then any
    draft graphs; GB of 2^30 bytes) and our width tiers' (None without tiers)."""
    tiers = TIERS_TOOK.findall(log_text)
    return [float(g) for g in GRAPH_END.findall(log_text)], float(tiers[-1]) if tiers else None


def memory_table(logs: dict[str, str]) -> str:
    """Markdown: per run (name -> its server log), the CUDA graphs' GPU memory, GiB."""
    lines = ["## CUDA-graph memory (SGLang's capture logs; GiB)", "",
             "| run | captures | their sum | our width tiers |", "|---|---|---|---|"]  # fmt: skip
    for name, text in logs.items():
        captures, tiers = graph_memory(text)
        lines.append(f"| {name} | {', '.join(f'{g:.2f}' for g in captures) or '-'} | {sum(captures):.2f} | "
                     f"{'-' if tiers is None else f'{tiers:.2f}'} |")  # fmt: skip
    return "\n".join(lines)


def table(runs: list[h.Run], profiles: dict[str, dict], args) -> str:
    """Markdown: per run and batch size, wall ms per forward step (every run, the same way) and, for plugin runs,
    the profiled step by phase (profiles: run name -> step_profile summary)."""
    wall = {(r.name, r.batch): 1e3 * r.wall_s / max(batch_steps(r), 1) for r in runs if r.outputs}
    profiled = {(n, int(b)): p["median_us"]["step"] / 1e3 for n, prof in profiles.items() for b, p in prof.items()}
    interval = {
        (n, int(b)): p["interval_median_us"] / 1e3
        for n, prof in profiles.items()
        for b, p in prof.items()
        if "interval_median_us" in p
    }
    forced_note = []
    if args.forced_tau or args.calibrated_tau:
        how = f"Each request accepts a depth drawn per step at mean tokens per pass {args.forced_tau}."
        if args.calibrated_tau:
            how = (f"The target's tokens are drawn from the drafter's calibrated marginals ({args.calibrated_tau}: tokens "
                   f"a pass of a chain and of the best 511 prefixes); the model's tokens a pass: {args.model_taus}.")  # fmt: skip
        forced_note = ["", "**FORCED ACCEPTANCE (benchmark only, `forced_acceptance.py`): our runs' outputs are NOT the "
                           "target's.** " + how]  # fmt: skip
    lines = [
        f"## SGLang step costs, Qwen3.6-27B shapes{' of one TP=2 rank' if args.tp2_shard else ''} (dummy weights), "
        f"TP={args.tp}, {args.num_prompts} prompts x "
        f"{args.max_new_tokens} tokens, CUDA graphs on; ms",
        *forced_note,
        "",
        "wall / step: the batches' wall time over their forward steps (prefills, the scheduler's work between steps "
        "included; warm: a warm-up at each batch size runs first), the same for every run. decode interval: the host "
        "time from one decode step's start to the next's (profiled runs). profiled step and phases: "
        "medians on the GPU timeline "
        "(SGLANG_DFLASH_PROFILE) over the workers' decode steps, or stock SGLang's decode forwards; x stock: the "
        "ratio to stock decode's, each way. overhead: all phases but the drafter pass and the verify forward. "
        "SGLang's own algorithms (builtin DFLASH, MTP chain and tree) have no profile: wall clock and tokens per pass.",
        "",
        "| run | batch | wall / step | x stock | decode interval | x stock | profiled step | x stock | "
        + " | ".join(PHASES)
        + " | overhead | tokens / pass |",
        "|---|---|---|---|---|---|---|---|" + "---|" * len(PHASES) + "---|---|",
    ]
    for r in runs:
        if r.outputs is None:
            lines.append(f"| {r.name} | {r.batch} | - | - | - | - | - | - |" + " |" * len(PHASES) + f" {r.error} | |")
            continue
        step = wall[(r.name, r.batch)]
        stock = wall.get(("sglang", r.batch))
        ratio = f"{step / stock:.2f}" if stock else "-"
        size = min(r.batch, args.num_prompts)  # the profile's key: requests per step (fewer prompts than the batch)
        prof = profiles.get(r.name, {}).get(str(size))
        cells = []
        for measured in (interval, profiled):
            mine, base = measured.get((r.name, size)), measured.get(("sglang", size))
            cells += [f"{mine:.2f}" if mine else "-", f"{mine / base:.2f}" if mine and base else "-"]
        ms = {p: v / 1e3 for p, v in prof["median_us"].items()} if prof else {}
        phases = [f"{ms[p]:.2f}" if p in ms else "-" for p in PHASES]
        overhead = f"{sum(ms.get(p, 0.0) for p in OVERHEAD):.2f}" if "drafter" in ms else "-"
        tpp = r.extra.get("tokens_per_pass", 1.0)
        lines.append(
            f"| {r.name} | {r.batch} | {step:.2f} | {ratio} | {' | '.join(cells)} | "
            + " | ".join(phases)
            + f" | {overhead} | {tpp:.2f} |"
        )
    host = [(n, b, p["host_median_us"]) for n, prof in profiles.items() for b, p in prof.items() if "host_median_us" in p]
    if host:
        lines += ["", "The same phases on the host's clock (ms): where host ~ GPU, the GPU waited on Python.", "",
                  "| run | requests | step | " + " | ".join(PHASES) + " |", "|---|---|---|" + "---|" * len(PHASES)]  # fmt: skip
        for name, size, us in host:
            cells = [f"{us[p] / 1e3:.2f}" if p in us else "-" for p in ["step", *PHASES]]
            lines.append(f"| {name} (host) | {size} | " + " | ".join(cells) + " |")
    widths = [(n, b, p["widths"]) for n, prof in profiles.items() for b, p in prof.items() if "widths" in p]
    if widths:
        lines += ["", "The width controller's choices: steps that verified each width (nodes a request).", "",
                  "| run | requests | widths (steps) |", "|---|---|---|"]  # fmt: skip
        for name, size, counts in widths:
            lines.append(f"| {name} | {size} | " + ", ".join(f"{n}: {c}" for n, c in counts.items()) + " |")
    return "\n".join(lines)


def tokens_per_s(run: h.Run) -> float | None:
    """A run's emitted tokens over its batches' wall time (prefills and the scheduler's work included)."""
    if run.outputs is None or not run.wall_s:
        return None
    return sum(len(o) for o in run.outputs) / run.wall_s


def rates(runs: list[h.Run]) -> dict[tuple[str, int], float]:
    """(run name, batch) -> tokens per second, for the runs that produced output."""
    return {(r.name, r.batch): tokens_per_s(r) for r in runs if tokens_per_s(r) is not None}


def decode_rates(runs: list[h.Run], profiles: dict[str, dict], num_prompts: int) -> dict[tuple[str, int], float]:
    """(run name, batch) -> steady decode tokens per second: requests x tokens a pass over the median decode interval
    (the profile's, at that many requests; stock: a token a pass), for the profiled runs that produced output. The
    tokens a pass are the whole batch's, its tail steps at fewer requests included: exact for a fixed budget, not for
    the width controller, whose tail steps may verify other widths than its full ones."""
    out = {}
    for r in runs:
        size = min(r.batch, num_prompts)
        step = profiles.get(r.name, {}).get(str(size), {}).get("interval_median_us")
        if r.outputs is not None and step:
            out[(r.name, r.batch)] = size * r.extra.get("tokens_per_pass", 1.0) / (step / 1e6)
    return out


WALL = "each batch size's prompts' emitted tokens over their wall time, prefills included"
DECODE = ("steady decode: requests x tokens a pass over the median decode interval (prefills and the scheduler's work "
          "between them left out)")  # fmt: skip


def throughput_table(runs: list[h.Run], forced: bool, rate: dict | None = None, what: str = WALL) -> str:
    """Markdown: tokens per second by run (rows) and batch (columns), each with its ratio to stock's at that batch;
    with several batch sizes, also over all of them (a load that visits each in turn: every batch's tokens over the
    sum of their times at these rates; a run missing a batch has none). rate: (run, batch) -> tokens per second,
    by default `rates` (wall clock)."""
    batches = sorted({r.batch for r in runs})
    names = list(dict.fromkeys(r.name for r in runs))
    rate = rates(runs) if rate is None else rate
    mixed = len(batches) > 1
    lines = [
        f"## Tokens per second: {what}" + (" (FORCED ACCEPTANCE: our runs' outputs are NOT the target's)" if forced else ""),
        "",
        "| run | " + " | ".join(f"batch {b}" for b in batches) + (" | all batches, in turn" if mixed else "") + " |",
        "|---|" + "---|" * (len(batches) + mixed),
    ]
    for name in names:
        cells = []
        for b in batches:
            mine, stock = rate.get((name, b)), rate.get(("sglang", b))
            cells.append(cell(mine, stock))
        if mixed:
            cells.append(cell(overall(runs, rate, name, batches), overall(runs, rate, "sglang", batches)))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cell(mine: float | None, stock: float | None) -> str:
    return "-" if mine is None else f"{mine:.0f}" + (f" ({mine / stock:.2f}x)" if stock else "")


def overall(runs: list[h.Run], rate: dict, name: str, batches: list[int]) -> float | None:
    """Run `name`'s tokens per second over all its batches in turn (each batch's emitted tokens at its rate), or None
    unless each of `batches` has a rate."""
    mine = {r.batch: sum(len(o) for o in r.outputs) for r in runs if r.name == name and (name, r.batch) in rate}
    if set(mine) != set(batches):
        return None
    return sum(mine.values()) / sum(tokens / rate[(name, b)] for b, tokens in mine.items())


def plot(runs: list[h.Run], forced: bool, path: Path, decode: dict | None = None) -> str:
    """Tokens per second by batch size, a line a run (wall clock; dashed beside it, `decode_rates`' steady decode), as
    a PNG at `path`. Returns what it did: matplotlib may be missing on the GPU machine; then `--plot` draws it
    elsewhere from step_costs.json."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        where = path.parent / "step_costs.json"
        return f"no plot: matplotlib is not installed here (draw it elsewhere: sglang_step_costs.py --plot {where})"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for style, rate, what in (("-", rates(runs), ""), ("--", decode or {}, ", steady decode")):
        for i, name in enumerate(dict.fromkeys(r.name for r in runs)):
            points = sorted((batch, tps) for (n, batch), tps in rate.items() if n == name)
            if points:
                ax.plot(*zip(*points), style, marker="o", color=f"C{i}", label=name + what)
    ax.set_xscale("log", base=2)
    batches = sorted({r.batch for r in runs})
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.set_xlabel("requests in flight (batch)")
    ax.set_ylabel("tokens / s")
    title = "SGLang, Qwen3.6-27B shapes (dummy weights)"
    ax.set_title(title + ("\nFORCED ACCEPTANCE: outputs are not the target's" if forced else ""))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"wrote {path}"


def replot(argv: list[str]) -> int:
    """--plot: the tokens/s table and plot again from a run's step_costs.json (no GPU needed), into --out."""
    p = argparse.ArgumentParser(prog="sglang_step_costs.py --plot")
    p.add_argument("--plot", type=Path, required=True, help="a run's step_costs.json")
    p.add_argument("--out", type=Path, default=Path.cwd(), help="where tokens_per_s.md and .png go (default: here)")
    args = p.parse_args(argv)
    data = json.loads(args.plot.read_text())
    if isinstance(data, list):  # written before the forced-acceptance field
        data = dict(forced_tau=None, runs=data)
    runs = [h.Run(**r) for r in data["runs"]]
    forced = bool(data.get("forced_tau") or data.get("calibrated_tau"))
    decode = {(n, int(b)): v for n, b, v in data.get("decode_rates", [])}
    text = throughput_table(runs, forced) + ("\n\n" + throughput_table(runs, forced, decode, DECODE) if decode else "")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tokens_per_s.md").write_text(text + "\n")
    print(text)
    print(plot(runs, forced, args.out / "tokens_per_s.png", decode))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--site", type=Path, required=True, help="install the carried wheels here (as harness.py)")
    p.add_argument("--sglang", choices=h.RELEASES, default=h.RELEASES[0], help="the SGLang release of the carried wheels")
    p.add_argument("--tp", type=int, choices=(1, 2), default=1)
    p.add_argument(
        "--tp2-shard",
        action="store_true",
        help="with --tp 1: one TP=2 rank's shapes (half the heads and MLP; `tp2_shard`), so that each GPU of a two-GPU "
        "machine runs a configuration of its own",
    )
    p.add_argument("--budgets", default="32,64", help="DDTREE budgets")
    p.add_argument("--num-prompts", type=int, default=8, help="at least the largest batch (else it is not that batch)")
    p.add_argument("--batches", default="1,8", help="requests in flight, comma-separated (issue figures: 1,8,32)")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument(
        "--runs", default=None, help="comma-separated run names to keep, run in this order (e.g. sglang,sglang-ddtree64)"
    )
    p.add_argument(
        "--also-backend-attention",
        action="store_true",
        help="each plugin run again with SGLang's attention backend in the full-attention layers' verify "
        "(SGLANG_DFLASH_TREE_ATTENTION=0) instead of the plugin's tree attention",
    )
    p.add_argument("--also-widths", default=None, metavar="TIERS", help="as harness.py's: each of our runs once more with "
                   "the verify width chosen per step by cost (SGLANG_DFLASH_WIDTHS=TIERS, e.g. auto)")  # fmt: skip
    p.add_argument("--attention-backend", choices=("triton", "flashinfer"), default="triton", help="as harness.py's")
    p.add_argument(
        "--forced-tau",
        type=lambda s: dict((k, float(v)) for k, v in (item.split("=") for item in s.split(","))),
        default=None,
        help="BENCHMARK ONLY, TP=1: e.g. DFLASH_CHAIN=7.7,DDTREE=10.2: those runs accept a depth drawn per request at that "
        "mean tokens per pass (the bonus included) instead of the target's choice (forced_acceptance.py); their "
        "outputs are not the target's, and the table says so",
    )
    p.add_argument(
        "--calibrated-tau",
        type=lambda s: tuple(float(v) for v in s.split(",")),
        default=None,
        metavar="CHAIN,TREE",
        help="BENCHMARK ONLY, TP=1, instead of --forced-tau: e.g. 7.7,10.2: every run of ours drafts from one "
        "calibrated distribution a depth and the target's tokens are drawn from it (forced_acceptance.py's marginal "
        "model): a chain of the drafter's block accepts CHAIN tokens a pass, the best 511 prefixes TREE, each width "
        "what its tree holds; outputs are not the target's, and the table says so",
    )
    p.add_argument("--default-graphs", action="store_true",
                   help="CUDA graphs at the batch sizes SGLang picks itself (no --cuda-graph-bs, --cuda-graph-max-bs or "
                        "--max-running-requests), as a user's server has them; default: at --batches only")  # fmt: skip
    p.add_argument("--mem-fraction", type=float, default=0.85)
    p.add_argument("--deadline", type=float, default=540, help="seconds from start after which SGLang runs are stopped")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--work", type=Path, default=Path("/tmp/sglang_dflash_steps"))
    p.add_argument("--plot", type=Path, default=None, help="no run: a step_costs.json's tokens/s table and PNG, into --out")
    p.add_argument("--list-kernels", type=int, default=0, metavar="K", help="list each batch size's K-th step's kernels")
    if argv is None:
        argv = sys.argv[1:]
    if any(a == "--plot" or a.startswith("--plot=") for a in argv):  # needs nothing else (no --site)
        return replot(argv)
    mine = p.parse_args(argv)
    if mine.num_prompts < max(int(b) for b in mine.batches.split(",")):
        p.error(f"--num-prompts {mine.num_prompts} is fewer than the largest --batches: that batch would not run full")
    hargs = h.parse_args(
        ["--tp", str(mine.tp), "--site", str(mine.site), "--work", str(mine.work), "--num-prompts", str(mine.num_prompts),
         "--max-new-tokens", str(mine.max_new_tokens), "--batches", mine.batches, "--budgets", mine.budgets,
         "--mem-fraction", str(mine.mem_fraction),
         "--sglang", mine.sglang, "--speculative-algorithm", "DFLASH_CHAIN", "DDTREE",
         "DFLASH", "--vocab", str(QWEN36_27B_TEXT["vocab_size"])]
        + (["--also-backend-attention"] if mine.also_backend_attention else [])
        + (["--also-widths", mine.also_widths] if mine.also_widths else [])
        + ["--attention-backend", mine.attention_backend]
        + (["--runs", mine.runs] if mine.runs else [])
    )  # fmt: skip
    if mine.tp2_shard and mine.tp != 1:
        p.error("--tp2-shard runs one TP=2 rank's shapes at --tp 1")
    if mine.forced_tau and (mine.tp != 1 or set(mine.forced_tau) - {"DFLASH_CHAIN", "DDTREE"}):
        p.error("--forced-tau takes DFLASH_CHAIN= and DDTREE= at --tp 1")
    if mine.calibrated_tau and (mine.tp != 1 or mine.forced_tau or len(mine.calibrated_tau) != 2):
        p.error("--calibrated-tau takes CHAIN,TREE (two numbers) at --tp 1, without --forced-tau")
    try:
        models = acceptance_models(mine, BLOCK_SIZE)
        mine.model_taus = model_taus(mine, BLOCK_SIZE) if mine.calibrated_tau else None
    except ValueError as e:  # tokens a pass the model cannot reach
        p.error(str(e))
    out = mine.out or Path(h.os.environ.get("OUT") or mine.work / "out")
    out.mkdir(parents=True, exist_ok=True)
    mine.work.mkdir(parents=True, exist_ok=True)
    log = h.Log(out / "step_costs.log")
    install = h.install_wheels(mine.site, mine.sglang, log)
    target, draft = build(mine.work, log, tp2_shard(QWEN36_27B_TEXT) if mine.tp2_shard else QWEN36_27B_TEXT)
    h.finish_install(install, log)
    env = h.sglang_env(mine.site, hargs.sglang_dtype, log)
    runs = step_runs(hargs, target, draft, mine.work, mine.list_kernels, mine.default_graphs)
    forced_runs(runs, models, mine.work, env)
    prompts = h.make_prompts(mine.num_prompts, QWEN36_27B_TEXT["vocab_size"], 0)
    import torch

    queue = h.SGLangQueues(runs, env, prompts, hargs, mine.work, out, log, h.gpu_groups(mine.tp, torch.cuda.device_count()))
    queue.start()
    queue.join(timeout=max(0.0, log.t0 + mine.deadline - time.time()))
    if queue.is_alive():
        log.stamp("deadline reached: stopping SGLang")
        queue.stop()
        queue.join(timeout=30)
    missing = "not run (deadline)"
    results = [queue.results.get(f"{r.name} b{b}") or h.Run(r.name, b, error=missing) for r in runs for b in hargs.batches]
    profiles = {}
    for r in runs:
        path = mine.work / f"{r.name}.profile.json"
        if path.is_file():  # into step_costs.json: a device call brings back 8 files
            profiles[r.name] = json.loads(path.read_text())
        kernels = path.with_suffix(".kernels.txt")  # --list-kernels: each batch size's K-th step's kernels
        if kernels.is_file():
            (out / kernels.name).write_text(kernels.read_text())
    logs = {r.name: (out / f"{r.name}.log").read_text(errors="replace") for r in runs if (out / f"{r.name}.log").is_file()}
    forced = bool(mine.forced_tau or mine.calibrated_tau)
    decode = decode_rates(results, profiles, mine.num_prompts)
    text = "\n\n".join([table(results, profiles, mine), throughput_table(results, forced),
                         throughput_table(results, forced, decode, DECODE), memory_table(logs)])  # fmt: skip
    log("\n" + text)
    (out / "step_costs.md").write_text(text + "\n")
    data = dict(forced_tau=mine.forced_tau, calibrated_tau=mine.calibrated_tau, runs=[h.asdict(r) for r in results],
                decode_rates=[[n, b, v] for (n, b), v in decode.items()], profiles=profiles)  # fmt: skip
    (out / "step_costs.json").write_text(json.dumps(data, default=str))
    log.stamp(plot(results, forced, out / "tokens_per_s.png", decode))
    return 0 if all(r.outputs is not None for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
