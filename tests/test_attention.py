"""Attention kernels against straightforward references, on tiny shapes.

Reference implementations here are written as plainly as possible (loops over
queries, dense masks) so that they can disagree with the fast paths.
"""

from __future__ import annotations

import logging
import math

import pytest
import torch
from torch import nn

from forecast.errors import ConfigError
from forecast.layers.attention import autograd
from forecast.layers.attention import (
    ATTENTIONS,
    CausalConv1dProjection,
    FullAttention,
    LogSparseAttention,
    LogSparseWeights,
    MultiHeadAttention,
    ProbSparseAttention,
    ProbSparseWeights,
    _CausalRunningAverage,
    _ShiftedScores,
    _ShiftedWeightedSum,
    _running_sum,
    build_attention,
    dense_masked_attention,
    draw_key_sample,
    sparsity_measurement,
)
from forecast.layers.masks import causal_mask, logsparse_mask, logsparse_offsets

F64 = torch.float64


def _randn(*shape: int, seed: int, dtype: torch.dtype = F64, requires_grad: bool = False) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=dtype).requires_grad_(requires_grad)


def _qkv(
    batch: int, query_len: int, key_len: int, heads: int, head_dim: int, seed: int = 0, **kwargs: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (
        _randn(batch, query_len, heads, head_dim, seed=seed, **kwargs),  # type: ignore[arg-type]
        _randn(batch, key_len, heads, head_dim, seed=seed + 1, **kwargs),  # type: ignore[arg-type]
        _randn(batch, key_len, heads, head_dim, seed=seed + 2, **kwargs),  # type: ignore[arg-type]
    )


def _visible(query: int, key_len: int, causal: bool) -> range:
    return range(min(query, key_len - 1) + 1) if causal else range(key_len)


# ------------------------------------------------------------------ references


def _reference_sparsity(queries: torch.Tensor, keys: torch.Tensor, indices: torch.Tensor, valid: torch.Tensor):
    """M per (b, h, query) by loops: max - mean over the samples the query uses (divisor: their count)."""
    batch, query_len, heads, head_dim = queries.shape
    scale = head_dim**-0.5
    measurement = torch.zeros(batch, heads, query_len, dtype=F64)
    for b in range(batch):
        for h in range(heads):
            for query in range(query_len):
                used = [
                    float(queries[b, query, h] @ keys[b, int(indices[query, slot]), h]) * scale
                    for slot in range(indices.shape[1])
                    if valid[query, slot]
                ]
                measurement[b, h, query] = max(used) - sum(used) / len(used) if used else 0.0
    return measurement


def _reference_prob_sparse(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, module: ProbSparseAttention
) -> tuple[torch.Tensor, torch.Tensor]:
    """The algorithm spelled out per query, given the module's own key sample."""
    batch, query_len, heads, head_dim = queries.shape
    key_len = keys.shape[1]
    indices, valid = module.sample_keys(query_len, key_len).per_query()
    sparsity = _reference_sparsity(queries, keys, indices, valid)
    selected = sparsity.topk(module.selected_count(query_len), dim=-1).indices
    out = torch.empty_like(queries)
    for b in range(batch):
        for h in range(heads):
            chosen = set(selected[b, h].tolist())
            for query in range(query_len):
                visible = list(_visible(query, key_len, module.causal))
                if query in chosen:
                    scores = torch.stack([queries[b, query, h] @ keys[b, key, h] for key in visible]) * head_dim**-0.5
                    out[b, query, h] = torch.softmax(scores, 0) @ values[b, visible, h]
                elif module.causal and module.causal_lazy_fill == "cumsum":
                    out[b, query, h] = values[b, visible, h].sum(0)
                else:
                    out[b, query, h] = values[b, visible, h].mean(0)
    return out, sparsity


# ------------------------------------------------------------------ full attention


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("query_len", "key_len"), [(6, 6), (4, 9), (9, 4), (1, 5)])
def test_full_attention_sdpa_matches_dense_reference(causal: bool, query_len: int, key_len: int) -> None:
    q, k, v = _qkv(2, query_len, key_len, 3, 4)
    mask = causal_mask(query_len, key_len) if causal else None
    expected, expected_weights = dense_masked_attention(q, k, v, mask, need_weights=True)
    out = FullAttention(causal=causal)(q, k, v)
    out_with_weights, weights = FullAttention(causal=causal)(q, k, v, need_weights=True)
    assert out.shape == (2, query_len, 3, 4)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(out_with_weights, expected)
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, query_len, dtype=F64))


def test_dense_reference_refuses_empty_rows_and_non_boolean_masks() -> None:
    q, k, v = _qkv(1, 3, 3, 1, 2)
    empty_row = torch.eye(3, dtype=torch.bool)
    empty_row[1, 1] = False
    with pytest.raises(ConfigError, match="without any visible key"):
        dense_masked_attention(q, k, v, empty_row)
    with pytest.raises(ConfigError, match="boolean"):
        dense_masked_attention(q, k, v, torch.zeros(3, 3))


def test_all_but_self_masked_attention_returns_the_values() -> None:
    q, k, v = _qkv(2, 5, 5, 2, 3)
    out = dense_masked_attention(q, k, v, torch.eye(5, dtype=torch.bool))
    torch.testing.assert_close(out, v)


