"""forecast.plotting: every function returns a Figure whose artists hold the data given.

Figures are built with matplotlib.figure.Figure (no pyplot): nothing is registered,
shown or saved.
"""

from __future__ import annotations

import matplotlib.dates as mdates
import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib import _pylab_helpers
from matplotlib.container import BarContainer
from matplotlib.figure import Figure

from forecast.errors import ConfigError, DataError
from forecast.layers.attention import FullAttention, LogSparseAttention, ProbSparseAttention, ProbSparseWeights
from forecast.layers.masks import logsparse_mask
from forecast.metrics import horizon_table, point_summary, report
from forecast.plotting import (
    plot_attention,
    plot_forecast,
    plot_horizon_errors,
    plot_logsparse_pattern,
    plot_model_comparison,
    plot_probsparse,
    quantile_column,
    quantile_columns,
)


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def forecast_frame(levels: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75, 0.9), tz: str | None = None) -> pd.DataFrame:
    index = pd.date_range("2022-03-01 12:00", periods=6, freq="h", tz=tz, name="date")
    frame = pd.DataFrame({"a": np.linspace(0.0, 1.0, 6), "OT": np.linspace(10.0, 12.0, 6)}, index=index)
    for column in ("a", "OT"):
        for level in levels:
            frame[quantile_column(column, level)] = frame[column] + (level - 0.5)
    return frame


def past_frame(tz: str | None = None) -> pd.DataFrame:
    index = pd.date_range("2022-03-01 00:00", periods=12, freq="h", tz=tz, name="date")
    return pd.DataFrame({"a": np.arange(12.0), "b": np.ones(12), "OT": np.arange(12.0) + 5}, index=index)


def lines_by_label(ax) -> dict[str, object]:
    return {line.get_label(): line for line in ax.get_lines()}


# ------------------------------------------------------------------ quantile columns


@pytest.mark.parametrize("level", [0.01, 0.025, 0.1, 0.5, 0.9, 0.975, 0.99])
def test_quantile_column_names_parse_back_to_their_level(level):
    name = quantile_column("OT", level)
    frame = pd.DataFrame(columns=["OT", name, "OT_qx", "OTHER_q0.5", "OT_q1.5"])
    assert quantile_columns(frame, "OT") == {level: name}


def test_quantile_column_format():
    assert quantile_column("OT", 0.1) == "OT_q0.1"
    assert quantile_column(3, 0.9) == "3_q0.9"


# ------------------------------------------------------------------------- forecasts


def test_forecast_figure_has_one_axis_per_variable_with_history_truth_forecast_and_bands():
    forecast, past = forecast_frame(), past_frame()
    truth = forecast[["a", "OT"]] + 0.3
    fig = plot_forecast(forecast, history=past, truth=truth)
    assert isinstance(fig, Figure)
    assert [ax.get_ylabel() for ax in fig.axes] == ["a", "OT"]
    for ax, column in zip(fig.axes, ("a", "OT")):
        lines = lines_by_label(ax)
        assert list(lines) == ["history", "truth", "forecast"]
        np.testing.assert_allclose(lines["forecast"].get_ydata(), forecast[column])
        np.testing.assert_allclose(lines["history"].get_ydata(), past[column])
        np.testing.assert_allclose(lines["truth"].get_ydata(), truth[column])
        x = mdates.date2num(forecast.index.to_pydatetime())
        np.testing.assert_allclose(mdates.date2num(lines["forecast"].get_xdata()), x)
        # 0.1/0.9 and 0.25/0.75 pair into the 80% and 50% intervals; 0.5 alone draws no band
        assert len(ax.collections) == 2
        assert {c.get_label() for c in ax.collections} == {"80% interval", "50% interval"}


def test_forecast_figure_without_quantiles_or_past_and_column_choice():
    forecast = forecast_frame(levels=())
    fig = plot_forecast(forecast, columns=["OT"])
    assert len(fig.axes) == 1
    assert list(lines_by_label(fig.axes[0])) == ["forecast"]
    assert not fig.axes[0].collections


