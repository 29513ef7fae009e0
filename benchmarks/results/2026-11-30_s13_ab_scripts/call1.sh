#!/usr/bin/env bash
# Session 13, call 1: session 12's script for this session's first call, unchanged (run with .whl/ carried).
exec bash "$(dirname "$0")/../2026-11-30_s12_ab_scripts/run_next_session.sh"
