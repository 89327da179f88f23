"""Attention kernels: full (SDPA), ProbSparse, LogSparse, and the multi-head wrapper.

Every inner attention module has the same contract::

    forward(queries [B, L, H, E], keys [B, S, H, E], values [B, S, H, E],
            need_weights: bool = False) -> out [B, L, H, E]   or   (out, weights)

``weights`` is meant for plotting and differs per module (see each class): a dense
``[B, H, L, S]`` tensor for :class:`FullAttention`, a :class:`ProbSparseWeights` and a
:class:`LogSparseWeights` for the sparse modules; both have ``to_dense()`` for small
``L``. Returned weights are the attention probabilities before dropout.

Causal alignment is top-left, as in ``scaled_dot_product_attention``: query ``i``
sees keys ``j <= i`` (see :mod:`forecast.layers.masks`).

Informer's ``mix`` option is deliberately not offered: its reshape treats
``[B, H, L, E]`` as ``[B, L, H, E]`` and scrambles heads with time steps.
"""

from __future__ import annotations

import inspect
import logging

from torch import nn

from forecast.errors import ConfigError
from forecast.layers.attention.autograd import (  # noqa: F401 (re-exported for the tests of the kernels)
    _CausalRunningAverage,
    _running_sum,
    _ShiftedScores,
    _ShiftedWeightedSum,
)
from forecast.layers.attention.full import FullAttention
from forecast.layers.attention.logsparse import LogSparseAttention, LogSparseWeights
from forecast.layers.attention.multihead import CausalConv1dProjection, MultiHeadAttention
from forecast.layers.attention.probsparse import (
    LAZY_FILLS,
    KeySample,
    ProbSparseAttention,
    ProbSparseWeights,
    draw_key_sample,
    sparsity_measurement,
)
from forecast.layers.attention.reference import dense_masked_attention

# -------------------------------------------------------------------------- registry

__all__ = [
    "ATTENTIONS",
    "LAZY_FILLS",
    "CausalConv1dProjection",
    "FullAttention",
    "KeySample",
    "LogSparseAttention",
    "LogSparseWeights",
    "MultiHeadAttention",
    "ProbSparseAttention",
    "ProbSparseWeights",
    "build_attention",
    "dense_masked_attention",
    "draw_key_sample",
    "sparsity_measurement",
]

logger = logging.getLogger(__name__)

ATTENTIONS: dict[str, type[nn.Module]] = {
    "full": FullAttention,
    "prob": ProbSparseAttention,
    "logsparse": LogSparseAttention,
}


def build_attention(name: str, *, causal: bool, dropout: float, **options: object) -> nn.Module:
    """Build an inner attention module by registry name (``"full"``, ``"prob"``, ``"logsparse"``).

    ``options`` are the class's other constructor arguments (``factor``, ``seed``,
    ``causal_lazy_fill`` for "prob"; ``local_window``, ``sub_len`` for "logsparse").
    LogSparse is causal by construction, so ``causal=False`` (an encoder's
    self-attention) still gets the causal pattern: a stricter mask is always valid,
    whereas a non-causal LogSparse would invent a pattern the paper does not have.
    Informer's ``mix`` option is refused: it scrambles heads and time steps.
    """
    if name not in ATTENTIONS:
        raise ConfigError(f"unknown attention {name!r}; choose one of {sorted(ATTENTIONS)}")
    cls = ATTENTIONS[name]
    parameters = inspect.signature(cls).parameters
    takes_any = any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values())
    missing = [argument for argument in ("causal", "dropout") if argument not in parameters and not takes_any]
    if missing and name != "logsparse":
        raise ConfigError(f"attention {name!r} ({cls.__module__}.{cls.__qualname__}) takes no {' or '.join(missing)} "
                          "argument: every inner attention is built with causal= (the decoder's self-attention is "
                          "causal) and dropout= (on its probabilities). Fix: accept both in its __init__.")
    accepted = sorted(set(parameters) - {"causal", "dropout", "dense_reference"})
    unknown = [] if takes_any else sorted(set(options) - set(accepted))  # **options: the class checks its own
    if unknown:
        hint = " ('mix' is not supported: it scrambles heads and time steps)" if "mix" in unknown else ""
        raise ConfigError(f"unknown option(s) {unknown} for attention {name!r}; valid options: {accepted}{hint}")
    if name == "logsparse":
        if not causal:
            logger.debug("LogSparse attention is always causal; building it causal for a causal=False request")
        return cls(dropout=dropout, **options)
    return cls(causal=causal, dropout=dropout, **options)
