"""`around`: one hook applied to one class in place, as SGLang's HookRegistry applies an AROUND hook (for tests that
patch a single class in-process, without the registry's global state)."""

import functools
import inspect


def around(owner, name: str, hook) -> None:
    """owner.name <- a wrapper calling hook(original, *args, **kwargs); class- and static methods stay so."""
    raw = inspect.getattr_static(owner, name)
    original = raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        return hook(original, *args, **kwargs)

    kind = type(raw) if isinstance(raw, (classmethod, staticmethod)) else None
    setattr(owner, name, kind(wrapper) if kind else wrapper)
