"""Figures for forecasts, errors by horizon, model comparisons and attention patterns.

Every function builds a ``matplotlib.figure.Figure`` directly and returns it: no pyplot,
so no global figure registry, nothing is shown or saved and nothing leaks between
calls. In a notebook, leave the figure as a cell's value to display it (it renders
itself as PNG, with or without ``%matplotlib inline``); save it with ``fig.savefig(path)``.

Forecast frames follow :meth:`forecast.Forecaster.predict`: a ``DatetimeIndex`` of the
forecast steps, one column per variable in original units and, for probabilistic
models, one column per quantile named by :func:`quantile_column` (``"OT_q0.1"``).
"""

from __future__ import annotations

import io
from collections.abc import Hashable, Mapping, Sequence
from datetime import tzinfo
from typing import Any

import matplotlib.dates as mdates
import numpy as np
import pandas as pd
import torch
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from forecast.errors import ConfigError, DataError
from forecast.layers.attention import LogSparseWeights, ProbSparseWeights
from forecast.layers.masks import logsparse_mask
from forecast.metrics import horizon_table

__all__ = [
    "NotebookFigure",
    "check_forecast_names",
    "plot_attention",
    "plot_forecast",
    "plot_horizon_errors",
    "plot_logsparse_pattern",
    "plot_model_comparison",
    "plot_probsparse",
    "quantile_column",
    "quantile_columns",
]

QUANTILE_MARK = "_q"


# ------------------------------------------------------------------ quantile columns


def quantile_column(column: Hashable, level: float) -> str:
    """The name of the ``level`` quantile column of ``column``: ``quantile_column("OT", 0.1) == "OT_q0.1"``."""
    return f"{column}{QUANTILE_MARK}{level:g}"


def _quantile_level(name: Hashable, column: Hashable) -> float | None:
    """The level of ``name`` as a quantile column of ``column`` (``"OT_q0.1"``, ``"OT"``: 0.1), else None."""
    prefix = f"{column}{QUANTILE_MARK}"
    if not isinstance(name, str) or not name.startswith(prefix):
        return None
    try:
        level = float(name[len(prefix):])
    except ValueError:
        return None
    return level if 0.0 < level < 1.0 else None


def quantile_columns(frame: pd.DataFrame, column: Hashable) -> dict[float, str]:
    """``{level: name}`` of the quantile columns of ``column`` in ``frame``, levels increasing."""
    found = {level: name for name in frame.columns if (level := _quantile_level(name, column)) is not None}
    return dict(sorted(found.items()))


def check_forecast_names(columns: Sequence[Hashable], levels: Sequence[float] = (), source: str = "") -> None:
    """ConfigError where a forecast frame's names would be ambiguous: two quantile levels that give one
    column name, or a variable of ``source`` (a file, named in the message) named like another variable's
    quantile column (``temp_q0.1`` beside ``temp``)."""
    names: dict[str, float] = {}
    for level in levels:
        name = quantile_column("", level)
        if name in names:
            raise ConfigError(f"quantiles {names[name]!r} and {level!r} both name the columns '<variable>{name}'. "
                              "Fix: levels that differ in their first six significant digits.")
        names[name] = level
    where = f"{source}: " if source else ""
    for column in columns:
        for other in columns:
            level = _quantile_level(column, other)
            if level is not None:
                renamed = str(column).replace(QUANTILE_MARK, "_p")
                raise ConfigError(
                    f"{where}variable {column!r} reads as the {level:g} quantile column of variable {other!r} in "
                    f"forecasts (named '<variable>{QUANTILE_MARK}<level>'). Fix: rename it, e.g. "
                    f"df.rename(columns={{{column!r}: {renamed!r}}}).")


def _names(value: Hashable | Sequence[Hashable], argument: str) -> list[Hashable]:
    """A name (a string, or any label that is not a list) or a list of names, as a list; none is an error."""
    names = [value] if isinstance(value, str) or not isinstance(value, Sequence) else list(value)
    if not names:
        raise ConfigError(f"{argument} is empty. Fix: name at least one.")
    return names


def _point_columns(frame: pd.DataFrame) -> list[Hashable]:
    """Columns of a forecast frame that are not quantile columns of another column."""
    quantile_names = {name for column in frame.columns for name in quantile_columns(frame, column).values()}
    return [column for column in frame.columns if column not in quantile_names]