# ------------------------------------------------------------------ ProbSparse


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("query_len", "key_len"), [(7, 7), (5, 11), (11, 5), (1, 1), (1, 4)])
def test_prob_sparse_equals_full_attention_when_every_query_is_selected(
    causal: bool, query_len: int, key_len: int
) -> None:
    q, k, v = _qkv(2, query_len, key_len, 3, 4)
    module = ProbSparseAttention(factor=50, causal=causal).eval()
    assert module.selected_count(query_len) == query_len
    assert module.sample_size(key_len) >= key_len
    out, weights = module(q, k, v, need_weights=True)
    full, full_weights = FullAttention(causal=causal)(q, k, v, need_weights=True)
    torch.testing.assert_close(out, full)
    torch.testing.assert_close(module(q, k, v), full)
    torch.testing.assert_close(weights.to_dense(), full_weights)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("query_len", "key_len"), [(9, 9), (6, 13), (13, 6)])
def test_sample_covering_all_keys_gives_the_exact_sparsity(causal: bool, query_len: int, key_len: int) -> None:
    q, k, _ = _qkv(2, query_len, key_len, 2, 4)
    sample = draw_key_sample(query_len, key_len, sample_size=key_len, causal=causal)
    scores = torch.einsum("blhe,bshe->bhls", q, k) * 4**-0.5
    visible = causal_mask(query_len, key_len) if causal else torch.ones(query_len, key_len, dtype=torch.bool)
    peak = scores.masked_fill(~visible, float("-inf")).amax(-1)
    mean = (scores * visible).sum(-1) / visible.sum(-1)
    torch.testing.assert_close(sparsity_measurement(q, k, sample, 4**-0.5), peak - mean)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("query_len", "key_len"), [(23, 23), (17, 40), (40, 17)])
def test_sparsity_measurement_matches_loops(causal: bool, query_len: int, key_len: int) -> None:
    q, k, _ = _qkv(2, query_len, key_len, 2, 3)
    sample = draw_key_sample(query_len, key_len, 6, causal=causal, generator=torch.Generator().manual_seed(5))
    indices, valid = sample.per_query()
    assert indices.shape == valid.shape == (query_len, 6)
    expected = _reference_sparsity(q, k, indices, valid)
    torch.testing.assert_close(sparsity_measurement(q, k, sample, 3**-0.5), expected)


def test_a_causal_query_that_may_see_none_of_its_blocks_draws_measures_zero() -> None:
    """Its max over no score is -inf: M must be 0 there (ranked last for exact attention), not -inf."""
    for seed in range(500):
        sample = draw_key_sample(30, 30, 4, causal=True, generator=torch.Generator().manual_seed(seed))
        indices, valid = sample.per_query()
        if not bool(valid.any(dim=1).all()):
            break
    else:
        pytest.fail("no seed left a query without a draw it may see")
    q, k, _ = _qkv(2, 30, 30, 2, 3)
    measured = sparsity_measurement(q, k, sample, 3**-0.5)
    assert bool(torch.isfinite(measured).all())
    torch.testing.assert_close(measured, _reference_sparsity(q, k, indices, valid))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("query_len", "key_len"), [(50, 50), (30, 70), (70, 30)])
def test_key_sample_is_within_what_each_query_may_see(causal: bool, query_len: int, key_len: int) -> None:
    sample = draw_key_sample(query_len, key_len, 8, causal=causal, generator=torch.Generator().manual_seed(1))
    indices, valid = sample.per_query()
    assert int(indices.min()) >= 0 and int(indices.max()) < key_len
    last_visible = torch.arange(query_len).clamp(max=key_len - 1).unsqueeze(-1)
    if causal:
        assert not bool((valid & (indices > last_visible)).any()), "no sample in a query's future"
        first_block = min(8, query_len)
        for query in range(first_block):  # the first block enumerates its keys exactly
            used = indices[query][valid[query]].tolist()
            assert sorted(used) == list(range(min(query, key_len - 1) + 1))
        assert bool((valid.sum(-1) >= 1).all())
    else:
        assert bool(valid.all())
    assert sample.all_valid == bool(sample.valid.all())  # read on the CPU as it is drawn


