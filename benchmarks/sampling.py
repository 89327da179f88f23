"""LogSparse autoregressive sampling of one evaluation batch: the rollout with vs without its key/value cache.

ETTh1-like M windows (7 variables, 4 timeF calendar features), seq_len 48, pred_len 24, batch 32,
`n_samples` paths per window (ForecastModule's test step draws 100), Gaussian head, eval mode under
torch.inference_mode, 1 torch thread. The two are timed in alternating order, pair after pair, in one
process: the per-pair ratio is what counts on a loaded machine. Inputs are random (timing does not
depend on the values).

    python benchmarks/sampling.py SIZE N_SAMPLES PAIRS     # SIZE: default (LogSparseConfig) or improved (recipe)
"""
import os
import sys
import time

import torch
from forecast.models import DataSpec, LogSparseConfig, LogSparseTransformer
from forecast.recipes import get_recipe

size, n_samples, pairs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)
spec = DataSpec(seq_len=48, label_len=24, pred_len=24, c_in=7, c_out=7, n_time_features=4)
g = torch.Generator().manual_seed(0)
x = torch.randn(32, 48, 7, generator=g)
x_mark, y_mark = torch.rand(32, 48, 4, generator=g) - 0.5, torch.rand(32, 48, 4, generator=g) - 0.5
options = {} if size == "default" else get_recipe("improved").options_for("logsparse")
torch.manual_seed(0)
model = LogSparseTransformer(spec, LogSparseConfig(**options, head="gaussian", decoding="autoregressive")).eval()
c = model.config
print(f"{size}: d_model {c.d_model}, {c.n_heads} heads, {c.n_layers} layers, d_ff {c.d_ff}, k {c.qk_kernel_size}, "
      f"revin {c.revin}; 32 windows x {n_samples} paths x 7 series = {32 * n_samples * 7} sequences; "
      f"torch {torch.__version__}, {torch.get_num_threads()} thread", flush=True)


def run(cache: bool) -> tuple[float, torch.Tensor]:
    model.kv_cache = cache
    with torch.inference_mode():
        begin = time.perf_counter()
        paths = model.sample(x, x_mark, y_mark, n_samples, generator=torch.Generator().manual_seed(1))
        return time.perf_counter() - begin, paths


run(True)  # warm-up (allocator, one-time initialisation)
ratios = []
for pair in range(pairs):
    order = (False, True) if pair % 2 == 0 else (True, False)  # alternate which of the two goes first
    timed = {cache: run(cache) for cache in order}
    (uncached, a), (cached, b) = timed[False], timed[True]
    ratios.append(uncached / cached)
    print(f"  pair {pair}: uncached {uncached:8.2f} s  cached {cached:6.2f} s  ratio {ratios[-1]:5.1f}x  "
          f"max|diff| {(a - b).abs().max().item():.1e}  load avg {os.getloadavg()[0]:.1f}", flush=True)
print(f"  ratios: min {min(ratios):.1f}x, median {sorted(ratios)[len(ratios) // 2]:.1f}x", flush=True)
