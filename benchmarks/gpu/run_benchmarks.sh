#!/usr/bin/env bash
# Every GPU figure of benchmarks/RESULTS.md again, in one device call (about 6-7 minutes on an H200):
# tree build + accept, the tree kernels beside SGLang 0.5.10.post1's, and the standalone engine's 27B-shard step.
# Logs under $OUT, then the tables.
#
# Needs, carried in .whl/ (git-ignored; device call with carry [".whl"]):
#   .whl/sglang-0.5.10.post1-py3-none-any.whl   (the peer kernels are loaded from it)
#   .whl/fla_core-*.whl                          (SGLang's GDN kernels import fla)
# Usage, on the device:  bash benchmarks/gpu/run_benchmarks.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/bench_out}
mkdir -p "$OUT"
wheel=$(ls .whl/sglang-0.5.10.post1-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] && [ -f "$wheel" ] || { echo "missing in .whl/: see this script's header" >&2; exit 2; }
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/fla_core*.whl >/dev/null 2>&1
run() {  # name, seconds, command...
    local name=$1 limit=$2
    shift 2
    echo "== $name" >&2
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1 || echo "$name: exit $? (see $OUT/$name.log)" >&2
}
export PYTHONPATH=$PWD
run ddtree 90 python3 benchmarks/bench_ddtree.py --out "$OUT"
PYTHONPATH=$PWD:/tmp/site run tree_gdn 150 python3 benchmarks/kernels/bench_tree_gdn.py "$wheel"
run tree_conv 60 python3 benchmarks/kernels/bench_tree_conv.py
run tree_attention 90 python3 benchmarks/kernels/bench_tree_attention.py
run step 200 python3 benchmarks/bench_step.py --out "$OUT"  # without fla: transformers is not used here
for name in ddtree tree_gdn tree_conv tree_attention step; do
    echo "---- $name"
    tail -n 14 "$OUT/$name.log"
done
