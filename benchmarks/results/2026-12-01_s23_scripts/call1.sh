#!/usr/bin/env bash
# For session 23's first call (written in session 22, not run: no device time left). About 5 minutes, ab/ travels as
# untracked files. vocab_key32.patch: the row top-k's choice of the K chunks with the largest maxima on int32 keys for
# bf16 / fp16 logits (a chunk maximum is a 16-bit value: its low 16 (bf16) or 13 (fp16) fp32 bits are all equal in the
# ordered form, so the chunk index takes their place) instead of int64 keys; fp32 logits keep int64. ptxas (Triton
# 3.8, sm_90a, R = 8 x 15 rows, B = 64): 3,376 -> 3,016 instructions, 122 registers either way. CPU tests (with the
# bf16 / fp16 cases added in session 22): `-k draft_top_k` 22 passed; a mutation of the index bits fails them.
# walk_held.patch: the pair-reading walk keeps, per row, the block that first held its maximum in registers
# (`held`, a select per block) and takes the index from it, instead of reading that block again from L2 after the
# span. A third tile of registers: at [8, 4096] blocks ptxas (sm_90a) gives 255 registers and 176 B of spills (HEAD
# 230, none), so `held2k` is the same with MAX_BLOCK 8192 ([8, 2048] blocks): 228 registers, no spills, 2,520 ->
# 1,832 instructions. The interpreter does not run the pairs: the GPU walk tests are its tests.
# First, on the CPU machine:
#   D=benchmarks/results/2026-12-01_s22_scripts; rm -rf ab && mkdir -p ab/main && git archive HEAD sglang_dflash \
#     | tar -x -C ab/main && rm -rf ab/main/sglang_dflash/assets/tiny-pair && cp -r ab/main ab/key32 \
#     && patch -s -p1 -d ab/key32 < $D/vocab_key32.patch && cp -r ab/main ab/held && cp -r ab/main ab/held2k \
#     && patch -s -p1 -d ab/held < $D/walk_held.patch && patch -s -p1 -d ab/held2k < $D/walk_held.patch \
#     && sed -i 's/^MAX_BLOCK = 16384 /MAX_BLOCK = 8192 /' ab/held2k/sglang_dflash/kernels/tree_walk/path_argmax.py
set -u
L=$OUT
export PYTHONPATH=$PWD
D=benchmarks/results/2026-12-01_s22_scripts
timeout 150 python3 benchmarks/ab_trees.py build main=ab/main key32=ab/key32 --out $L > $L/ab_build.log 2>&1; echo build rc $?
timeout 200 python3 benchmarks/ab_trees.py walk main=ab/main held=ab/held held2k=ab/held2k --out $L > $L/ab_walk.log 2>&1; echo walk rc $?
git apply $D/vocab_key32.patch; echo patch rc $?
timeout 100 python3 -m pytest -q tests/test_triton_tree_kernels.py -k "draft_top_k" > $L/tests_vocab.log 2>&1; echo tests rc $?
git apply $D/walk_held.patch; echo patch rc $?
timeout 100 python3 -m pytest -q tests/test_triton_tree_kernels.py tests/test_ddtree.py -k "walk or greedy" > $L/tests_walk.log 2>&1; echo tests rc $?
timeout 150 python3 benchmarks/bench_ddtree.py --requests 1,8 --budgets 16,64 --out $L > $L/ddtree.log 2>&1; echo ddtree rc $?
echo "== summary"; grep "vocabulary" $L/ab_build.log; tail -1 $L/tests_vocab.log; tail -1 $L/tests_walk.log
python3 -c "
import json
for c in json.load(open('$L/ab_trees_walk.json')):
    u = c['us']; print(f\"{c['case']:34s}\", '  '.join(f'{k}:{v:.1f}' for k, v in u.items() if 'LA8' in k), ' '.join(set(c['check'].values())))"
tail -5 $L/ddtree.log
