set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/fla_core*.whl > /dev/null 2>&1
PYTHONPATH=$PWD/ab/new:$PWD:/tmp/site timeout 390 python3 benchmarks/kernels/bench_tree_gdn.py .whl/sglang-0.5.10.post1-py3-none-any.whl > $OUT/bench_tree_gdn_constexpr.log 2>&1; echo bench rc $?
PYTHONPATH=$PWD/ab/new:$PWD timeout 110 python3 benchmarks/results/2026-12-02_s25_scripts/gdn_r8_bv.py > $OUT/gdn_r8_bv_new.log 2>&1; echo bv rc $?; cat $OUT/gdn_r8_bv_new.log
grep -v "^{" $OUT/bench_tree_gdn_constexpr.log | cut -c1-170
