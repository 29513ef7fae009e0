"""Every SGLANG_DFLASH_* switch lives in `sglang_dflash.env`: no other module names one, and env's table documents
each; a switch refuses values outside its choices with one line naming the variable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sglang_dflash import env

PKG = Path(env.__file__).parent
NAME = re.compile(r"SGLANG_DFLASH_[A-Z_]+")


def test_only_env_names_the_switches():
    outside = {str(p.relative_to(PKG)): sorted(set(NAME.findall(p.read_text()))) for p in PKG.rglob("*.py") if p.name != "env.py"}
    # docstrings and messages may mention a switch, but its value is read only through env (no os.environ lookup)
    readers = [
        str(p.relative_to(PKG))
        for p in PKG.rglob("*.py")
        if p.name != "env.py" and re.search(r"environ[^\n]*SGLANG_DFLASH", p.read_text())
    ]
    assert readers == []
    named = {n for names in outside.values() for n in names}
    assert named <= {s.name for s in env.ALL}, named - {s.name for s in env.ALL}


def test_every_switch_is_documented_once():
    doc = env.__doc__
    for switch in env.ALL:
        assert doc.count(f"| {switch.name} |") == 1, switch.name
    assert len(env.ALL) == len(re.findall(r"^\| SGLANG_DFLASH_", doc, re.M))


def test_switches_read_late_and_refuse_bad_values(monkeypatch):
    monkeypatch.delenv(env.TREE_ATTENTION.name, raising=False)
    assert env.TREE_ATTENTION.get() == "auto" and not env.OVERRIDE_DFLASH.on()
    monkeypatch.setenv(env.OVERRIDE_DFLASH.name, "1")
    assert env.OVERRIDE_DFLASH.on()
    monkeypatch.setenv(env.TREE_ATTENTION.name, "yes")
    with pytest.raises(ValueError, match="SGLANG_DFLASH_TREE_ATTENTION='yes': expected one of 0, 1, auto"):
        env.TREE_ATTENTION.get()
    monkeypatch.setenv(env.DRAFT_MAX_LEN.name, "12")
    assert env.DRAFT_MAX_LEN.integer(8192) == 12
    monkeypatch.setenv(env.DRAFT_MAX_LEN.name, "lots")
    with pytest.raises(ValueError, match="SGLANG_DFLASH_DRAFT_MAX_LEN='lots': expected an integer"):
        env.DRAFT_MAX_LEN.integer(8192)
