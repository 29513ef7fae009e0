"""Helpers shared by the kernel tests: devices, poisoned outputs, random trees and GDN inputs."""

import contextlib

import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@contextlib.contextmanager
def poisoned_outputs():
    """torch.empty returns garbage that no correct output equals (e.g. -7 for a parent index)."""
    real = torch.empty

    def empty(*size, dtype=None, device=None, **kw):
        t = real(*size, dtype=dtype, device=device, **kw)
        return t.fill_(True if t.dtype == torch.bool else -7)

    torch.empty = empty
    try:
        yield
    finally:
        torch.empty = real


def random_parents(R: int, N: int, gen: torch.Generator, chain: bool = False, max_depth: int | None = None) -> torch.Tensor:
    """Long [R, N], -1 at the root: a chain, or each node's parent drawn among the earlier nodes above max_depth."""
    if chain:
        return (torch.arange(N) - 1).expand(R, N).clone()
    parents = torch.full((R, N), -1)
    if max_depth is None:
        for i in range(1, N):
            parents[:, i] = torch.randint(0, i, (R,), generator=gen)
        return parents
    depth = torch.zeros(R, N, dtype=torch.long)
    for r in range(R):
        for i in range(1, N):
            open_ = torch.nonzero(depth[r, :i] < max_depth)[:, 0]
            p = open_[torch.randint(len(open_), (1,), generator=gen)]
            parents[r, i], depth[r, i] = p, depth[r, p] + 1
    return parents


def root_path(parents: torch.Tensor, r: int, i: int) -> list[int]:
    path = [i]
    while parents[r, path[-1]] > 0:
        path.append(parents[r, path[-1]].item())
    return ([0] if i != 0 else []) + path[::-1]


def accepted_paths(parents: torch.Tensor, width: int, gen: torch.Generator | None = None) -> torch.Tensor:
    """Long [R, width]: each request's root path, to a random node (gen) or else to its last node,
    cut to `width` nodes and padded -1 (the layout of `Acceptance.accepted_nodes`)."""
    R, N = parents.shape
    accepted = torch.full((R, width), -1)
    for r in range(R):
        end = torch.randint(0, N, (1,), generator=gen).item() if gen is not None else N - 1
        path = root_path(parents, r, end)[:width]
        accepted[r, : len(path)] = torch.tensor(path)
    return accepted


def gdn_inputs(R, N, H, HV, K, V, pool_size, gen, dtype=torch.float64):
    rnd = lambda *s: torch.randn(*s, generator=gen, dtype=dtype)  # noqa: E731
    return dict(
        q=rnd(R, N, H, K),
        k=rnd(R, N, H, K),
        v=rnd(R, N, HV, V),
        a=rnd(R, N, HV),
        b=rnd(R, N, HV),
        A_log=rnd(HV) * 0.5,
        dt_bias=rnd(HV) * 0.5,
        state_pool=rnd(pool_size, HV, V, K) * 0.3,
    )