def test_forecast_figure_takes_a_column_name_that_is_not_a_string():
    forecast = forecast_frame(levels=()).rename(columns={"a": 0})
    assert plot_forecast(forecast, columns=0).axes[0].get_ylabel() == "0"


def test_forecast_figure_accepts_time_zones_and_date_columns():
    forecast = forecast_frame(tz="Europe/Paris")
    past = past_frame(tz="Europe/Paris").reset_index()  # a 'date' column instead of the index
    fig = plot_forecast(forecast, history=past)
    history = lines_by_label(fig.axes[1])["history"]
    np.testing.assert_allclose(mdates.date2num(history.get_xdata()), mdates.date2num(past["date"].dt.to_pydatetime()))
    assert str(fig.axes[1].xaxis.get_major_locator().tz) == "Europe/Paris"  # labelled on the frames' clock


def test_forecast_figure_puts_frames_in_other_zones_on_one_clock():
    """History in UTC beside a forecast in Paris: each frame's own zone was dropped, so the forecast was drawn
    two hours after the history's last step."""
    forecast = forecast_frame(tz="UTC").tz_convert("Europe/Paris")  # 13:00 UTC is 14:00 in Paris (summer time)
    past = past_frame(tz="UTC")
    fig = plot_forecast(forecast, history=past)
    lines = lines_by_label(fig.axes[0])
    instants = mdates.date2num(past.index.to_pydatetime())
    np.testing.assert_allclose(mdates.date2num(lines["history"].get_xdata()), instants)
    step = mdates.date2num(lines["forecast"].get_xdata())[0] - mdates.date2num(lines["history"].get_xdata())[-1]
    assert step == pytest.approx(1 / 24)  # the forecast's first hour follows the history's last
    assert str(fig.axes[0].xaxis.get_major_locator().tz) == "Europe/Paris"  # the first frame's clock
    naive_past = past.tz_convert("Europe/Paris").tz_localize(None)  # a frame without a zone: all on the wall clock
    lines = lines_by_label(plot_forecast(forecast, history=naive_past).axes[0])
    step = mdates.date2num(lines["forecast"].get_xdata())[0] - mdates.date2num(lines["history"].get_xdata())[-1]
    assert step == pytest.approx(1 / 24)


def test_a_forecast_across_the_clock_going_back_is_drawn_hour_by_hour():
    """Its wall clock repeats 02:00, which was refused as a panel's repeated timestamps (Fix: plot one series)."""
    dates = pd.date_range("2021-10-31 00:00", periods=6, freq="h", tz="Europe/Berlin")  # 02:00 twice
    forecast = pd.DataFrame({"OT": np.arange(6.0)}, index=dates)
    x = mdates.date2num(lines_by_label(plot_forecast(forecast).axes[0])["forecast"].get_xdata())
    np.testing.assert_allclose(np.diff(x), 1 / 24)


def test_forecast_figure_of_one_step_shows_the_point_and_its_interval():
    """A one-step forecast was a line of one point (invisible) with a band of no width."""
    forecast = forecast_frame(levels=(0.1, 0.9)).iloc[:1]
    truth = forecast[["a", "OT"]] + 0.3
    ax = plot_forecast(forecast, truth=truth, columns="a").axes[0]
    lines = lines_by_label(ax)
    assert lines["forecast"].get_marker() == "o" and lines["truth"].get_marker() == "o"
    (band,) = ax.collections
    (segment,) = band.get_segments()  # from the 0.1 quantile to the 0.9 one at the forecast's step
    np.testing.assert_allclose(segment[:, 1], [forecast["a_q0.1"].item(), forecast["a_q0.9"].item()])
    assert band.get_label() == "80% interval"



def test_forecast_figure_shows_a_history_of_one_row():
    """plot(history=1) gave a history line of one point without a marker: in the legend, invisible on the axis."""
    history = past_frame().iloc[-1:]
    line = lines_by_label(plot_forecast(forecast_frame(), history=history, columns="a").axes[0])["history"]
    assert line.get_marker() == "o"
    np.testing.assert_allclose(line.get_xydata()[:, 1], history["a"].to_numpy())
    assert lines_by_label(plot_forecast(forecast_frame(), history=past_frame(), columns="a").axes[0])[
        "history"].get_marker() in ("None", "", None)


