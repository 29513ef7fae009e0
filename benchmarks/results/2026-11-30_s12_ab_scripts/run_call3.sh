#!/usr/bin/env bash
# session 12, GPU call 3: vocabulary pass (compaction tile 8192 / 4096, 16 warps) and tree build (pair keys,
# positions written) A/B; build + accept with LA 2 (the working tree) and LA 4
set -u
L=$OUT
echo "== ab build"; timeout 120 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py build main=ab/main s12=ab/s12 t4096=ab/t4096 --out $L > $L/ab_build.log 2>&1; echo rc $?
echo "== ddtree LA2"; timeout 120 env PYTHONPATH=$PWD python3 benchmarks/bench_ddtree.py --out $L --requests 1,8 --budgets 16,64 > $L/ddtree_la2.log 2>&1; echo rc $?
mkdir -p $L/la4
env PYTHONPATH=$PWD/ab/la4:$PWD python3 -c "import sglang_dflash.kernels.tree_walk.path_argmax as p; print(\"LA4 run imports\", p.__file__, p.LOOKAHEAD)"
echo "== ddtree LA4"; timeout 120 env PYTHONPATH=$PWD/ab/la4:$PWD python3 benchmarks/bench_ddtree.py --out $L/la4 --requests 1,8 --budgets 16,64 > $L/ddtree_la4.log 2>&1; echo rc $?
cp $L/la4/ddtree_bench.json $L/ddtree_bench_la4.json 2>/dev/null
cd $L && tar czf logs.tgz *.log *.json 2>/dev/null
echo "== summary"; cat $L/ab_build.log; tail -7 $L/ddtree_la2.log; tail -7 $L/ddtree_la4.log
