"""Names shared by the SGLang-facing modules and the plugin (a leaf: it imports nothing of ours).

Our algorithms go by names of their own, so that they never collide with SGLang's: `DDTREE` (tree verify) and
`DFLASH_CHAIN` (our chain verify). `DFLASH` is SGLang's own; on 0.5.11 it means `DFLASH_CHAIN` where the user opts
in (SGLANG_DFLASH_OVERRIDE_DFLASH=1).
"""

DDTREE = "DDTREE"
DFLASH_CHAIN = "DFLASH_CHAIN"
DFLASH = "DFLASH"  # SGLang's own; DFLASH_CHAIN where the user opts in (`canonical_name`)
ALGORITHMS = (DFLASH_CHAIN, DDTREE)  # the names our workers serve under, after server-argument resolution

# Set on our EagleVerifyInput: the number of real requests in the verify batch (read by the graph-replay fix).
NUM_REQS_ATTR = "sglang_dflash_num_reqs"


def resolved(args):
    """Server arguments as resolved. SGLang 0.5.23 keeps the command line's values in ServerArgs' fields and what its
    resolution decided beside them (`resolved_view` reads both); earlier releases resolve in place."""
    if not hasattr(args, "_resolved_overrides"):
        return args
    from sglang.srt.arg_groups.model_override_base import ResolvedView, resolved_view

    return args if isinstance(args, ResolvedView) else resolved_view(args)  # a view already: as it is


def canonical_name(name, override_dflash: bool) -> str | None:
    """Our algorithm's name for `--speculative-algorithm name`, or None where the name is not ours."""
    if not isinstance(name, str):
        return None
    upper = name.upper()
    if upper in ALGORITHMS:
        return upper
    if upper == DFLASH and override_dflash:
        return DFLASH_CHAIN
    return None
