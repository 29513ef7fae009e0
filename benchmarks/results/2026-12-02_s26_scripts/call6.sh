set -u
export PYTHONPATH=$PWD
timeout 200 python3 benchmarks/ab_trees.py attention main=ab/main a2=ab/auto2 a3=ab/auto3 --out $OUT > $OUT/ab_attention_auto.log 2>&1
echo ab rc $?; cut -c1-160 $OUT/ab_attention_auto.log
for t in auto2 auto3; do
PYTHONPATH=$PWD/ab/$t:$PWD timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_tree_attention.py > $OUT/gpu_tests_attention_$t.log 2>&1
echo tests $t rc $?; tail -n 1 $OUT/gpu_tests_attention_$t.log
done
