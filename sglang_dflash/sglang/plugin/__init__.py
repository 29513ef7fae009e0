"""The plugin: the only code that changes SGLang's classes.

- `versions`: one table per supported SGLang release naming every SGLang internal we patch (with the shape we
  expect) and the renamed fields the workers read.
- `patches`: the hooks themselves, each `hook(original, *args, **kwargs)` around one SGLang function.
- `activate`: checks a release's table against the installed SGLang, then applies its hooks (through SGLang's
  `HookRegistry`); on any mismatch it applies nothing and
  SGLang runs stock.
- `entry`: the `sglang.srt.plugins` entry point, which SGLang calls in every process it starts: how `activate` gets
  called there.

Nothing here is imported by the SGLang-facing modules beside this package (`..worker_common`, the workers and the rest).
"""
