"""``WindowDataset``: sliding forecasting windows over arrays that are already prepared.

Index arithmetic only: no file reading, no scaling. Window ``i`` of a block of ``T``
rows is ``x = values[i : i+L]``, ``y = values[i+L-label_len : i+L+P]`` with the matching
time-feature rows, and there are ``T - L - P + 1`` windows.

A panel (many series) stores every series' rows back to back and names each window's first
row and series (``starts``, ``series``), so no window crosses two series
(:func:`~forecast.data.panel.panel_windows` draws them).

``target_len`` cuts ``y`` to the first steps of the horizon while the marks still cover all of it:
windows that reach past the rows a split may read, scored on the part that lies inside
(:meth:`~forecast.data.WindowDataModule.val_prefix_dataloader`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from forecast.errors import ConfigError

# x, y, x_mark, y_mark as in every paper; the covariate and series tensors are empty for a wide table.
ITEM_KEYS: tuple[str, ...] = ("x", "y", "x_mark", "y_mark", "x_known", "y_known", "series", "static", "truth")


def _as_float_matrix(array: np.ndarray | torch.Tensor, name: str) -> torch.Tensor:
    tensor = torch.as_tensor(array, dtype=torch.float32)
    if tensor.ndim != 2:
        raise ConfigError(f"WindowDataset: {name} must be 2-D [T, ...], got shape {tuple(tensor.shape)}.")
    return tensor


def _as_index(array: np.ndarray | torch.Tensor, name: str, ndim: int) -> torch.Tensor:
    tensor = torch.as_tensor(np.asarray(array), dtype=torch.int64)
    if tensor.ndim != ndim:
        raise ConfigError(f"WindowDataset: {name} must be {ndim}-D, got shape {tuple(tensor.shape)}.")
    return tensor


class WindowDataset(Dataset):
    """Forecasting windows over ``values [T, C]`` and time features ``marks [T, F]``.

    Items are dicts of tensors (views of the stored arrays): ``x [L, C]``, ``y [label_len+P, C]``,
    ``x_mark [L, F]``, ``y_mark [label_len+P, F]`` and, for panels, the known covariates
    ``x_known [L, K]``, ``y_known [label_len+P, K]`` (float32, values known ahead: the forecast
    steps' rows are part of ``y_known``), the window's ``series`` (int64 scalar, its position in
    the fitted series) and that series' ``static`` covariate codes (int64 ``[S]``). Without
    ``known``/``starts``/``series``/``static`` the rows are one series: K = 0, series 0, S = 0.

    ``starts [N]``: the first row of each window; ``series [N]``: its series, indexing the rows
    of ``static [N_series, S]``. The caller keeps windows inside their series.

    ``target_len`` (default ``pred_len``): ``y`` holds ``label_len + target_len`` rows, the first
    ``target_len`` steps of the horizon, while ``y_mark`` and ``y_known`` (model inputs) cover all
    ``pred_len``: the values after a window's ``target_len`` steps are never read.

    ``truth [T, C_out]`` (float64): the output variables in original units, as the data holds them; each item's
    ``truth [target_len, C_out]`` is its forecast steps' (``[target_len, 0]`` without one). Scores in original
    units are taken against these, not against ``y`` scaled back, whose float32 rounding (a zero comes back as
    3e-7, which MAPE divides by) they would carry.
    """

    def __init__(
        self,
        values: np.ndarray | torch.Tensor,
        marks: np.ndarray | torch.Tensor,
        seq_len: int,
        label_len: int,
        pred_len: int,
        *,
        known: np.ndarray | torch.Tensor | None = None,
        starts: np.ndarray | torch.Tensor | None = None,
        series: np.ndarray | torch.Tensor | None = None,
        static: np.ndarray | torch.Tensor | None = None,
        target_len: int | None = None,
        truth: np.ndarray | torch.Tensor | None = None,
    ) -> None:
        self.values = _as_float_matrix(values, "values")  # [T, C]
        self.marks = _as_float_matrix(marks, "marks")  # [T, F]
        rows = self.values.shape[0]
        self.known = _as_float_matrix(known if known is not None else np.zeros((rows, 0)), "known")  # [T, K]
        self.truth = torch.tensor(np.asarray(truth if truth is not None else np.zeros((rows, 0)), dtype=np.float64))
        if self.truth.ndim != 2:
            raise ConfigError(f"WindowDataset: truth must be 2-D [T, C_out], got shape {tuple(self.truth.shape)}.")
        for name, tensor in (("marks", self.marks), ("known", self.known), ("truth", self.truth)):
            if tensor.shape[0] != rows:
                raise ConfigError(
                    f"WindowDataset: values has {rows} rows but {name} has {tensor.shape[0]}; they must "
                    "describe the same timestamps."
                )
        if not (seq_len >= 1 and pred_len >= 1 and 0 <= label_len <= seq_len):
            raise ConfigError(
                f"WindowDataset: seq_len={seq_len}, label_len={label_len}, pred_len={pred_len}; "
                "need seq_len >= 1, pred_len >= 1 and 0 <= label_len <= seq_len."
            )
        target_len = pred_len if target_len is None else target_len
        if not 1 <= target_len <= pred_len:
            raise ConfigError(f"WindowDataset: target_len={target_len}; need 1 <= target_len <= pred_len={pred_len}.")
        self.seq_len = seq_len
        self.label_len = label_len
        self.pred_len = pred_len
        self.target_len = target_len
        span = seq_len + pred_len
        default_starts = np.arange(max(rows - span + 1, 0))
        self.starts = _as_index(starts if starts is not None else default_starts, "starts", 1)  # [N]
        self.series = _as_index(series if series is not None else np.zeros(len(self.starts)), "series", 1)  # [N]
        self.static = _as_index(static if static is not None else np.zeros((1, 0)), "static", 2)  # [N_series, S]
        if len(self.series) != len(self.starts):
            raise ConfigError(f"WindowDataset: {len(self.starts)} starts but {len(self.series)} series positions.")
        if len(self.starts) and (int(self.starts.min()) < 0 or int(self.starts.max()) + span > rows):
            raise ConfigError(f"WindowDataset: a window starts outside the {rows} rows (seq_len + pred_len = {span}).")
        if len(self.series) and (int(self.series.min()) < 0 or int(self.series.max()) >= self.static.shape[0]):
            raise ConfigError(f"WindowDataset: a series position lies outside the {self.static.shape[0]} series "
                              "of static.")

    def __len__(self) -> int:
        return len(self.starts)

    def window_start(self, index: int) -> int:
        """First row of window ``index`` (negative indices count from the end)."""
        return int(self.starts[range(len(self))[index]])  # IndexError outside the windows

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        position = range(len(self))[index]  # IndexError outside the windows
        start = int(self.starts[position])
        series = self.series[position]
        x_end = start + self.seq_len
        y_start = x_end - self.label_len
        y_end = x_end + self.pred_len
        target_end = x_end + self.target_len
        return {
            "x": self.values[start:x_end],  # [L, C]
            "y": self.values[y_start:target_end],  # [label_len+target_len, C]
            "x_mark": self.marks[start:x_end],  # [L, F]
            "y_mark": self.marks[y_start:y_end],  # [label_len+P, F]
            "x_known": self.known[start:x_end],  # [L, K]
            "y_known": self.known[y_start:y_end],  # [label_len+P, K]
            "series": series,  # [] int64
            "static": self.static[series],  # [S] int64
            "truth": self.truth[x_end:target_end],  # [target_len, C_out] float64
        }
