"""Everything that imports SGLang, in two parts that never import in a circle:

- modules written as they would be upstream (`worker_common`, `ddtree_worker_v2`, `ddtree_worker_v2_0511`,
  `tree_gdn_backend`, `hidden_capture`, `memory_plan`, `server_args`, `verify_io`, `vocab_parallel`,
  `algorithm`), which patch nothing;
- `plugin/`, the only code that changes SGLang's classes: the per-release table of everything it touches, the
  hooks, and the entry point through which it reaches each SGLang process.

`names` (shared constants) is a leaf both import. Importing this package does not import SGLang.
"""
