"""Everything that imports SGLang, in two parts that never import in a circle:

- modules written as they would be upstream (`worker_common`, `ddtree_worker`, `ddtree_worker_v2`,
  `tree_gdn_backend`, `hidden_capture`, `memory_plan`, `server_args`, `verify_io`, `vocab_parallel`, `draft_model`,
  `algorithm`), which patch nothing;
- `plugin/`, the only code that changes SGLang's classes: the per-release table of everything it touches, the
  hooks, and how it reaches each SGLang process (an entry point, or a .pth bootstrap where SGLang has no loader).

`names` (shared constants) is a leaf both import. Importing this package does not import SGLang.
"""
