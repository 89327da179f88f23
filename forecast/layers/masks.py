"""Attention patterns as pure functions: causal masks and the LogSparse pattern.

Convention: a boolean mask is ``True`` where a query MAY attend a key. Masks are
applied with boolean masking (``masked_fill(~mask, -inf)`` or SDPA's boolean
``attn_mask``), never by adding a large negative number: an additive ``-1e9``
overflows or leaks under half precision (see docs/pitfalls.md).

Causal alignment is "top-left", the same as ``scaled_dot_product_attention(...,
is_causal=True)``: query ``i`` may see keys ``j <= i``. For self-attention (L == S)
this is the usual lower triangle; when L > S the queries ``i >= S`` see every key.

The LogSparse pattern (Li et al., NeurIPS 2019), 0-based, is translation invariant:
query ``i`` attends key ``i - d`` for every offset ``d`` of :func:`logsparse_offsets`
with ``i - d >= 0``. Offset 0 is always in the pattern, so no row is ever empty.
"""

from __future__ import annotations

import torch

from forecast.checks import require_int

__all__ = [
    "causal_mask",
    "logsparse_mask",
    "logsparse_offsets",
    "logsparse_pattern_is_dense",
    "validate_logsparse_options",
]


def validate_logsparse_options(local_window: int, sub_len: int | None) -> None:
    """Raise :class:`ConfigError` unless the LogSparse options are usable.

    ``local_window`` is a count of steps (>= 0); ``sub_len`` is ``None`` (no restart)
    or a sub-sequence length >= 2. ``sub_len=1`` is rejected: the public
    implementations' default, it empties every row of their mask.
    """
    require_int("local_window", local_window, 0)
    require_int("sub_len", sub_len, 2, optional=True,
                hint="None: no restart; sub_len=1 would leave every query without keys")


def causal_mask(query_len: int, key_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean ``[L, S]`` mask, ``True`` where query ``i`` may see key ``j`` (``j <= i``)."""
    require_int("query_len", query_len, 1)
    require_int("key_len", key_len, 1)
    return torch.ones(query_len, key_len, dtype=torch.bool, device=device).tril()


def _log_steps(local_window: int, limit: int) -> list[int]:
    """Offsets ``0..w`` then ``w + 2^m`` (m >= 0), all below ``limit``."""
    offsets = list(range(min(local_window + 1, limit)))
    step = 1
    while local_window + step < limit:
        offsets.append(local_window + step)
        step *= 2
    return offsets


def logsparse_offsets(length: int, local_window: int = 0, sub_len: int | None = None) -> tuple[int, ...]:
    """Sorted distinct offsets ``d < length`` of the LogSparse pattern.

    Query ``i`` attends key ``i - d`` for each offset with ``i - d >= 0``.

    * ``local_window=0, sub_len=None`` is the paper's pattern: ``{0} ∪ {2^m}``, i.e.
      query ``i`` sees ``i`` and ``i - 2^m`` for ``0 <= m <= floor(log2 i)``.
    * ``local_window=w`` adds dense local attention: offsets ``0..w`` and then log
      steps measured from the window's edge, ``w + 2^m``. ``w=0`` is the plain pattern.
    * ``sub_len=s`` is the paper's restart attention: the pattern above, cut to
      offsets ``< s``, restarts every ``s`` steps back: offsets ``k*s + d`` for
      ``k >= 0``. Each query therefore sees ``O((L/s) log s)`` keys, ``O(log L)`` when
      ``s`` grows in proportion to ``L`` as the paper prescribes. This periodic
      reading follows the reference code's ``row_mask``; its extra rule that makes
      early rows dense is not reproduced.
    """
    require_int("length", length, 1)
    validate_logsparse_options(local_window, sub_len)
    if sub_len is None:
        return tuple(_log_steps(local_window, length))
    within = _log_steps(local_window, sub_len)
    offsets = {start + offset for start in range(0, length, sub_len) for offset in within}
    return tuple(sorted(offset for offset in offsets if offset < length))


def logsparse_pattern_is_dense(local_window: int, sub_len: int | None) -> bool:
    """Whether restart attention with these options sees every past key (dense causal).

    With a small ``sub_len`` the restarted pattern covers every offset, so "LogSparse"
    silently becomes dense causal attention at quadratic cost.
    """
    validate_logsparse_options(local_window, sub_len)
    if sub_len is None:
        return False
    return len(_log_steps(local_window, sub_len)) == sub_len


def logsparse_mask(
    length: int,
    local_window: int = 0,
    sub_len: int | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Dense boolean ``[L, L]`` LogSparse mask (``True`` = may attend).

    Only for references, plotting and the SDPA comparison in the benchmark: the fast
    attention path never builds it.
    """
    offsets = torch.tensor(logsparse_offsets(length, local_window, sub_len), device=device)
    positions = torch.arange(length, device=device)
    distance = positions[:, None] - positions[None, :]  # [L, L]: query i minus key j
    return torch.isin(distance, offsets)