def _intervals(levels: Mapping[float, str]) -> list[tuple[float, str, str]]:
    """``(coverage, lower name, upper name)`` of symmetric quantile pairs, widest first."""
    by_level = {round(level, 9): name for level, name in levels.items()}
    pairs = []
    for level, lower in by_level.items():
        upper = by_level.get(round(1.0 - level, 9))
        if level < 0.5 and upper is not None:
            pairs.append((round(1.0 - 2.0 * level, 9), lower, upper))
    return sorted(pairs, reverse=True)


# ------------------------------------------------------------------------- figures


class NotebookFigure(Figure):
    """A plain ``Figure`` that notebooks display as PNG even when no pyplot backend is active.

    Jupyter renders figures through a formatter that the inline backend registers only
    once pyplot loads it (``%matplotlib inline``); figures made without pyplot would
    otherwise show as text. Rendering happens only when a notebook asks for it.
    """

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png")  # into memory, for the notebook's display only
        return buffer.getvalue()


# ----------------------------------------------------------------------- time axes


def _time_indexed(frame: pd.DataFrame | pd.Series, name: str, date_column: str) -> pd.DataFrame:
    """A frame indexed by its timestamps (from its index or its ``date_column``)."""
    if isinstance(frame, pd.Series):
        frame = frame.to_frame()
    if not isinstance(frame, pd.DataFrame):
        raise DataError(f"{name} must be a DataFrame indexed by timestamps, got {type(frame).__name__}.")
    if not isinstance(frame.index, pd.DatetimeIndex):
        if date_column not in frame.columns:
            raise DataError(
                f"{name} has neither a DatetimeIndex nor a {date_column!r} column. Fix: index it by its "
                "timestamps or name the date column with date_column=..."
            )
        frame = frame.set_index(pd.DatetimeIndex(frame[date_column])).drop(columns=date_column)
    return frame


def _on_one_clock(frames: Sequence[pd.DataFrame | None]) -> tuple[list[pd.DataFrame | None], tzinfo | None]:
    """The frames in the zone of the first one with a time zone (the others with a zone converted to it), so
    frames written in different zones line up, and that zone, in which the time axis is labelled. Each step is
    drawn at its instant: on the wall clock a day whose clock goes back repeats an hour. Where a frame has no
    zone, all are drawn on the wall clock (that frame taken to be on it), and the zone is None."""
    present = [frame for frame in frames if frame is not None]
    zone = next((frame.index.tz for frame in present if frame.index.tz is not None), None)
    if zone is None:
        return list(frames), None
    if all(frame.index.tz is not None for frame in present):
        return [frame.set_axis(frame.index.tz_convert(zone)) if frame is not None else None for frame in frames], zone
    return [frame.set_axis(frame.index.tz_convert(zone).tz_localize(None))
            if frame is not None and frame.index.tz is not None else frame for frame in frames], None


def _format_time_axis(ax: Axes, zone: tzinfo | None = None) -> None:
    locator = mdates.AutoDateLocator(tz=zone)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=zone))


def _figure(n_rows: int, n_cols: int = 1, *, width: float = 9.0, row_height: float = 2.6,
            figsize: tuple[float, float] | None = None, **subplot_options: Any) -> tuple[Figure, np.ndarray]:
    fig = NotebookFigure(figsize=figsize or (width, 0.6 + row_height * n_rows), layout="constrained")
    axes = fig.subplots(n_rows, n_cols, squeeze=False, **subplot_options)  # [n_rows, n_cols]
    return fig, axes


# ------------------------------------------------------------------------ forecasts


_ONE_POINT = {"marker": "o", "ms": 5}  # how a line of one step is drawn: it has no length to show


