"""``ema_decay``: Lightning's EMA of the weights is what is validated, checkpointed and kept."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from lightning.pytorch.callbacks import Callback

from forecast import Forecaster
from forecast.errors import ConfigError
from forecast.training import TrainingConfig

DECAY = 0.6


class StepWeights(Callback):
    """The model's weights after every optimizer step."""

    def __init__(self) -> None:
        self.steps: list[dict[str, torch.Tensor]] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.steps.append({k: v.detach().clone() for k, v in pl_module.model.state_dict().items()})


def toy_series(rows: int = 160) -> pd.DataFrame:
    t = np.arange(rows)
    return pd.DataFrame({"date": pd.date_range("2024-01-01", periods=rows, freq="h"),
                         "a": np.sin(t / 4.0) + 0.01 * t, "b": np.cos(t / 6.0)})


def expected_average(steps: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """torch.optim.swa_utils' EMA: the first step's weights, then decay * average + (1 - decay) * weights."""
    average = dict(steps[0])
    for weights in steps[1:]:
        average = {k: DECAY * average[k] + (1 - DECAY) * weights[k] for k in average}
    return average


@pytest.mark.parametrize("with_run_dir", [False, True])
def test_the_kept_weights_are_the_exponential_average_of_the_steps(tmp_path, with_run_dir):
    recorder = StepWeights()
    fc = Forecaster("dlinear", seq_len=16, label_len=8, pred_len=4, max_epochs=1, learning_rate=0.05,
                    batch_size=16, ema_decay=DECAY, callbacks=[recorder], progress=False)
    fc.fit(toy_series(), run_dir=tmp_path / "run" if with_run_dir else None)
    assert len(recorder.steps) > 3
    expected = expected_average(recorder.steps)
    kept = fc.model.state_dict()
    for name, value in expected.items():
        torch.testing.assert_close(kept[name], value, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(kept["seasonal.maps.0.weight"], recorder.steps[-1]["seasonal.maps.0.weight"])


def test_averaging_leaves_a_models_constants_and_the_saved_model_forecasts_the_same_digits(tmp_path):
    """Lightning averaged Informer's (non-persistent) position table with the weights: it drifted by 2e-7, and the
    fitted model forecast other digits than its weights saved and loaded."""
    fc = Forecaster("informer", seq_len=16, label_len=8, pred_len=4, max_epochs=1, d_model=16, n_heads=2, d_ff=32,
                    batch_size=16, ema_decay=DECAY, progress=False).fit(toy_series())
    built = Forecaster.load(fc.save(tmp_path / "saved"))
    for (name, kept), (_, fresh) in zip(fc.model.named_buffers(), built.model.named_buffers(), strict=True):
        assert torch.equal(kept, fresh), name
    pd.testing.assert_frame_equal(fc.predict(), built.predict(toy_series()))


def test_without_averaging_the_kept_weights_are_the_last_steps():
    recorder = StepWeights()
    fc = Forecaster("dlinear", seq_len=16, label_len=8, pred_len=4, max_epochs=1, learning_rate=0.05,
                    batch_size=16, callbacks=[recorder], progress=False).fit(toy_series())
    for name, value in recorder.steps[-1].items():
        torch.testing.assert_close(fc.model.state_dict()[name], value)


def test_a_decay_outside_zero_one_is_refused():
    for decay in (0.0, 1.0, 1.5):
        with pytest.raises(ConfigError, match="ema_decay"):
            TrainingConfig(ema_decay=decay)
