"""The one lossless verdict for greedy runs, fixed before any run: a speculative run's tokens equal stock SGLang's at the
same dtype and batch size; where a prompt's tokens differ, the first differing position must be a near tie of stock's
own logits there (top-1 minus top-2 below NEAR_TIE, read from stock's own top-2 logprobs: the prefix up to that
position is the same in both runs, so it is the very choice the speculative run made the other way). Anything else
fails: a difference past a clear margin, outputs of different lengths that agree where both have tokens, a prompt
without an output or without stock's margin at the differing position. After the first difference the runs continue
from different prefixes: nothing later is compared.

NEAR_TIE comes from the float32 comparison, not from any run: stock SGLang bf16 against float32 transformers turned
tokens only where transformers' top-1 - top-2 margin was at most 0.47 (RESULTS, the random tiny pair); 0.5 covers it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NEAR_TIE = 0.5  # logits


@dataclass
class Verdict:
    ok: bool
    prompts: int
    equal: int  # prompts whose tokens equal stock's
    ties: list[tuple[int, int, float]] = field(default_factory=list)  # (prompt, position, stock's margin) differences
    failures: list[str] = field(default_factory=list)
    names: list[str] | None = None  # what the summary calls each prompt (default p<i>)

    def summary(self) -> str:
        head = f"{self.equal}/{self.prompts} prompts equal to stock"
        if self.ties:
            name = lambda i: self.names[i] if self.names else f"p{i}"  # noqa: E731
            head += "; first differences at near ties " + ", ".join(f"{name(i)}@{j} (m {m:.3g})" for i, j, m in self.ties)
        return head + ("" if self.ok else "; FAILED: " + "; ".join(self.failures))


def top2_margins(top_logprobs: list) -> list[float]:
    """Top-1 minus top-2 logit at each output position, from SGLang's `output_top_logprobs` (per position, the two
    most likely tokens' (logprob, token id, text)); logprob differences are logit differences."""
    return [row[0][0] - row[1][0] for row in top_logprobs]


def judge(
    ours: list[list[int]] | None,
    stock: list[list[int]] | None,
    stock_margins: list[list[float]] | None,
    names: list[str] | None = None,
) -> Verdict:
    """ours, stock: each prompt's greedy output tokens (same prompts, dtype and batch size); stock_margins: stock's
    top-1 - top-2 logit at each of its output positions (`top2_margins`); names: what failures call each prompt
    (default "prompt i")."""
    if ours is None or stock is None:
        return Verdict(False, 0, 0, failures=["no output" if ours is None else "no stock output to compare with"])
    v = Verdict(True, len(stock), 0, names=names)
    if len(ours) != len(stock):
        v.failures.append(f"{len(ours)} outputs for {len(stock)} prompts")
    for i, (a, b) in enumerate(zip(ours, stock)):
        name = names[i] if names else f"prompt {i}"
        if a == b:
            v.equal += 1
            continue
        p = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), None)
        if p is None:
            v.failures.append(f"{name}: {len(a)} tokens, stock {len(b)}, equal where both have one")
            continue
        margins = stock_margins[i] if stock_margins is not None and i < len(stock_margins) else []
        if p >= len(margins):
            v.failures.append(f"{name}: differs at {p}, stock's margin there unknown")
        elif margins[p] < NEAR_TIE:
            v.ties.append((i, p, margins[p]))
        else:
            v.failures.append(f"{name}: token {a[p]} at {p}, stock {b[p]} with margin {margins[p]:.3g} >= {NEAR_TIE}")
    v.ok = not v.failures
    return v
