"""Models of the standalone engine: the Qwen3.5/3.6 hybrid target and the z-lab DFlash drafter (plain torch)."""

from .config import DraftConfig, PairError, TargetConfig, check_pair, default_target_layer_ids, read_config
from .qwen3_5 import Qwen3_5Target, TargetCache, VerifyOutput

__all__ = [
    "DraftConfig",
    "PairError",
    "Qwen3_5Target",
    "TargetCache",
    "TargetConfig",
    "VerifyOutput",
    "check_pair",
    "default_target_layer_ids",
    "read_config",
]