@pytest.mark.parametrize(("pred_len", "title"),
                         [(1, "forecast of the next 1 step"), (3, "forecast of the next 3 steps")])
def test_a_forecasters_plot_titles_its_horizon(pred_len, title):
    """A one-step forecast was titled 'the next 1 steps'."""
    from forecast import Forecaster

    frame = past_frame().iloc[:, :0].assign(OT=np.sin(np.arange(12.0)))
    frame = pd.concat([frame.assign(OT=frame.OT + week) for week in range(10)]).set_axis(
        pd.date_range("2022-03-01", periods=120, freq="h", name="date"))
    fc = Forecaster("naive", seq_len=8, label_len=4, pred_len=pred_len).fit(frame)
    fig = fc.plot()
    assert fig.get_suptitle() == f"naive: {title}"
    assert len(lines_by_label(fig.axes[0])["forecast"].get_xydata()) == pred_len


def test_a_forecasters_history_shows_the_gaps_fill_nan_filled():
    """The history drew the values fill_nan made up (a forward fill's flat run) as observations, where the truth
    of the same rows in another window is a gap."""
    from forecast import Forecaster

    dates = pd.date_range("2022-03-01", periods=120, freq="h", name="date")
    frame = pd.DataFrame({"OT": np.sin(np.arange(120.0)) + np.arange(120.0) / 50}, index=dates)
    frame.iloc[[-3, -2], 0] = np.nan  # in the last lookback; in the last test window's truth
    fc = Forecaster("naive", seq_len=8, label_len=4, pred_len=2, fill_nan="ffill").fit(frame)
    history = lines_by_label(fc.plot(history=5).axes[0])["history"].get_xydata()[:, 1]
    np.testing.assert_array_equal(np.isnan(history), [False, False, True, True, False])
    np.testing.assert_allclose(history[[0, 1, 4]], frame.OT.to_numpy()[[-5, -4, -1]])
    lines = lines_by_label(fc.plot(window=-1).axes[0])  # lookback ends at the first gap, truth holds the second
    assert np.isnan(lines["history"].get_xydata()[-1, 1]) and np.isnan(lines["truth"].get_xydata()[0, 1])
    np.testing.assert_allclose(lines["history"].get_xydata()[:-1, 1], frame.OT.to_numpy()[-10:-3], rtol=1e-6)


def test_forecast_figure_lists_no_history_of_no_rows():
    """plot(history=0) drew an empty history line that the legend still listed."""
    ax = plot_forecast(forecast_frame(), history=past_frame().iloc[:0], columns="a").axes[0]
    assert "history" not in lines_by_label(ax)
    assert "history" not in [text.get_text() for text in ax.get_legend().get_texts()]


def test_forecast_figure_refuses_a_forecast_of_no_rows():
    """A forecast of no rows (a panel's forecast filtered by an id it lacks) gave a figure of empty axes."""
    with pytest.raises(DataError, match="no rows"):
        plot_forecast(forecast_frame().iloc[:0], history=past_frame())

def test_forecast_figure_refuses_a_panels_long_forecast():
    """A panel's forecast (rows of every series, an id column): one axis for the id and one line zig-zagging
    through the series."""
    index = pd.DatetimeIndex(list(pd.date_range("2022-01-01", periods=3, freq="D")) * 2, name="date")
    panel = pd.DataFrame({"store": ["x"] * 3 + ["y"] * 3, "sales": np.arange(6.0)}, index=index)
    with pytest.raises(DataError, match=r"forecast repeats timestamps \(2022-01-01 00:00:00 first\).*Fix: plot one "
                                        r"series, forecast\[forecast\[<id column>\] == key\]"):
        plot_forecast(panel)
    assert len(plot_forecast(panel[panel["store"] == "x"].drop(columns="store")).axes) == 1


def test_forecast_figure_rejects_unknown_columns_and_untimed_frames():
    with pytest.raises(ConfigError, match="'nope'"):
        plot_forecast(forecast_frame(), columns=["nope"])
    with pytest.raises(ConfigError, match="columns is empty"):
        plot_forecast(forecast_frame(), columns=[])
    with pytest.raises(DataError, match="DatetimeIndex"):
        plot_forecast(forecast_frame().reset_index(drop=True))


