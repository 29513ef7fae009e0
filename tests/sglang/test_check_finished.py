"""A spec-v2 step's accepted tokens finish a request where stock decode, one token a step, finishes it.

The oracle is SGLang's own `Req.check_finished` called after every single token, as stock decode calls it; the hook
(`patches.check_finished`) gets a whole step of tokens at once. Found by the GPU serving suite: on 0.5.11, stop
strings completed early in an accepted path were missed (requests ran to max_new_tokens) or emitted past.

SGLang's runtime modules import `sgl_kernel`; the import-only stand-in goes first on sys.path where the real one is
missing. Nothing here calls into it.
"""

from __future__ import annotations

import random

import pytest
from paths import ROOT, use_sgl_kernel_stand_in

from sglang_dflash.sglang.plugin import patches
from sglang_dflash.sglang.plugin.activate import installed_version
from sglang_dflash.sglang.plugin.versions import release

pytestmark = pytest.mark.sglang

pytest.importorskip("sglang", reason="SGLang is installed by tests/setup_env.sh")
RELEASE = release(installed_version() or "")
if RELEASE is None:
    pytest.skip(f"SGLang {installed_version()} is not a supported release", allow_module_level=True)

TEXT = "the end of the line is near. stop here, then go on to the next one and the end of it."


@pytest.fixture(scope="module")
def sglang_req():
    use_sgl_kernel_stand_in()
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.sampling.sampling_params import SamplingParams
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(ROOT / "sglang_dflash/assets/tiny-pair/target")

    tokenizer.additional_stop_token_ids = None  # SGLang's tokenizer wrapper has it; transformers' has not
    assert tokenizer.eos_token_id not in tokenizer.encode(TEXT, add_special_tokens=False)

    def make(**params) -> Req:
        sp = SamplingParams(temperature=0.0, **params)
        sp.normalize(tokenizer)
        req = Req("r", "x", [1, 2], sp)
        req.tokenizer, req.vocab_size = tokenizer, len(tokenizer)
        return req

    return make, tokenizer


def sglang_check():
    """SGLang's finish check of a request after new tokens (0.5.23 renamed it)."""
    from sglang.srt.managers.schedule_batch import Req

    return getattr(Req, "check_finished", None) or Req.update_finish_state


def stock(make, params, tokens):
    """SGLang's check after each token: (tokens emitted, finish reason) as stock decode ends the request."""
    req = make(**params)
    for t in tokens:
        req.output_ids.append(t)
        sglang_check()(req)
        if req.finished():
            break
    return req.output_ids[: req.finished_len or len(req.output_ids)], type(req.finished_reason).__name__


def in_steps(check, make, params, tokens, steps):
    """The spec-v2 output processing: each step's accepted tokens appended, then one check with their count. The
    request keeps its output_ids object and every token of the step (an out-of-vocabulary one rewritten)."""
    req, at = make(**params), 0
    ids = req.output_ids
    for n in steps:
        ids.extend(tokens[at : at + n])
        at += n
        check(req, n)
        assert req.output_ids is ids and len(ids) == at
        assert all(a == b or b >= req.vocab_size for a, b in zip(ids, tokens))
        if req.finished():
            break
    return req.output_ids[: req.finished_len or len(req.output_ids)], type(req.finished_reason).__name__


def cases(tokenizer, count=210, seed=0):
    """(params, tokens, step sizes): word tokens with a stop string, regex, stop id, EOS (the length cap in the same
    step) or an out-of-vocabulary token landing anywhere in a step."""
    rng = random.Random(seed)
    words = tokenizer.encode(TEXT, add_special_tokens=False)
    stop_ids = tokenizer.encode(" the end.", add_special_tokens=False)
    for i in range(count):
        tokens = [rng.choice(words) for _ in range(rng.randint(8, 40))]
        at = rng.randint(0, len(tokens))
        tokens[at:at] = stop_ids  # at least one match (random words may hold more)
        eos, oov = rng.randint(0, len(tokens) - 1), rng.randint(0, len(tokens) - 1)
        params = [
            dict(stop=[" the end"]),
            dict(stop_regex=[r"end\."]),
            dict(stop=[" near", "go on", "end."]),
            dict(stop=["line", "e end"], stop_token_ids=[rng.choice(words)]),
            dict(stop=[" the end"], max_new_tokens=at),
            dict(max_new_tokens=eos + rng.randint(1, 4)),
            dict(stop=[" the end"]),
        ][i % 7]
        if i % 7 == 5:
            tokens[eos] = tokenizer.eos_token_id
        elif i % 7 == 6:
            tokens[oov] = len(tokenizer) + 5  # SGLang's NaN check rewrites it and finishes there
        steps, left = [], len(tokens)
        while left > 0:
            steps.append(min(left, rng.randint(1, 16)))
            left -= steps[-1]
        yield params, tokens, steps


def test_a_step_finishes_where_stock_decode_does(sglang_req):
    """Through the hook; SGLang's check alone gets some wrong on every supported release (0.5.11 many, and an EOS in a
    step that crosses max_new_tokens; 0.5.23 where a later-listed stop string completes after an earlier-listed
    one)."""
    make, tokenizer = sglang_req
    check = sglang_check()
    hooked = lambda req, n: patches.check_finished(check, req, n)  # noqa: E731
    differs = 0
    for params, tokens, steps in cases(tokenizer):
        if params.get("max_new_tokens") == 0:
            continue
        want = stock(make, params, tokens)
        assert want[1] != "NoneType", (params, tokens)  # every case finishes
        assert in_steps(hooked, make, params, tokens, steps) == want, (params, tokens, steps)
        differs += in_steps(check, make, params, tokens, steps) != want
    assert differs > 0  # the cases reach the release's miss


def test_steps_checking_all_at_once_gets_right_go_straight_to_sglang(sglang_req):
    """One-token steps, and steps of requests without stop strings that stay under max_new_tokens."""
    make, _ = sglang_req
    calls = []
    req = make(stop_token_ids=[7], max_new_tokens=8)
    req.output_ids.extend([5, 7, 9])
    patches.check_finished(lambda r, n: calls.append(n), req, 3)
    req = make(stop=["x"])
    req.output_ids.append(5)
    patches.check_finished(lambda r, n: calls.append(n), req, 1)
    assert calls == [3, 1]