def plot_forecast(
    forecast: pd.DataFrame,
    *,
    history: pd.DataFrame | None = None,
    truth: pd.DataFrame | None = None,
    columns: Sequence[Hashable] | None = None,
    date_column: str = "date",
    title: str | None = None,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """The forecast of each variable against its history and, when known, the truth.

    One axis per variable (``columns``, a name or a list of names, default every point column of ``forecast``),
    sharing the time axis. Per axis: the ``history`` line, the ``truth`` line, shaded
    intervals from symmetric quantile columns (``q`` with ``1 - q``, e.g. 0.1 and 0.9
    give the 80% interval; widest lightest) and the forecast line, in that order. All
    frames are in original units and indexed by timestamps (or hold ``date_column``);
    ``history`` and ``truth`` may hold more columns than plotted. Frames in time zones are drawn at their instants,
    labelled on the clock of the first one with a zone (with a frame without one, all on the wall clock); a panel's
    long forecast is one series' rows at a time.
    """
    (forecast, history, truth), zone = _on_one_clock([
        _time_indexed(frame, name, date_column) if frame is not None else None
        for frame, name in ((forecast, "forecast"), (history, "history"), (truth, "truth"))])
    if forecast.empty:
        raise DataError("forecast has no rows to plot. Fix: pass the frame Forecaster.predict() returns (a panel's: "
                        "the rows of one of its series).")
    if forecast.index.has_duplicates:
        raise DataError(
            f"forecast repeats timestamps ({forecast.index[forecast.index.duplicated()][0]} first), as a panel's "
            "long forecast does, one block of rows per series: its lines would zig-zag through every series. Fix: "
            "plot one series, forecast[forecast[<id column>] == key], or Forecaster.plot(series=key)."
        )
    available = _point_columns(forecast)
    point = _ONE_POINT if len(forecast) == 1 else {}
    chosen = available if columns is None else _names(columns, "columns")
    missing = [column for column in chosen if column not in available]
    if missing or not chosen:
        raise ConfigError(f"columns {missing or chosen!r} are not forecast columns; choose from {available!r}.")
    fig, axes = _figure(len(chosen), sharex=True, figsize=figsize)
    for ax, column in zip(axes[:, 0], chosen, strict=True):
        if history is not None and len(history) and column in history.columns:  # none: no empty legend entry
            ax.plot(history.index, history[column].to_numpy(), color="0.45", lw=1.2, label="history",
                    **(_ONE_POINT if len(history) == 1 else {}))
        if truth is not None and column in truth.columns:
            ax.plot(truth.index, truth[column].to_numpy(), color="black", lw=1.2, label="truth",
                    **(_ONE_POINT if len(truth) == 1 else {}))
        intervals = _intervals(quantile_columns(forecast, column))
        for rank, (coverage, lower, upper) in enumerate(intervals):
            shade = {"color": "C0", "alpha": 0.15 + 0.2 * rank / max(len(intervals), 1),
                     "label": f"{coverage:.0%} interval"}
            if point:  # a band one step wide has no area: a bar from the lower quantile to the upper
                ax.vlines(forecast.index, forecast[lower].to_numpy(), forecast[upper].to_numpy(), lw=8, **shade)
            else:
                ax.fill_between(forecast.index, forecast[lower].to_numpy(), forecast[upper].to_numpy(), lw=0, **shade)
        ax.plot(forecast.index, forecast[column].to_numpy(), color="C0", lw=1.6, label="forecast", **point)
        ax.set_ylabel(str(column))
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize="small")
        _format_time_axis(ax, zone)
    if title:
        fig.suptitle(title)
    return fig


# ------------------------------------------------------------------- error reports


