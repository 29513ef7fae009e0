set -u
export PYTHONPATH=$PWD
timeout 200 python3 benchmarks/ab_trees.py attention main=ab/main new=ab/auto --out $OUT > $OUT/ab_attention_auto.log 2>&1
echo ab rc $?; cut -c1-160 $OUT/ab_attention_auto.log
PYTHONPATH=$PWD/ab/auto:$PWD timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_tree_attention.py > $OUT/gpu_tests_attention_auto.log 2>&1
echo tests rc $?; tail -n 2 $OUT/gpu_tests_attention_auto.log
timeout 120 python3 ab/chain_settle.py > $OUT/chain_settle.log 2>&1; echo chain rc $?; cat $OUT/chain_settle.log
