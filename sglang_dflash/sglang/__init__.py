"""Everything that imports SGLang: registration, server arguments, workers, the drafter model.

Importing this package does not import SGLang. `bootstrap` (run by the installed
`sglang_dflash.pth` in every Python process) patches SGLang's classes lazily, when SGLang's own
modules are first imported; `plugin` is the entry point for SGLang versions with a plugin loader.
"""