# --------------------------------------------------------------------------- reports


def horizon_report(offset: float, horizon: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    true = rng.standard_normal((20, horizon, 2))
    pred = true + offset * np.arange(1, horizon + 1)[None, :, None] * rng.standard_normal((20, horizon, 2))
    summary = point_summary(pred, true)
    return report({"original": summary, "standardized": summary}, variables=["a", "OT"])


def test_horizon_errors_plot_one_axis_per_metric_one_line_per_report():
    first, second = horizon_report(0.1), horizon_report(0.3)
    fig = plot_horizon_errors(first)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    for ax, metric in zip(fig.axes, ("mse", "mae")):
        (line,) = ax.get_lines()
        np.testing.assert_array_equal(line.get_xdata(), np.arange(1, 6))
        np.testing.assert_allclose(line.get_ydata(), horizon_table(first)[metric])
    fig = plot_horizon_errors({"informer": first, "naive": second}, metrics=("mse",))
    assert len(fig.axes) == 1
    assert [line.get_label() for line in fig.axes[0].get_lines()] == ["informer", "naive"]
    with pytest.raises(ConfigError, match="crps"):
        plot_horizon_errors(first, metrics=("crps",))
    assert len(plot_horizon_errors(first, metrics="mse").axes) == 1  # one name, not the letters m, s, e
    with pytest.raises(ConfigError, match="metrics is empty"):
        plot_horizon_errors(first, metrics=())


def results_table() -> pd.DataFrame:
    rows = []
    for model, base in (("informer", 0.5), ("logsparse", 0.6), ("naive", 1.0)):
        for pred_len in (24, 48):
            for seed in (0, 1):
                mse = base + pred_len / 100 + 0.01 * seed
                rows.append(dict(model=model, pred_len=pred_len, seed=seed, mse=mse, mae=mse / 2))
    return pd.DataFrame(rows)


def test_model_comparison_draws_mean_bars_per_model_and_group():
    results = results_table()
    fig = plot_model_comparison(results)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    for ax, metric in zip(fig.axes, ("mse", "mae")):
        bars = [c for c in ax.containers if isinstance(c, BarContainer)]
        assert [c.get_label() for c in bars] == ["informer", "logsparse", "naive"]
        assert all(len(c.patches) == 2 for c in bars)
        expected = results[results.model == "logsparse"].groupby("pred_len")[metric].mean().to_numpy()
        np.testing.assert_allclose([p.get_height() for p in bars[1].patches], expected)
        assert all(c.errorbar is not None for c in bars)  # two seeds: spread is drawn
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["24", "48"]


def test_model_comparison_without_groups_and_with_missing_columns():
    single = results_table().query("seed == 0 and pred_len == 24").drop(columns="pred_len")
    fig = plot_model_comparison(single, metrics=("mse",))
    bars = [c for c in fig.axes[0].containers if isinstance(c, BarContainer)]
    assert len(bars) == 3 and all(len(c.patches) == 1 and c.errorbar is None for c in bars)
    with pytest.raises(DataError, match="mae"):
        plot_model_comparison(single.drop(columns="mae"))



@pytest.mark.parametrize("count", [3, 13, 25])
def test_model_comparison_gives_every_label_a_colour_of_its_own(count):
    """The compare notebook plots 13 labels (ours and the papers'): the colour cycle's ten repeated, so 'naive'
    and 'PatchTST (paper)' were both blue and the legend could not tell them apart."""
    results = pd.DataFrame({"model": [f"model {index}" for index in range(count)], "mse": np.arange(1.0, count + 1)})
    fig = plot_model_comparison(results, metrics="mse")
    bars = [c for c in fig.axes[0].containers if isinstance(c, BarContainer)]
    colours = {tuple(np.round(c.patches[0].get_facecolor(), 6)) for c in bars}
    assert len(bars) == count and len(colours) == count



def test_model_comparison_legend_covers_no_bar():
    """The compare notebook's legend (13 labels, four columns inside the axis) hid the top of its tallest bars."""
    rng = np.random.default_rng(0)
    results = pd.DataFrame([dict(model=f"model {index}", pred_len=pred_len, mse=rng.uniform(0.3, 1.4), mae=0.5)
                            for index in range(13) for pred_len in (24, 96, 336, 720)])
    fig = plot_model_comparison(results)
    fig.canvas.draw()  # the Agg canvas of a Figure made without pyplot: lays out the legends
    for ax in fig.axes:
        legend = ax.get_legend().get_window_extent()
        bars = [patch.get_window_extent() for c in ax.containers if isinstance(c, BarContainer) for patch in c.patches]
        assert not any(legend.overlaps(bar) for bar in bars)


# ------------------------------------------------------------------------- attention


def probsparse_weights() -> ProbSparseWeights:
    attention = ProbSparseAttention(factor=1).eval()
    q, k, v = (_randn(2, 24, 3, 4, seed=seed) for seed in (1, 2, 3))
    _, weights = attention(q, k, v, need_weights=True)
    return weights


def test_probsparse_figure_shows_sparsity_and_selected_queries():
    weights = probsparse_weights()
    fig = plot_probsparse(weights, batch=1, head=2)
    assert isinstance(fig, Figure) and len(fig.axes) == 4  # two panels and their colorbars
    top, bottom = fig.axes[0], fig.axes[1]
    np.testing.assert_allclose(top.get_images()[0].get_array(), weights.sparsity[1].numpy())
    (selected,) = top.collections
    offsets = selected.get_offsets()
    u = weights.selected_queries.shape[-1]
    assert offsets.shape == (3 * u, 2)
    for head in range(3):
        marked = sorted(offsets[offsets[:, 1] == head, 0].astype(int))
        assert marked == sorted(weights.selected_queries[1, head].tolist())
    np.testing.assert_allclose(bottom.get_images()[0].get_array(), weights.to_dense()[1, 2].numpy(), rtol=1e-6)
    with pytest.raises(ConfigError, match="ProbSparseWeights"):
        plot_probsparse(torch.zeros(1, 1, 4, 4))
    with pytest.raises(ConfigError, match="head=5"):
        plot_probsparse(weights, head=5)


def test_attention_map_of_dense_and_logsparse_weights():
    q, k, v = (_randn(1, 16, 2, 4, seed=seed) for seed in (4, 5, 6))
    _, dense = FullAttention(causal=True)(q, k, v, need_weights=True)
    fig = plot_attention(dense, head=1)
    assert isinstance(fig, Figure) and len(fig.axes) == 2  # map and colorbar
    np.testing.assert_allclose(fig.axes[0].get_images()[0].get_array(), dense[0, 1].numpy())
    _, sparse = LogSparseAttention()(q, k, v, need_weights=True)
    fig = plot_attention(sparse)
    np.testing.assert_allclose(fig.axes[0].get_images()[0].get_array(), sparse.to_dense()[0, 0].numpy())
    fig = plot_attention(np.eye(5))
    assert fig.axes[0].get_images()[0].get_array().shape == (5, 5)
    with pytest.raises(ConfigError, match="list"):
        plot_attention([[1.0]])


def test_logsparse_pattern_figure_matches_the_mask():
    fig = plot_logsparse_pattern(32, local_window=1)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    mask = logsparse_mask(32, 1).numpy()
    np.testing.assert_array_equal(fig.axes[0].get_images()[0].get_array(), mask)
    logsparse, full = fig.axes[1].get_lines()
    np.testing.assert_array_equal(logsparse.get_ydata(), mask.sum(axis=1))
    np.testing.assert_array_equal(full.get_ydata(), np.arange(1, 33))


def test_figures_are_not_registered_with_pyplot():
    before = len(_pylab_helpers.Gcf.figs)
    plot_forecast(forecast_frame())
    plot_logsparse_pattern(8)
    assert len(_pylab_helpers.Gcf.figs) == before


def test_figures_render_as_png_for_notebooks_without_a_pyplot_backend():
    fig = plot_logsparse_pattern(8)
    assert fig._repr_png_().startswith(b"\x89PNG\r\n\x1a\n")