def plot_horizon_errors(
    report: pd.DataFrame | Mapping[str, pd.DataFrame],
    *,
    metrics: str | Sequence[str] = ("mse", "mae"),
    scale: str = "original",
    title: str | None = None,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Error by horizon step (1..P), one axis per metric, one line per report.

    ``report`` is a :func:`forecast.metrics.report` frame (``Forecaster.evaluate(detail=True)``),
    or a mapping ``label -> report`` to compare models on the same axes. ``scale`` is
    ``"original"`` or ``"standardized"``.
    """
    metrics = _names(metrics, "metrics")
    reports = {"forecast": report} if isinstance(report, pd.DataFrame) else dict(report)
    if not reports:
        raise ConfigError("plot_horizon_errors needs at least one report.")
    tables = {label: horizon_table(frame, scale) for label, frame in reports.items()}
    for label, table in tables.items():
        absent = [metric for metric in metrics if metric not in table.columns]
        if absent:
            raise ConfigError(f"report {label!r} has no per-horizon {absent}; it holds {list(table.columns)}.")
    fig, axes = _figure(len(metrics), sharex=True, row_height=2.4, figsize=figsize)
    for ax, metric in zip(axes[:, 0], metrics, strict=True):
        for label, table in tables.items():
            ax.plot(table.index.to_numpy(), table[metric].to_numpy(), marker="o", ms=3, label=str(label))
        ax.set_ylabel(f"{metric} ({scale})")
        ax.grid(alpha=0.3)
        if len(tables) > 1:
            ax.legend(fontsize="small")
    axes[-1, 0].set_xlabel("horizon step")
    if title:
        fig.suptitle(title)
    return fig


def _distinct_colors(count: int) -> list[Any]:
    """``count`` colours no two alike: the default cycle's ten, else ``tab20``'s twenty, else a sampled colormap
    (the cycle repeats after ten, so an eleventh label would share the first one's colour)."""
    if count <= 10:
        return [f"C{index}" for index in range(count)]
    if count <= 20:
        return [colormaps["tab20"](index) for index in range(count)]
    return list(colormaps["turbo"](np.linspace(0.0, 1.0, count)))


def plot_model_comparison(
    results: pd.DataFrame,
    *,
    metrics: str | Sequence[str] = ("mse", "mae"),
    label: str = "model",
    group: str | None = "pred_len",
    title: str | None = None,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Bar chart of models side by side, one axis per metric.

    ``results`` holds one row per run (the results CSV format: ``model``, ``mse``,
    ``mae``, ``pred_len``, ``seed``, ...). Bars are grouped by ``group`` (skipped when
    ``None`` or not a column) with one bar per ``label`` value; repeated runs (seeds)
    are averaged and their standard deviation drawn as an error bar. To compare with
    published numbers, append them as rows with their own label (e.g. ``"informer
    (paper)"``). Axis i holds one bar container per label.
    """
    metrics = _names(metrics, "metrics")
    needed = [label, *metrics]
    missing = [column for column in needed if column not in results.columns]
    if missing:
        raise DataError(f"results lack the columns {missing}; they hold {list(results.columns)}.")
    if results.empty:
        raise DataError("results has no rows to plot.")
    grouping = group if group is not None and group in results.columns else None
    frame = results.assign(_group=results[grouping] if grouping else "all")
    labels = list(dict.fromkeys(frame[label]))
    groups = sorted(dict.fromkeys(frame["_group"]), key=lambda value: (str(type(value)), value))
    fig, axes = _figure(len(metrics), row_height=2.8, figsize=figsize)
    width = 0.8 / len(labels)
    positions = np.arange(len(groups))
    colors = _distinct_colors(len(labels))
    for ax, metric in zip(axes[:, 0], metrics, strict=True):
        stats = frame.groupby(["_group", label], sort=False)[metric].agg(["mean", "std", "count"])
        for index, name in enumerate(labels):
            rows = [stats.loc[(g, name)] if (g, name) in stats.index else None for g in groups]
            means = [np.nan if row is None else row["mean"] for row in rows]
            spread = [0.0 if row is None or row["count"] < 2 else row["std"] for row in rows]
            ax.bar(positions + (index - (len(labels) - 1) / 2) * width, means, width,
                   yerr=spread if any(spread) else None, capsize=2, label=str(name), color=colors[index])
        ax.set_xticks(positions, [str(g) for g in groups])
        ax.set_ylabel(metric)
        ax.grid(axis="y", alpha=0.3)
        # beside the axis: inside it, a legend of many labels covered the tallest bars
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), ncols=1 + len(labels) // 14)
    if grouping:
        axes[-1, 0].set_xlabel(grouping)
    if title:
        fig.suptitle(title)
    return fig


# ------------------------------------------------------------------------ attention


def _dense_weights(weights: Any) -> torch.Tensor:
    """``[B, H, L, S]`` float tensor from a dense tensor/array or a sparse weights object."""
    if isinstance(weights, (ProbSparseWeights, LogSparseWeights)):
        dense = weights.to_dense()
    elif isinstance(weights, np.ndarray):
        dense = torch.from_numpy(weights)
    elif isinstance(weights, torch.Tensor):
        dense = weights
    else:
        raise ConfigError(
            f"attention weights of type {type(weights).__name__}; pass a [B, H, L, S] or [L, S] tensor, a "
            "ProbSparseWeights or a LogSparseWeights (e.g. from Forecaster.attention_weights())."
        )
    if dense.dim() == 2:
        dense = dense[None, None]  # [L, S] -> [1, 1, L, S]
    if dense.dim() != 4:
        raise ConfigError(f"attention weights must be [B, H, L, S] or [L, S], got shape {tuple(dense.shape)}.")
    return dense.detach().to("cpu", torch.float32)


def _pick(name: str, value: int, size: int) -> int:
    if not -size <= value < size:
        raise ConfigError(f"{name}={value} is out of range for {size} {name}es; use 0..{size - 1}.")
    return value % size


def plot_attention(
    weights: Any,
    *,
    batch: int = 0,
    head: int = 0,
    title: str | None = None,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Heat map of one head's attention probabilities (query rows, key columns), with a colorbar.

    ``weights``: ``[B, H, L, S]`` (or ``[L, S]``) probabilities, or the
    ``ProbSparseWeights``/``LogSparseWeights`` a sparse attention returns (densified;
    small L only). Two axes: the map and its colorbar.
    """
    dense = _dense_weights(weights)
    b, h = _pick("batch", batch, dense.shape[0]), _pick("head", head, dense.shape[1])
    fig, axes = _figure(1, width=5.5, row_height=4.4, figsize=figsize)
    ax = axes[0, 0]
    image = ax.imshow(dense[b, h].numpy(), aspect="auto", interpolation="nearest", cmap="viridis")
    fig.colorbar(image, ax=ax, label="attention weight")
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    ax.set_title(title or f"attention, batch {b}, head {h}")
    return fig


def plot_probsparse(
    weights: ProbSparseWeights,
    *,
    batch: int = 0,
    head: int = 0,
    title: str | None = None,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """ProbSparse at work: every query's sparsity M and the queries it gave exact attention.

    Top: M ``[H, L]`` per head and query position, the selected (top-u) queries marked
    with white dots. Bottom: the attention map of ``head`` that ProbSparse effectively
    used: selected queries attend exactly, lazy queries spread uniformly (their output is
    the mean of the values they may see). Four axes: two panels and their colorbars.
    """
    if not isinstance(weights, ProbSparseWeights):
        raise ConfigError(
            f"plot_probsparse takes the ProbSparseWeights of a 'prob' attention, got {type(weights).__name__}; "
            "use plot_attention for other attention weights."
        )
    sparsity = weights.sparsity.detach().to("cpu", torch.float32)  # [B, H, L]
    selected = weights.selected_queries.detach().cpu()  # [B, H, u]
    b, h = _pick("batch", batch, sparsity.shape[0]), _pick("head", head, sparsity.shape[1])
    n_heads, query_len = sparsity.shape[1], sparsity.shape[2]
    fig, axes = _figure(2, width=7.0, row_height=3.4, figsize=figsize)
    top, bottom = axes[:, 0]
    image = top.imshow(sparsity[b].numpy(), aspect="auto", interpolation="nearest", cmap="magma",
                       extent=(-0.5, query_len - 0.5, n_heads - 0.5, -0.5))
    fig.colorbar(image, ax=top, label="sparsity M")
    head_of_selected = torch.arange(n_heads).unsqueeze(-1).expand_as(selected[b])  # [H, u]
    top.scatter(selected[b].flatten().numpy(), head_of_selected.flatten().numpy(), s=10, c="white",
                edgecolors="black", linewidths=0.4, label=f"selected ({selected.shape[-1]} per head)")
    top.set_xlabel("query position")
    top.set_ylabel("head")
    top.set_yticks(range(n_heads))
    top.legend(loc="upper right", fontsize="small")
    top.set_title(title or "ProbSparse query sparsity M = max - mean of sampled scores")
    dense = weights.to_dense()[b, h].detach().to("cpu", torch.float32)  # [L, S]
    image = bottom.imshow(dense.numpy(), aspect="auto", interpolation="nearest", cmap="viridis")
    fig.colorbar(image, ax=bottom, label="attention weight")
    bottom.set_xlabel("key position")
    bottom.set_ylabel("query position")
    bottom.set_title(f"effective attention, head {h}: selected rows exact, lazy rows uniform")
    return fig


def plot_logsparse_pattern(
    length: int,
    *,
    local_window: int = 0,
    sub_len: int | None = None,
    title: str | None = None,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """The LogSparse pattern (which keys each query may attend) and its cost against full attention.

    Left: the ``[L, L]`` boolean pattern of :func:`forecast.layers.masks.logsparse_mask`
    (dark = attended). Right: keys per query, LogSparse against full causal attention
    (log scale). Two axes; the right one holds two lines.
    """
    mask = logsparse_mask(length, local_window, sub_len).numpy()  # [L, L]
    fig, axes = _figure(1, 2, width=10.0, row_height=4.2, figsize=figsize)
    left, right = axes[0]
    left.imshow(mask, cmap="Greys", interpolation="nearest", vmin=0, vmax=1)
    left.set_xlabel("key position")
    left.set_ylabel("query position")
    options = f"local_window={local_window}, sub_len={sub_len}"
    left.set_title(title or f"LogSparse pattern, L={length} ({options})", fontsize="medium")
    positions = np.arange(length)
    right.plot(positions, mask.sum(axis=1), label=f"LogSparse (max {int(mask.sum(axis=1).max())})")
    right.plot(positions, positions + 1, label=f"full causal (max {length})")
    right.set_yscale("log")
    right.set_xlabel("query position")
    right.set_ylabel("keys attended")
    right.grid(alpha=0.3)
    right.legend(fontsize="small")
    right.set_title(f"memory per query: O(log L) vs O(L); total {int(mask.sum())} vs {length * (length + 1) // 2}",
                    fontsize="medium")
    return fig

