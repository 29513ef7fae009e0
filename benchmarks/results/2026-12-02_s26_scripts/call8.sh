set -u
export PYTHONPATH=$PWD
timeout 150 python3 ab/attn_r.py main=ab/main new=ab/final > $OUT/attn_r_final.log 2>&1; echo r rc $?; cat $OUT/attn_r_final.log
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_tree_attention.py tests/test_engine.py -k "attention or cuda_generate" > $OUT/gpu_tests_final.log 2>&1
echo tests rc $?; tail -n 1 $OUT/gpu_tests_final.log
