"""Small standalone engine: AR / DFLASH / DDTREE as one generate loop over draft trees."""

from .loop import ALGOS, GenerationResult, generate

__all__ = ["ALGOS", "GenerationResult", "generate"]
