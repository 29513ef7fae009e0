"""Every SGLANG_DFLASH_* environment switch, in one place (a leaf module: it imports nothing of the package).

Each switch is read when it is used, never at import, so a test or a launcher may set it late.

| variable | values | default | what it does |
|---|---|---|---|
| SGLANG_DFLASH_DISABLE | 1 | unset | the plugin leaves SGLang untouched (every process) |
| SGLANG_DFLASH_OVERRIDE_DFLASH | 1 | unset | on SGLang with a built-in DFLASH (0.5.11): `DFLASH` runs our chain worker |
| SGLANG_DFLASH_TREE_ATTENTION | 0 / 1 / auto | auto | full-attention verify through our tree attention (auto: measured faster) |
| SGLANG_DFLASH_DRAFT_GRAPHS | 0 / 1 | 1 | the drafter pass as CUDA graphs |
| SGLANG_DFLASH_WIDTHS | off / auto / n,n,.. | off | verify widths chosen per step by cost (auto: 1, 2, 4, .. up to the flag's) |
| SGLANG_DFLASH_DRAFT_MAX_LEN | int | min(context, 8192) | positions per request the drafter reads |
| SGLANG_DFLASH_DRAFT_TP | 0 / 1 | 1 | shard the drafter over the TP ranks where its heads split; 0: replicate |
| SGLANG_DFLASH_DEBUG_STEPS | int | 0 | log this many verify steps |
| SGLANG_DFLASH_PROFILE | file | unset | per-phase step times to this JSON file (TP rank 0) |
| SGLANG_DFLASH_PROFILE_KERNELS | int | 0 | with PROFILE: list the kernels of each batch size's K-th step |
| SGLANG_DFLASH_COMPILE | 0 / 1 | 1 | torch.compile of the models' elementwise glue on GPU |
| SGLANG_DFLASH_PDL | 0 / 1 | 1 | programmatic dependent launch in the Triton kernels |
"""

from __future__ import annotations

import os


class Switch:
    """One environment variable: its name, default and the values it accepts (None: any)."""

    def __init__(self, name: str, default: str | None, choices: tuple[str, ...] | None = None):
        self.name, self.default, self.choices = name, default, choices

    def get(self) -> str | None:
        value = os.environ.get(self.name, self.default)
        if self.choices is not None and value is not None and value not in self.choices:
            raise ValueError(f"{self.name}={value!r}: expected one of {', '.join(self.choices)}")
        return value

    def on(self) -> bool:
        """For 0/1 switches: anything but "0" (and unset with default "1") is on."""
        return self.get() not in (None, "0")

    def integer(self, default: int) -> int:
        value = os.environ.get(self.name)
        if value in (None, ""):
            return default
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{self.name}={value!r}: expected an integer") from None

    def __repr__(self) -> str:
        return f"Switch({self.name})"


DISABLE = Switch("SGLANG_DFLASH_DISABLE", None)
OVERRIDE_DFLASH = Switch("SGLANG_DFLASH_OVERRIDE_DFLASH", "0")
TREE_ATTENTION = Switch("SGLANG_DFLASH_TREE_ATTENTION", "auto", ("0", "1", "auto"))
DRAFT_GRAPHS = Switch("SGLANG_DFLASH_DRAFT_GRAPHS", "1")
WIDTHS = Switch("SGLANG_DFLASH_WIDTHS", "off")
DRAFT_MAX_LEN = Switch("SGLANG_DFLASH_DRAFT_MAX_LEN", None)
DRAFT_TP = Switch("SGLANG_DFLASH_DRAFT_TP", "1")
DEBUG_STEPS = Switch("SGLANG_DFLASH_DEBUG_STEPS", None)
PROFILE = Switch("SGLANG_DFLASH_PROFILE", None)
PROFILE_KERNELS = Switch("SGLANG_DFLASH_PROFILE_KERNELS", None)
COMPILE = Switch("SGLANG_DFLASH_COMPILE", "1")
PDL = Switch("SGLANG_DFLASH_PDL", "1")

ALL = (DISABLE, OVERRIDE_DFLASH, TREE_ATTENTION, DRAFT_GRAPHS, WIDTHS, DRAFT_MAX_LEN, DRAFT_TP, DEBUG_STEPS, PROFILE,
       PROFILE_KERNELS, COMPILE, PDL)  # fmt: skip


def disabled() -> bool:
    return os.environ.get(DISABLE.name) == "1"
