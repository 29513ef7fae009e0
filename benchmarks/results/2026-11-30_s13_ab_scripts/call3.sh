#!/usr/bin/env bash
# Session 13, call 3: same-run A/B of untracked variant trees under ab/ (see RESULTS.md, session 13):
#   build: main, g8k / g16k (chunk statistics GROUP 8192 / 16384), g16kw16 (16384 at 16 warps), tg (tree build's beam
#          kept in registers, tl.gather)
#   walk:  main, w8 / w32 (the path walk at 8 / 32 warps per program)
set -u
L=$OUT
echo "== build"; timeout 200 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py build main=ab/main g8k=ab/g8k g16k=ab/g16k g16kw16=ab/g16kw16 tg=ab/tg --out $L > $L/ab_build.log 2>&1; echo rc $?
echo "== walk"; timeout 300 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py walk main=ab/main w8=ab/w8 w32=ab/w32 --out $L > $L/ab_walk.log 2>&1; echo rc $?
cd $L && tar czf logs.tgz *.log *.json 2>/dev/null
echo "== summary"; grep -v "^main:\|^g\|^tg:\|^w" $L/ab_build.log | tail -12; grep -v "^main:\|^w8:\|^w32:" $L/ab_walk.log | tail -10
