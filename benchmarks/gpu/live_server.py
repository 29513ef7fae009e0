"""bench_serving.py against live SGLang HTTP servers on the GPU machine (issue 6, item 4).

    python3 benchmarks/gpu/live_server.py --site /tmp/site [--tp 1|2] [--budgets 16] [--concurrency 1,2,4,8] [--out $OUT]

(device call: carry [".whl"], as for harness.py.) Ran at TP=2 on two H200s (benchmarks/RESULTS.md).
With two groups of --tp GPUs (two H200s at TP=1), two servers run side by side.

On the shipped trained tiny pair (harness.py --pair shipped: its target rewritten into the format SGLang
loads, with the pair's tokenizer; its drafter as shipped), one server per configuration: stock, DFLASH, and DDTREE
at each budget. Each is SGLang's own `launch_server` (HTTP on --port; harness.py's engine arguments, so bf16,
triton attention, CUDA graphs), driven by benchmarks/bench_serving.py once /health answers (native /generate,
greedy, --max-new-tokens per request, EOS ignored, prompts of stdlib source text, the pair's training text), then
stopped. Last, `bench_serving.py --compare` writes compare.md and compare.png over all runs. On a tiny model the
throughputs measure the serving path (HTTP, scheduler, the workers' Python), not speed on a real model; the
acceptance lengths are the pair's.

Lossless over HTTP: before the benchmark, each server also answers --check-prompts greedy requests one at a time
(token ids in, `output_ids` out, EOS ignored; stock's with its top-2 logprobs). Once every server has stopped, each
speculative server's outputs are judged against stock's by `verdict.judge`, as harness.py judges its runs: equal
tokens, or a first difference at a near tie of stock's own logits. Teacher-forced gaps against transformers' float32
logits are shown besides.

Output under --out (default $OUT): live_server.log, <run>.server.log, <run>.bench.log, serving/<run>.{json,md},
serving/compare.*, greedy.json (every server's greedy outputs and gaps), greedy.md (the verdict table).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
import verdict  # noqa: E402
from verdict import top2_margins  # noqa: E402

BENCH = h.REPO / "benchmarks" / "bench_serving.py"
# What `python -m sglang.launch_server` does: plugins first, then the server.
SERVE = (
    "import json, sys\n" + h.LOAD_PLUGINS + "from sglang.srt.entrypoints.http_server import launch_server\n"
    "from sglang.srt.server_args import ServerArgs\n"
    "launch_server(ServerArgs(**json.loads(sys.argv[1])))\n"
)


def prompts_file(path: Path, n: int, seed: int) -> Path:
    """n stdlib-source prompts (harness.text_prompts, decoded back to text) as bench_serving's jsonl."""
    tokenizer = h.shipped_tokenizer()
    lines = [json.dumps({"prompt": tokenizer.decode(ids)}) for ids in h.text_prompts(n, seed) if ids]
    path.write_text("\n".join(lines) + "\n")
    return path


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def greedy(url: str, prompts: list[list[int]], max_new_tokens: int, margins: bool) -> tuple[list[list[int]], list[dict]]:
    """Each prompt's greedy output ids from the server's native /generate, one request at a time, and its meta_info
    (margins: with the top-2 logprobs of each output position)."""
    outputs, metas = [], []
    for ids in prompts:
        body = dict(input_ids=ids, sampling_params=dict(temperature=0.0, max_new_tokens=max_new_tokens, ignore_eos=True))
        if margins:
            body.update(return_logprob=True, top_logprobs_num=2)
        req = urllib.request.Request(f"{url}/generate", json.dumps(body).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            answer = json.loads(r.read())
        outputs.append(answer["output_ids"])
        metas.append(answer["meta_info"])
    return outputs, metas


def serve_and_bench(run: h.SGLangRun, env: dict, args, prompts: Path, out: Path, log: h.Log, check: h.Run) -> bool:
    """Start run's server, wait for /health, answer the greedy check into `check`, run bench_serving against it, stop
    it. True if the benchmark finished."""
    url = f"http://127.0.0.1:{run.engine_kwargs['port']}"
    env = run.environ(env, log)
    with open(out / f"{run.name}.server.log", "w") as server_log:
        server = subprocess.Popen([sys.executable, "-c", SERVE, json.dumps(run.engine_kwargs)], env=env,
                                  stdout=server_log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        try:
            t0 = time.time()
            while not healthy(url):
                if server.poll() is not None or time.time() - t0 > args.start_timeout:
                    log.stamp(f"{run.name}: server not up (exit {server.poll()}); see {run.name}.server.log")
                    return False
                time.sleep(2)
            log.stamp(f"{run.name}: server up in {time.time() - t0:.0f} s; {len(check.extra['prompts'])} greedy requests")
            try:
                check.outputs, metas = greedy(url, check.extra["prompts"], args.check_new_tokens, margins=not run.plugin)
                check.extra["accept_length"] = [m.get("spec_accept_length") for m in metas]
                if not run.plugin:
                    check.extra["margins"] = [top2_margins(m["output_top_logprobs"]) for m in metas]
            except (OSError, KeyError, ValueError) as e:
                check.error = f"{type(e).__name__}: {e}"
                log.stamp(f"{run.name}: greedy check failed: {check.error}")
            log.stamp(f"{run.name}: bench_serving")
            bench = [sys.executable, str(BENCH), "--base-url", url, "--api", "generate", "--concurrency", args.concurrency,
                     "--num-prompts", str(args.num_prompts), "--max-new-tokens", str(args.max_new_tokens), "--ignore-eos",
                     "--prompts", str(prompts), "--label", run.name, "--out", str(out / "serving"), "--no-progress"]  # fmt: skip
            done = subprocess.run(bench, env=env, capture_output=True, text=True)
            (out / f"{run.name}.bench.log").write_text(done.stdout + done.stderr)
            log.stamp(f"{run.name}: bench_serving exit {done.returncode}")
            return done.returncode == 0
        finally:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def judge(target: Path, checks: list[h.Run], args, out: Path, log: h.Log) -> bool:
    """Every speculative server's greedy outputs judged against stock's (checks[0]) by `verdict.judge`, with
    teacher-forced gaps (harness.teacher_forced_gaps) besides, into greedy.md / greedy.json. True if stock and every
    server of ours answered and all of ours are lossless (SGLang's own DFLASH is judged alike, not counted)."""
    import torch

    h.teacher_forced_gaps(target, [], checks, "cuda" if torch.cuda.is_available() else "cpu", log)
    stock = checks[0]
    verdicts = {run.name: verdict.judge(run.outputs, stock.outputs, stock.extra.get("margins")) for run in checks[1:]}
    rows = ["| server | verdict | tokens not transformers' argmax | largest gap | accept length |",
            "|---|---|---|---|---|"]  # fmt: skip
    for run in checks:
        if run.outputs is None:
            rows.append(f"| {run.name} | - | - | - | {run.error or 'not run'} |")
            continue
        off, total, largest = h.gap_summary(run)
        v = verdicts.get(run.name)
        judged = "stock (the peer)" if v is None else f"{'lossless' if v.ok else 'NOT lossless'}: {v.summary()}"
        lengths = [x for x in run.extra.get("accept_length", []) if x]
        accept = f"{sum(lengths) / len(lengths):.2f}" if lengths else "-"
        rows.append(f"| {run.name} | {judged} | {off}/{total} | {largest:.3g} | {accept} |")
    ok = stock.outputs is not None and all(v.ok for name, v in verdicts.items() if name != h.BUILTIN)
    verdict_line = (f"lossless over HTTP: every server of ours equals stock's tokens or differs first at a near tie of "
                    f"stock's logits (< {verdict.NEAR_TIE})" if ok else "FAILED: see the verdict column")  # fmt: skip
    n, new = len(checks[0].extra["prompts"]), args.check_new_tokens
    table = f"## Greedy over HTTP, {n} prompts x {new} new tokens, one request at a time\n\n" + "\n".join(rows)
    (out / "greedy.md").write_text(f"{table}\n\n{verdict_line}\n")
    (out / "greedy.json").write_text(json.dumps([asdict(run) for run in checks], default=str))
    print(table)
    log.stamp(verdict_line)
    return ok


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--site", type=Path, required=True, help="install the carried wheels here (as harness.py)")
    p.add_argument("--tp", type=int, choices=(1, 2), default=1)
    p.add_argument("--budgets", default="16", help="DDTREE budgets")
    p.add_argument("--concurrency", default="1,2,4,8", help="bench_serving's levels (at most 8 requests run at once)")
    p.add_argument("--num-prompts", type=int, default=16, help="requests per level")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--check-prompts", type=int, default=8, help="greedy requests each server answers for the lossless check")
    p.add_argument("--check-new-tokens", type=int, default=64, help="new tokens of each greedy check request")
    p.add_argument("--port", type=int, default=30000, help="the first server's port; each next one takes the next port")
    p.add_argument("--start-timeout", type=float, default=300, help="seconds a server may take to answer /health")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--work", type=Path, default=Path("/tmp/sglang_dflash_live"))
    args = p.parse_args(argv)
    hargs = h.parse_args(["--tp", str(args.tp), "--site", str(args.site), "--work", str(args.work), "--pair", "shipped",
                          "--budgets", args.budgets, "--speculative-algorithm", "DFLASH", "DDTREE"])  # fmt: skip
    out = args.out or Path(os.environ.get("OUT") or args.work / "out")
    (out / "serving").mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    log = h.Log(out / "live_server.log")
    install = h.install_wheels(args.site, log)
    target, draft = h.build_checkpoints(args.work, hargs, log)
    h.finish_install(install, log)
    env = h.sglang_env(args.site, hargs.sglang_dtype, log)
    prompts = prompts_file(args.work / "prompts.jsonl", 16, hargs.seed)
    runs = h.sglang_runs(hargs, target, draft)
    for i, run in enumerate(runs):  # an HTTP server that tokenizes (the target folder has the pair's tokenizer)
        # grammar_backend none: xgrammar is not carried (and the workers refuse grammar-constrained requests)
        run.engine_kwargs.update(skip_tokenizer_init=False, host="127.0.0.1", port=args.port + i, grammar_backend="none")
    # one server at a time per group of --tp GPUs (two side by side at TP=1 on two GPUs), as harness.py's queues
    import torch

    groups = h.gpu_groups(args.tp, torch.cuda.device_count())

    check_prompts = h.text_prompts(args.check_prompts, hargs.seed)
    checks = {run.name: h.Run(run.name, 1, extra=dict(prompts=check_prompts)) for run in runs}

    def group_runs(i: int) -> dict[str, bool]:
        genv = env if groups[i] is None else dict(env, CUDA_VISIBLE_DEVICES=groups[i])
        return {run.name: serve_and_bench(run, genv, args, prompts, out, log, checks[run.name]) for run in runs[i :: len(groups)]}

    with ThreadPoolExecutor(len(groups)) as pool:
        finished = {k: v for part in pool.map(group_runs, range(len(groups))) for k, v in part.items()}
    ok = [finished[run.name] for run in runs]
    done = [out / "serving" / f"{run.name}.json" for run, good in zip(runs, ok) if good]
    if done:
        subprocess.run([sys.executable, str(BENCH), "--compare", *map(str, done), "--out", str(out / "serving")], env=env)
        print((out / "serving" / "compare.md").read_text() if (out / "serving" / "compare.md").exists() else "")
    lossless = judge(target, list(checks.values()), args, out, log)
    log.stamp(f"verdict: {sum(ok)}/{len(runs)} servers benchmarked" + ("" if all(ok) else " (see the server logs)"))
    return 0 if all(ok) and lossless else 1


if __name__ == "__main__":
    sys.exit(main())
