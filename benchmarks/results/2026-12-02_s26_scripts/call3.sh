set -u
export PYTHONPATH=$PWD
timeout 240 python3 benchmarks/ab_trees.py attention main=ab/main new=ab/splits --out $OUT > $OUT/ab_attention_splits.log 2>&1
echo ab rc $?; cut -c1-160 $OUT/ab_attention_splits.log
PYTHONPATH=$PWD/ab/splits:$PWD timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_tree_attention.py > $OUT/gpu_tests_attention_splits.log 2>&1
echo tests rc $?; tail -n 2 $OUT/gpu_tests_attention_splits.log
