"""sglang-dflash: DFLASH and DDTREE speculative decoding for SGLang, lossless, for hybrid GDN models."""

__version__ = "0.1.0"