@pytest.mark.parametrize("causal", [False, True])
def test_a_sampled_blocks_draws_are_uniform_over_every_key_its_last_query_may_see(causal: bool) -> None:
    """Kills a draw that never reaches the block's last visible key (``uniform * (range - 1)``): the within-
    check above still passes, since a narrower sample is still inside what each query may see."""
    query_len, key_len, size, draws = 32, 32, 4, 400
    generator = torch.Generator().manual_seed(3)
    counts = torch.zeros(query_len // size, key_len)  # [n_blocks, S]: how often each block drew each key
    for _ in range(draws):
        sample = draw_key_sample(query_len, key_len, size, causal=causal, generator=generator)
        counts.scatter_add_(1, sample.indices, torch.ones(sample.indices.shape))
    for block, row in enumerate(counts):
        visible = (block + 1) * size if causal else key_len  # keys the block's last query may see
        if visible <= size:
            continue  # enumerated exactly, not drawn
        assert int(row[visible:].sum()) == 0
        n = draws * size
        frequency = row[:visible] / n
        bound = 5 * math.sqrt((1 / visible) * (1 - 1 / visible) / n)
        assert float((frequency - 1 / visible).abs().max()) <= bound, f"block {block} draws keys unevenly"


def test_key_sample_enumerates_all_keys_when_the_sample_is_large() -> None:
    indices, valid = draw_key_sample(12, 5, 40, causal=False).per_query()
    for row, row_valid in zip(indices, valid):
        assert sorted(row[row_valid].tolist()) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("lazy_fill", ["mean", "cumsum"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("query_len", "key_len"), [(24, 24), (20, 31), (31, 20)])
def test_prob_sparse_matches_a_per_query_reference(
    causal: bool, lazy_fill: str, query_len: int, key_len: int
) -> None:
    q, k, v = _qkv(2, query_len, key_len, 2, 4, seed=3)
    module = ProbSparseAttention(factor=2, causal=causal, causal_lazy_fill=lazy_fill, seed=7).eval()
    assert module.selected_count(query_len) < query_len
    assert module.sample_size(key_len) < key_len
    expected, expected_sparsity = _reference_prob_sparse(q, k, v, module)
    out, weights = module(q, k, v, need_weights=True)
    assert isinstance(weights, ProbSparseWeights)
    torch.testing.assert_close(weights.sparsity, expected_sparsity)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(module(q, k, v), expected)
    torch.testing.assert_close(torch.einsum("bhls,bshe->blhe", weights.to_dense(), v), expected)


def test_prob_sparse_is_deterministic_in_eval_and_ignores_the_global_rng() -> None:
    q, k, v = _qkv(2, 40, 40, 2, 4)
    module = ProbSparseAttention(factor=1, causal=True, seed=11).eval()
    with torch.random.fork_rng():
        torch.manual_seed(1)
        first = module(q, k, v)
    with torch.random.fork_rng():
        torch.manual_seed(2)
        second = module(q, k, v)
    assert torch.equal(first, second)
    assert torch.equal(first, ProbSparseAttention(factor=1, causal=True, seed=11).eval()(q, k, v))
    other_seed = ProbSparseAttention(factor=1, causal=True, seed=12).eval()
    assert not torch.equal(module.sample_keys(40, 40).indices, other_seed.sample_keys(40, 40).indices)


@pytest.mark.parametrize("causal", [False, True])
def test_compiled_prob_sparse_equals_eager_and_breaks_the_graph_only_to_draw_its_sample(causal: bool) -> None:
    """Under torch.compile the key sample is drawn eagerly (at most one graph break) and the rest traced: the
    same seed gives the same output, and no break comes from the generator or from reading the sample's
    validity back (before 2026-11-28 a tiny Informer's step traced into 66 graphs, now 52)."""
    q, k, v = _qkv(2, 40, 40, 2, 4)
    eager = ProbSparseAttention(factor=1, causal=causal, seed=5).eval()(q, k, v)
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(ProbSparseAttention(factor=1, causal=causal, seed=5).eval())(q, k, v)
    assert explanation.graph_count <= 2  # the traced ops before the draw (none, today) and after it
    assert all("disable" in str(reason.reason) for reason in explanation.break_reasons)
    compiled = torch.compile(ProbSparseAttention(factor=1, causal=causal, seed=5).eval(), backend="eager")
    torch.testing.assert_close(compiled(q, k, v), eager)


def test_prob_sparse_resamples_in_training_reproducibly() -> None:
    first, second = ProbSparseAttention(factor=1, seed=3), ProbSparseAttention(factor=1, seed=3)
    draws_first = [first.sample_keys(60, 60).indices for _ in range(3)]
    draws_second = [second.sample_keys(60, 60).indices for _ in range(3)]
    assert not torch.equal(draws_first[0], draws_first[1]), "training draws a new sample each call"
    for a, b in zip(draws_first, draws_second):
        assert torch.equal(a, b), "the same seed gives the same sequence of samples"
    first.eval()
    assert torch.equal(first.sample_keys(60, 60).indices, first.sample_keys(60, 60).indices)


def test_prob_sparse_without_seed_uses_the_global_rng() -> None:
    module = ProbSparseAttention(factor=1, seed=None).eval()
    with torch.random.fork_rng():
        torch.manual_seed(0)
        a = module.sample_keys(60, 60).indices
    with torch.random.fork_rng():
        torch.manual_seed(0)
        b = module.sample_keys(60, 60).indices
        c = module.sample_keys(60, 60).indices
    assert torch.equal(a, b) and not torch.equal(b, c)


def test_prob_sparse_gradients_reach_queries_keys_and_values() -> None:
    q, k, v = _qkv(2, 30, 30, 2, 4, requires_grad=True)
    module = ProbSparseAttention(factor=1, causal=True)
    out, weights = module(q, k, v, need_weights=True)
    out.square().sum().backward()
    for tensor in (q, k, v):
        assert tensor.grad is not None and bool(tensor.grad.isfinite().all()) and float(tensor.grad.abs().sum()) > 0
    selected = torch.zeros(2, 2, 30, dtype=torch.bool).scatter(-1, weights.selected_queries, True)
    query_grad_used = q.grad.abs().sum(-1).transpose(1, 2) > 0  # [B, L, H] -> [B, H, L]
    assert torch.equal(query_grad_used, selected), "only selected queries take part in attention"


@pytest.mark.parametrize("causal", [False, True])
def test_prob_sparse_dropout_applies_in_training_only(causal: bool) -> None:
    q, k, v = _qkv(2, 30, 30, 2, 4)
    plain = ProbSparseAttention(factor=2, causal=causal, seed=4)
    dropped = ProbSparseAttention(factor=2, causal=causal, dropout=0.5, seed=4)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        assert not torch.allclose(plain(q, k, v), dropped(q, k, v))
    torch.testing.assert_close(plain.eval()(q, k, v), dropped.eval()(q, k, v))


def test_a_registered_attention_outside_the_contract_is_named_with_the_fix(monkeypatch):
    """An attention without a causal argument failed with a bare TypeError inside build_attention, and one ignoring
    need_weights had its output unpacked as (out, weights): a reshape error, or 'too many values to unpack'."""
    from forecast.layers.attention import ATTENTIONS, MultiHeadAttention, build_attention

    class NoCausal(torch.nn.Module):
        def __init__(self, dropout: float = 0.0) -> None:
            super().__init__()

    class NoWeights(torch.nn.Module):
        def __init__(self, causal: bool = False, dropout: float = 0.0) -> None:
            super().__init__()

        def forward(self, queries, keys, values, need_weights=False):
            return values  # [B, S, H, E], whatever need_weights says

    monkeypatch.setitem(ATTENTIONS, "nocausal", NoCausal)
    monkeypatch.setitem(ATTENTIONS, "noweights", NoWeights)
    with pytest.raises(ConfigError, match=r"attention 'nocausal' \(.*NoCausal\) takes no causal argument: .*Fix: "
                                          r"accept both in its __init__"):
        build_attention("nocausal", causal=True, dropout=0.1)
    attention = MultiHeadAttention(build_attention("noweights", causal=False, dropout=0.0), 8, 2)
    x = torch.randn(2, 5, 8)
    assert attention(x, x, x).shape == (2, 5, 8)
    with pytest.raises(ConfigError, match=r"NoWeights returned Tensor for need_weights=True; .*returns \(output, "
                                          r"weights\)"):
        attention(x, x, x, need_weights=True)


def test_an_attention_taking_any_keyword_gets_every_option(monkeypatch):
    """An attention whose __init__ takes **options was passed causal and dropout, but any other option was
    refused as unknown, naming 'options' as the only valid one."""
    from forecast.layers.attention import ATTENTIONS, build_attention

    class AnyOptions(torch.nn.Module):
        def __init__(self, **options) -> None:
            super().__init__()
            self.options = options

    monkeypatch.setitem(ATTENTIONS, "any", AnyOptions)
    assert build_attention("any", causal=True, dropout=0.1, window=3).options == dict(causal=True, dropout=0.1,
                                                                                       window=3)


def test_head_attention_reads_a_mask_and_causal_together_on_every_path():
    """Given both, SDPA (eval, GPU) attends where both allow; the CPU's dropout path used the causal mask alone, so a
    local window trained with full causal attention and was evaluated with the window."""
    from forecast.layers.attention.reference import head_attention

    q, k, v = (tensor.transpose(1, 2) for tensor in _qkv(2, 6, 6, 2, 4))  # [B, H, L, E]
    window = torch.ones(6, 6, dtype=torch.bool).tril(-3).logical_not()  # the last 3 keys up to the query
    both = window & causal_mask(6, 6)
    expected = head_attention(q, k, v, both)
    torch.testing.assert_close(head_attention(q, k, v, window, causal=True), expected)
    # dropout at a rate that drops nothing here: the CPU's explicit path, which must read the same keys
    torch.testing.assert_close(head_attention(q, k, v, window, causal=True, dropout=1e-12), expected)


@pytest.mark.parametrize(("query_len", "key_len", "causal"), [(7, 7, False), (9, 5, True), (4, 11, True)])
def test_full_attention_with_dropout_equals_the_dense_reference_with_the_same_masks(query_len, key_len, causal):
    """On the CPU, dropout takes the explicit path (not SDPA's math path): the dense reference's exact numbers,
    mask for mask from the same seed, and with dropout off SDPA's."""
    q, k, v = _qkv(2, query_len, key_len, 2, 4, requires_grad=True)
    mask = causal_mask(query_len, key_len) if causal else None
    module = FullAttention(causal=causal, dropout=0.4)
    with torch.random.fork_rng():
        torch.manual_seed(3)
        out = module(q, k, v)
        torch.manual_seed(3)
        expected = dense_masked_attention(q, k, v, mask, dropout=0.4, training=True)
    torch.testing.assert_close(out, expected)
    assert (out - module.eval()(q, k, v)).abs().max() > 1e-3  # the dropout did drop
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    expected_grads = torch.autograd.grad(expected.sum(), (q, k, v))
    for grad, expected_grad in zip(grads, expected_grads):
        torch.testing.assert_close(grad, expected_grad)
    torch.testing.assert_close(module.eval()(q, k, v), dense_masked_attention(q, k, v, mask))


# ------------------------------------------------------------------ LogSparse


LOGSPARSE_CASES = [(1, 0, None), (2, 0, None), (13, 0, None), (33, 0, None), (20, 2, None), (31, 0, 8), (40, 1, 6), (17, 0, 2)]


@pytest.mark.parametrize(("length", "local_window", "sub_len"), LOGSPARSE_CASES)
def test_logsparse_fast_path_equals_dense_reference(length: int, local_window: int, sub_len: int | None) -> None:
    inputs = _qkv(2, length, length, 3, 4, requires_grad=True)
    reference_inputs = [tensor.detach().clone().requires_grad_(True) for tensor in inputs]
    fast = LogSparseAttention(local_window, sub_len)
    reference = LogSparseAttention(local_window, sub_len, dense_reference=True)
    out, weights = fast(*inputs, need_weights=True)
    expected, expected_weights = reference(*reference_inputs, need_weights=True)
    torch.testing.assert_close(out, expected)
    assert isinstance(weights, LogSparseWeights)
    assert weights.offsets.tolist() == list(logsparse_offsets(length, local_window, sub_len))
    torch.testing.assert_close(weights.to_dense(), expected_weights)
    upstream = _randn(*out.shape, seed=9)
    (out * upstream).sum().backward()
    (expected * upstream).sum().backward()
    for tensor, reference_tensor in zip(inputs, reference_inputs):
        torch.testing.assert_close(tensor.grad, reference_tensor.grad)


def test_logsparse_chunked_dot_products_match_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(autograd, "_DOT_CHUNK_ELEMENTS", 7)  # several row chunks per offset
    inputs = _qkv(2, 19, 19, 1, 3, requires_grad=True)
    reference_inputs = [tensor.detach().clone().requires_grad_(True) for tensor in inputs]
    out = LogSparseAttention(1, 8)(*inputs)
    expected = LogSparseAttention(1, 8, dense_reference=True)(*reference_inputs)
    torch.testing.assert_close(out, expected)
    out.square().sum().backward()
    expected.square().sum().backward()
    for tensor, reference_tensor in zip(inputs, reference_inputs):
        torch.testing.assert_close(tensor.grad, reference_tensor.grad)


def test_logsparse_kernels_pass_gradcheck() -> None:
    offsets = logsparse_offsets(9, 1, 5)
    q, k, v = _qkv(1, 9, 9, 2, 3, requires_grad=True)
    weights = _randn(1, 9, 2, len(offsets), seed=4, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: _ShiftedScores.apply(a, b, offsets, 0.5).clamp(min=-1e3), (q, k))
    assert torch.autograd.gradcheck(lambda w, b: _ShiftedWeightedSum.apply(w, b, offsets), (weights, v))
    for normalize in (True, False):
        assert torch.autograd.gradcheck(lambda b: _CausalRunningAverage.apply(b, normalize), (v,))


@pytest.mark.parametrize("length", [1, 2, 5, 16, 17, 300])
def test_running_sums_match_cumsum_across_scan_blocks(length: int) -> None:
    values = _randn(2, length, 3, 2, seed=8)
    weights = _randn(length, seed=9)
    counts = torch.arange(1, length + 1, dtype=F64).view(length, 1, 1)
    torch.testing.assert_close(_CausalRunningAverage.apply(values, False), values.cumsum(1))
    torch.testing.assert_close(_CausalRunningAverage.apply(values, True), values.cumsum(1) / counts)
    reverse = _running_sum(values, reverse=True, weights=weights)
    torch.testing.assert_close(reverse, (values * weights.view(length, 1, 1)).flip(1).cumsum(1).flip(1))


def test_logsparse_refuses_cross_attention() -> None:
    q, k, v = _qkv(1, 4, 6, 1, 2)
    with pytest.raises(ConfigError, match="same length"):
        LogSparseAttention()(q, k, v)


def test_logsparse_dropout_applies_in_training_only() -> None:
    q, k, v = _qkv(2, 20, 20, 2, 4)
    module = LogSparseAttention(dropout=0.5)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        assert not torch.allclose(module(q, k, v), LogSparseAttention()(q, k, v))
    torch.testing.assert_close(module.eval()(q, k, v), LogSparseAttention()(q, k, v))


def test_logsparse_warns_when_restart_makes_it_dense(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="forecast.layers.attention"):
        LogSparseAttention(sub_len=3)
    assert "dense causal attention" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="forecast.layers.attention"):
        LogSparseAttention(sub_len=16)
    assert caplog.text == ""


# ------------------------------------------------------------------ shared properties


def _modules(causal: bool) -> list[nn.Module]:
    modules: list[nn.Module] = [
        FullAttention(causal=causal),
        ProbSparseAttention(factor=1, causal=causal, seed=2),
    ]
    if causal:
        modules.append(LogSparseAttention(local_window=1, sub_len=8))
    return [module.eval() for module in modules]


@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("causal", [False, True])
def test_batch_invariance(heads: int, causal: bool) -> None:
    q, k, v = _qkv(3, 26, 26, heads, 4)
    for module in _modules(causal):
        together = module(q, k, v)
        assert together.shape == (3, 26, heads, 4)
        for b in range(3):
            alone = module(q[b : b + 1], k[b : b + 1], v[b : b + 1])
            torch.testing.assert_close(together[b : b + 1], alone, msg=f"{type(module).__name__}")


def test_single_batch_single_head_keeps_its_shape() -> None:
    q, k, v = _qkv(1, 1, 1, 1, 2)
    for module in _modules(True) + _modules(False):
        out = module(q, k, v)
        assert out.shape == (1, 1, 1, 2)
        torch.testing.assert_close(out, v)


def _assert_prefix_unchanged(before: torch.Tensor, after: torch.Tensor, cut: int, what: str) -> None:
    torch.testing.assert_close(before[:, :cut], after[:, :cut], msg=what)
    assert not torch.allclose(before[:, cut:], after[:, cut:]), f"{what}: the perturbation had no effect"


def _perturbed(tensor: torch.Tensor, cut: int, seed: int) -> torch.Tensor:
    changed = tensor.clone()
    changed[:, cut:] += _randn(*changed[:, cut:].shape, seed=seed)
    return changed


@pytest.mark.parametrize("module", [FullAttention(causal=True), LogSparseAttention(), LogSparseAttention(2, 5)])
def test_causal_modules_ignore_the_future(module: nn.Module) -> None:
    q, k, v = _qkv(2, 30, 30, 2, 4)
    for cut in (1, 11, 29):
        changed = [_perturbed(tensor, cut, seed=20 + cut) for tensor in (q, k, v)]
        _assert_prefix_unchanged(module(q, k, v), module(*changed), cut, type(module).__name__)


def test_prob_sparse_counts_are_the_papers_factor_times_ceil_ln_length() -> None:
    """u = c * ceil(ln L_Q) queries and U = c * ceil(ln L_K) sampled keys (Informer2020's counts), u at most L_Q."""
    attention = ProbSparseAttention(factor=5)
    assert (attention.selected_count(96), attention.sample_size(96)) == (25, 25)  # ln 96 = 4.56
    assert (attention.selected_count(48), attention.sample_size(72)) == (20, 25)
    assert attention.selected_count(7) == 7 and attention.sample_size(7) == 10  # drawn from 7 keys at most
    assert ProbSparseAttention(factor=3).selected_count(1) == 1  # ln 1 = 0 would select none


def test_masked_prob_sparse_ignores_the_future_when_every_query_is_selected() -> None:
    q, k, v = _qkv(2, 12, 12, 2, 4)
    module = ProbSparseAttention(factor=20, causal=True).eval()
    for cut in (1, 6):
        changed = [_perturbed(tensor, cut, seed=30 + cut) for tensor in (q, k, v)]
        _assert_prefix_unchanged(module(q, k, v), module(*changed), cut, "prob, all selected")


def test_masked_prob_sparse_future_values_change_no_earlier_output() -> None:
    q, k, v = _qkv(2, 60, 60, 2, 4)
    module = ProbSparseAttention(factor=1, causal=True).eval()
    for cut in (5, 30):
        _assert_prefix_unchanged(module(q, k, v), module(q, k, _perturbed(v, cut, seed=cut)), cut, "prob values")


def test_masked_prob_sparse_measures_and_attends_causally() -> None:
    """Future changes leave earlier M untouched; earlier outputs change only via the top-u choice."""
    q, k, v = _qkv(2, 60, 60, 2, 4)
    module = ProbSparseAttention(factor=1, causal=True).eval()
    cut = 25
    changed = [_perturbed(tensor, cut, seed=40) for tensor in (q, k, v)]
    out, weights = module(q, k, v, need_weights=True)
    changed_out, changed_weights = module(*changed, need_weights=True)
    torch.testing.assert_close(weights.sparsity[..., :cut], changed_weights.sparsity[..., :cut])

    def selected_mask(w: ProbSparseWeights) -> torch.Tensor:
        return torch.zeros_like(w.sparsity, dtype=torch.bool).scatter(-1, w.selected_queries, True)

    same_role = (selected_mask(weights) == selected_mask(changed_weights)).transpose(1, 2)[:, :cut]  # [B, t, H]
    assert bool(same_role.any())
    torch.testing.assert_close(out[:, :cut][same_role], changed_out[:, :cut][same_role])


def test_no_nan_at_length_one_and_in_bfloat16() -> None:
    for causal in (False, True):
        for module in _modules(causal):
            q, k, v = _qkv(2, 1, 1, 2, 4)
            assert bool(module(q, k, v).isfinite().all())
            q, k, v = _qkv(2, 40, 40, 2, 8, seed=5)
            reference = module(q, k, v)
            low = module(q.bfloat16(), k.bfloat16(), v.bfloat16())
            assert low.dtype == torch.bfloat16 and bool(low.isfinite().all())
            if not isinstance(module, ProbSparseAttention):  # a rounding can flip ProbSparse's top-u choice
                torch.testing.assert_close(low.double(), reference, atol=0.05, rtol=0.05)


@pytest.mark.parametrize("name", sorted(ATTENTIONS))
def test_multi_head_attention_under_bfloat16_autocast(name: str) -> None:
    generator = torch.Generator().manual_seed(0)
    layer = MultiHeadAttention(build_attention(name, causal=True, dropout=0.1), 16, 4, qk_kernel_size=3)
    x = torch.randn(2, 24, 16, generator=generator, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer(x, x, x)
    assert out.shape == (2, 24, 16) and bool(out.isfinite().all())
    out.float().square().mean().backward()
    assert x.grad is not None and bool(x.grad.isfinite().all()) and float(x.grad.abs().sum()) > 0


# ------------------------------------------------------------------ projections and wrapper


def test_conv_projection_with_kernel_one_is_a_linear_layer() -> None:
    projection = CausalConv1dProjection(5, 7, kernel_size=1)
    linear = nn.Linear(5, 7)
    with torch.no_grad():
        linear.weight.copy_(projection.conv.weight[:, :, 0])
        linear.bias.copy_(projection.conv.bias)
    x = torch.randn(3, 9, 5, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(projection(x), linear(x))


def test_conv_projection_is_a_left_padded_convolution() -> None:
    projection = CausalConv1dProjection(3, 4, kernel_size=3).double()
    x = _randn(2, 6, 3, seed=1)
    weight, bias = projection.conv.weight, projection.conv.bias
    expected = torch.empty(2, 6, 4, dtype=F64)
    for t in range(6):
        total = bias.clone()
        for tap in range(3):
            source = t - 2 + tap
            if source >= 0:
                total = total + x[:, source] @ weight[:, :, tap].T
        expected[:, t] = total
    torch.testing.assert_close(projection(x), expected)
    for cut in (1, 4):
        _assert_prefix_unchanged(projection(x), projection(_perturbed(x, cut, seed=cut)), cut, "conv projection")


def test_multi_head_attention_with_conv_projection_is_causal() -> None:
    layer = MultiHeadAttention(LogSparseAttention(), 8, 2, qk_kernel_size=4).double()
    x = _randn(2, 20, 8, seed=0)
    for cut in (1, 9):
        changed = _perturbed(x, cut, seed=cut)
        _assert_prefix_unchanged(layer(x, x, x), layer(changed, changed, changed), cut, "multi-head")


def test_multi_head_attention_splits_heads_like_a_reference() -> None:
    layer = MultiHeadAttention(FullAttention(), 12, 3).double()
    x, memory = _randn(2, 5, 12, seed=0), _randn(2, 7, 12, seed=1)
    out, weights = layer(x, memory, memory, need_weights=True)
    q = layer.query_projection(x).view(2, 5, 3, 4)
    k = layer.key_projection(memory).view(2, 7, 3, 4)
    v = layer.value_projection(memory).view(2, 7, 3, 4)
    per_head = []
    for h in range(3):
        probabilities = torch.softmax(q[:, :, h] @ k[:, :, h].transpose(1, 2) / 2.0, dim=-1)
        torch.testing.assert_close(weights[:, h], probabilities)
        per_head.append(probabilities @ v[:, :, h])
    expected = layer.out_projection(torch.cat(per_head, dim=-1))
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(layer(x, memory, memory), expected)


def test_multi_head_attention_validates_its_configuration_and_inputs() -> None:
    with pytest.raises(ConfigError, match="divisible"):
        MultiHeadAttention(FullAttention(), 10, 3)
    with pytest.raises(ConfigError, match="kernel_size"):
        MultiHeadAttention(FullAttention(), 8, 2, qk_kernel_size=0)
    layer = MultiHeadAttention(FullAttention(), 8, 2)
    with pytest.raises(ConfigError, match="d_model=8"):
        layer(torch.zeros(1, 3, 6), torch.zeros(1, 3, 6), torch.zeros(1, 3, 6))
    with pytest.raises(ConfigError, match="same"):
        layer(torch.zeros(1, 3, 8), torch.zeros(1, 4, 8), torch.zeros(1, 5, 8))


def test_attention_inputs_are_validated() -> None:
    q, k, v = _qkv(1, 3, 4, 2, 2)
    for module in (FullAttention(), ProbSparseAttention(), LogSparseAttention()):
        with pytest.raises(ConfigError, match=r"\[B, L, H, E\]"):
            module(q[0], k[0], v[0])
        with pytest.raises(ConfigError, match="same shape"):
            module(q, k, v[:, :2])
        with pytest.raises(ConfigError, match="agree"):
            module(q, k[..., :1], v[..., :1])


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [({"factor": 0}, "factor"), ({"causal_lazy_fill": "sum"}, "causal_lazy_fill"), ({"seed": -1}, "seed"),
     ({"dropout": 1.0}, "dropout")],
)
def test_prob_sparse_validates_options(kwargs: dict[str, object], option: str) -> None:
    with pytest.raises(ConfigError, match=option):
        ProbSparseAttention(**kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------ registry


def test_build_attention_builds_every_registered_kind() -> None:
    assert set(ATTENTIONS) == {"full", "prob", "logsparse"}
    prob = build_attention("prob", causal=True, dropout=0.1, factor=3, seed=5)
    assert isinstance(prob, ProbSparseAttention) and prob.causal and prob.factor == 3 and prob.dropout == 0.1
    full = build_attention("full", causal=False, dropout=0.0)
    assert isinstance(full, FullAttention) and not full.causal
    logsparse = build_attention("logsparse", causal=True, dropout=0.0, local_window=2, sub_len=16)
    assert isinstance(logsparse, LogSparseAttention) and logsparse.sub_len == 16


def test_logsparse_built_for_an_encoder_is_still_causal() -> None:
    module = build_attention("logsparse", causal=False, dropout=0.0)
    q, k, v = _qkv(1, 16, 16, 2, 4)
    expected = dense_masked_attention(q, k, v, logsparse_mask(16))
    torch.testing.assert_close(module(q, k, v), expected)


def test_build_attention_names_the_valid_choices() -> None:
    with pytest.raises(ConfigError, match=r"\['full', 'logsparse', 'prob'\]"):
        build_attention("sparse", causal=False, dropout=0.0)
    with pytest.raises(ConfigError, match="mix.*not supported"):
        build_attention("prob", causal=False, dropout=0.0, mix=True)
    with pytest.raises(ConfigError, match="factor"):
        build_attention("full", causal=False, dropout=0.0, factor=5)


def test_multi_head_attention_drops_out_the_output_projections_result() -> None:
    """Dropout acts after the output projection (exact zeros at rate p, survivors scaled by 1 / (1 - p)): kills
    dropout moved before the projection, which keeps the rate but leaves no output element zero."""
    torch.manual_seed(0)
    p = 0.3
    mha = MultiHeadAttention(FullAttention(), d_model=16, n_heads=2, dropout=p)
    x = torch.randn(8, 32, 16)
    expected = mha.eval()(x, x, x)
    torch.manual_seed(1)
    out = mha.train()(x, x, x)
    dropped = out == 0
    n = out.numel()
    assert abs(dropped.double().mean().item() - p) <= 5 * (p * (1 - p) / n) ** 0.5
    torch.testing.assert_close(out[~dropped], expected[~dropped] / (1 - p))


def test_the_kv_cache_drops_out_the_newest_querys_attention_in_training() -> None:
    """A cached step in training mode applies the attention's dropout (as the uncached pass does): kills a cache
    that always attends as in eval mode."""
    from forecast.layers.blocks import PreNormCausalBlock
    from forecast.layers.decoding import KeyValueCache

    def step(attention_dropout: float, seed: int) -> torch.Tensor:
        torch.manual_seed(0)
        attention = MultiHeadAttention(LogSparseAttention(dropout=attention_dropout), d_model=16, n_heads=2)
        blocks = [PreNormCausalBlock(attention, 16, 32, dropout=0.0)]
        cache = KeyValueCache(blocks, lambda position: logsparse_offsets(position + 1))
        hidden = torch.randn(2, 32, 16)
        blocks[0].eval()
        cache.prefill(hidden[:, :31])
        blocks[0].train()
        torch.manual_seed(seed)
        return cache.step(hidden[:, 31], 31)

    torch.testing.assert_close(step(0.0, 1), step(0.0, 2))  # nothing else random
    assert not torch.allclose(step(0.5, 1), step(0.5, 2)), "the newest query's attention was not dropped out"


def test_masked_prob_sparse_fills_lazy_queries_with_a_mean_by_default() -> None:
    """docs/pitfalls.md: the original masked ProbSparse gives lazy queries ``cumsum(V)``, a sum that grows with
    position. By default each lazy query gets the mean of the values it may see: with every value 1, every output
    is 1 (``cumsum`` would give position + 1)."""
    q, k, _ = _qkv(2, 40, 40, 2, 4, seed=5)
    v = torch.ones(2, 40, 2, 4, dtype=q.dtype)
    module = ProbSparseAttention(factor=1, causal=True, seed=3).eval()
    assert module.selected_count(40) < 40  # some queries are lazy
    torch.testing.assert_close(module(q, k, v), torch.ones_like(v))


def _largest_allocation(module: nn.Module, *inputs: torch.Tensor) -> int:
    """Bytes of the largest storage an op of ``module``'s forward returns (a view counts its base's)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class LargestTensor(TorchDispatchMode):
        largest = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for tensor in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(tensor, torch.Tensor):
                    self.largest = max(self.largest, tensor.untyped_storage().nbytes())
            return out

    with torch.no_grad(), LargestTensor() as mode:
        module(*inputs)
    return mode.largest


@pytest.mark.parametrize("causal", [False, True])
def test_prob_sparse_never_copies_the_sampled_keys_per_query(causal: bool) -> None:
    """docs/pitfalls.md: the original copies the sampled keys per query, a ``[B, H, L, U, E]`` tensor that is most
    of its peak memory. No tensor the forward pass here allocates holds a tenth of its bytes."""
    length, head_dim = 1024, 32
    q, k, v = _qkv(1, length, length, 1, head_dim, dtype=torch.float32)
    module = ProbSparseAttention(factor=5, causal=causal, seed=1).eval()
    copied = length * module.sample_size(length) * head_dim * 4  # bytes of float32 [B, H, L, U, E], B = H = 1
    assert 0 < _largest_allocation(module, q, k, v) < copied / 10


def test_logsparse_never_builds_a_dense_score_or_mask_matrix() -> None:
    """docs/pitfalls.md: the public LogSparse builds a dense L x L mask and adds it to full scores, saving no memory.
    Here no tensor of the forward pass holds a tenth of an L x L float32 matrix."""
    length = 2048
    q, k, v = _qkv(1, length, length, 1, 8, dtype=torch.float32)
    assert 0 < _largest_allocation(LogSparseAttention().eval(), q, k, v) < length * length * 4 / 10
