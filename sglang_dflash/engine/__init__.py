"""Small standalone engine: AR / DFLASH / DDTREE as one generate loop over draft trees."""

from .load import load_pair, load_tokenizer, tiny_pair
from .loop import ALGOS, GenerationResult, generate

__all__ = ["ALGOS", "GenerationResult", "generate", "load_pair", "load_tokenizer", "tiny_pair"]
