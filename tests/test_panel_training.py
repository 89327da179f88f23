"""Panels through the data module, the models and the Forecaster: windows per series, per-series
scaling, covariates in every model's input, forecasts that follow a known covariate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from forecast import Forecaster
from forecast.data import WindowDataModule
from forecast.data.dataset import ITEM_KEYS
from forecast.data.fitted import FittedState
from forecast.errors import ConfigError, DataError, NonFiniteValueError, UnknownColumnError
from forecast.models import DataSpec, build_model, model_inputs

WINDOWS = dict(seq_len=12, label_len=6, pred_len=4)
ROLES = dict(id_column="store", target="sales", future_covariates=["promo"], static_covariates=["region"])
LIFT = 4.0


def store_panel(lengths=(90, 120, 70), seed: int = 0) -> pd.DataFrame:
    """Stores of their own lengths, starts and levels; sales rise by LIFT on promotion days."""
    rng = np.random.default_rng(seed)
    blocks = []
    for index, length in enumerate(lengths):
        t = np.arange(length)
        promo = (rng.random(length) < 0.3).astype(float)
        sales = 20.0 * (index + 1) + 2 * np.sin(2 * np.pi * t / 7) + LIFT * promo + rng.normal(0, 0.2, length)
        blocks.append(pd.DataFrame({
            "store": f"s{index}", "date": pd.date_range(f"2024-01-0{index + 1}", periods=length, freq="D"),
            "sales": sales, "promo": promo, "region": ["north", "south", "north"][index],
        }))
    return pd.concat(blocks, ignore_index=True)


def panel_module(frame: pd.DataFrame | None = None, **options) -> WindowDataModule:
    dm = WindowDataModule(store_panel() if frame is None else frame, **WINDOWS, batch_size=8, **ROLES, **options)
    dm.setup()
    return dm


def future_frame(frame: pd.DataFrame, promo: float, pred_len: int = 4) -> pd.DataFrame:
    ends = frame.groupby("store", sort=False)["date"].max()
    return pd.concat([pd.DataFrame({"store": store, "date": pd.date_range(end + pd.Timedelta("1D"), periods=pred_len),
                                    "promo": promo}) for store, end in ends.items()], ignore_index=True)


def test_windows_stay_inside_their_series_and_carry_its_covariates():
    frame = store_panel()
    dm = panel_module(frame)
    fitted = dm.fitted
    for split in ("train", "val", "test"):
        dataset = dm.dataset(split)
        x_dates, y_dates = dm.window_timestamps(split)
        for index in range(len(dataset)):
            item = dataset[index]
            assert tuple(item) == ITEM_KEYS
            store = fitted.panel.ids[int(item["series"])]
            rows = frame[frame["store"] == store].set_index("date")
            dates = pd.DatetimeIndex(np.concatenate([x_dates[index], y_dates[index][WINDOWS["label_len"]:]]))
            assert dates.isin(rows.index).all()  # every step of the window is a row of its own series
            assert (np.diff(dates.to_numpy()) == np.timedelta64(1, "D")).all()
            raw = rows.loc[dates]
            scaled_sales = fitted.to_scaled(raw[["sales"]].to_numpy(), int(item["series"]))
            window_sales = torch.cat([item["x"], item["y"][WINDOWS["label_len"]:]])[:, 0].numpy()
            np.testing.assert_allclose(window_sales, scaled_sales[:, 0], rtol=1e-5, atol=1e-5)
            promo = (raw["promo"].to_numpy() - fitted.panel.known_mean[0]) / fitted.panel.known_scale[0]
            known = torch.cat([item["x_known"], item["y_known"][WINDOWS["label_len"]:]])[:, 0].numpy()
            np.testing.assert_allclose(known, promo, rtol=1e-5, atol=1e-5)
            region = fitted.panel.static_values[0][int(item["static"][0])]
            assert region == rows["region"].iloc[0]


def test_every_position_of_every_series_is_a_window_once():
    frame = store_panel()
    dm = panel_module(frame)
    windows = []
    for split in ("train", "val", "test"):
        x_dates, _ = dm.window_timestamps(split)
        series = dm.dataset(split).series.numpy()
        windows += [(dm.fitted.panel.ids[s], pd.Timestamp(d)) for s, d in zip(series, x_dates[:, 0])]
    assert len(windows) == len(set(windows)) == sum(dm.split_sizes.values())
    assert {store for store, _ in windows} == {"s0", "s1", "s2"}


def test_each_series_is_scaled_by_its_own_training_rows_only():
    frame = store_panel()
    dm = panel_module(frame)
    for position, store in enumerate(dm.fitted.panel.ids):
        start, end = dm.borders[store]["train"]
        train = frame[frame["store"] == store]["sales"].to_numpy()[start:end]
        assert dm.fitted.panel.mean[position, -1] == pytest.approx(train.mean())
        assert dm.fitted.panel.scale[position, -1] == pytest.approx(train.std())
    changed = frame.copy()
    test_rows = changed.index[changed["store"] == "s1"][-10:]
    changed.loc[test_rows, "sales"] += 1000.0  # the last rows are s1's test rows
    np.testing.assert_array_equal(panel_module(changed).fitted.panel.mean, dm.fitted.panel.mean)


def test_un_scaling_a_batch_uses_each_windows_series():
    dm = panel_module()
    batch = next(iter(dm.test_dataloader()))
    target = batch["y"][:, WINDOWS["label_len"]:, -1:]  # [B, P, 1]
    restored = dm.fitted.to_original(target, batch["series"])
    for row, series in enumerate(batch["series"].tolist()):
        expected = dm.fitted.to_original(target[row], series)
        torch.testing.assert_close(restored[row], expected)
    torch.testing.assert_close(dm.fitted.to_scaled(restored, batch["series"]), target.to(restored.dtype))
    with pytest.raises(ConfigError, match="series="):
        dm.fitted.to_original(target)


def test_the_fitted_panel_state_round_trips_through_json_types():
    fitted = panel_module().fitted
    state = fitted.state_dict()
    assert FittedState.from_state_dict(state).state_dict() == state


class _CountedId(str):
    """A series id that counts the equality tests made on ids of its kind."""

    comparisons = 0

    def __eq__(self, other):
        type(self).comparisons += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_a_panels_series_and_static_values_are_looked_up_in_one_pass_not_one_scan_each():
    """scale_panel found each series' fit position with list.index and each static value with tuple.index: a
    scan of every fitted series per series, about N^2 / 2 comparisons (the positions alone took 1.9 s at 20,000
    series, and the square grows a hundredfold at 200,000). Now a lookup table each: a few comparisons a series."""
    n_series = 150
    frame = pd.concat([pd.DataFrame({"store": f"s{index}", "date": pd.date_range("2024-01-01", periods=60),
                                     "sales": np.arange(60.0) + index, "promo": 0.0, "region": f"r{index}"})
                       for index in range(n_series)], ignore_index=True)
    dm = panel_module(frame)
    panel = dm.fitted.read(frame)
    for series in panel.series:  # ids and static values whose comparisons are counted
        object.__setattr__(series, "id", _CountedId(series.id))
        series.static["region"] = _CountedId(series.static["region"])
    _CountedId.comparisons = 0
    rows = dm.fitted.scale_panel(panel)
    assert [row.position for row in rows] == list(range(n_series))
    assert [int(row.static[0]) for row in rows] == list(range(n_series))
    assert _CountedId.comparisons <= 4 * n_series


def test_a_wide_tables_items_carry_empty_panel_tensors():
    frame = pd.DataFrame({"date": pd.date_range("2024-01-01", periods=60, freq="h"), "a": np.arange(60.0)})
    dm = WindowDataModule(frame, **WINDOWS)
    item = dm.train_dataset[0]
    assert tuple(item) == ITEM_KEYS
    assert item["x_known"].shape == (12, 0) and item["y_known"].shape == (10, 0) and item["static"].shape == (0,)
    assert int(item["series"]) == 0 and dm.fitted.panel is None
    spec = DataSpec.from_fitted(dm.fitted)
    assert spec.n_step_features == spec.n_time_features
    assert model_inputs(spec, item | {"x": item["x"]})[1] is item["x_mark"]  # nothing appended


@pytest.mark.parametrize("model", ["informer", "transformer", "logsparse", "dlinear"])
def test_every_model_reads_the_known_covariates_and_codes(model):
    dm = panel_module()
    spec = DataSpec.from_fitted(dm.fitted)
    assert (spec.n_known, spec.n_series, spec.static_sizes) == (1, 3, (2,))
    options = {} if model == "dlinear" else dict(d_model=16, n_heads=2, d_ff=16)
    torch.manual_seed(0)
    net = build_model(model, spec, **options).eval()
    with torch.no_grad():  # DLinear's covariate terms start at zero: give every model weights that read them
        for parameter in net.parameters():
            parameter.normal_(0.0, 0.5)
    batch = next(iter(dm.test_dataloader()))
    x, x_mark, y_mark = model_inputs(spec, batch)
    assert x_mark.shape[-1] == y_mark.shape[-1] == spec.n_time_features + 1 + 2
    with torch.no_grad():
        base = net(x, x_mark, y_mark)
        promo = net(*model_inputs(spec, batch | {"y_known": batch["y_known"] + 1.0}))
        past_promo = net(*model_inputs(spec, batch | {"x_known": batch["x_known"] + 1.0}))
        other_store = net(*model_inputs(spec, batch | {"series": (batch["series"] + 1) % 3}))
    assert base.shape == (len(batch["x"]), 4, 1)
    assert not torch.allclose(base, promo) and not torch.allclose(base, other_store)
    # The lookback's known covariates enter the encoder (LogSparse: the input steps); DLinear maps the lookback's
    # values alone and adds a term of the forecast steps' covariates.
    assert torch.allclose(base, past_promo) if model == "dlinear" else not torch.allclose(base, past_promo)


def test_a_trained_model_follows_the_future_promotion_calendar():
    frame = store_panel()
    fc = Forecaster("dlinear", **WINDOWS, max_epochs=3, learning_rate=0.05, batch_size=16, progress=False)
    fc.fit(frame, date_column="date", **ROLES)
    with_promo = fc.predict(frame, future_covariates=future_frame(frame, promo=1.0))
    without = fc.predict(frame, future_covariates=future_frame(frame, promo=0.0))
    assert list(with_promo.columns) == ["store", "date", "sales"] and len(with_promo) == 3 * 4
    lift = (with_promo["sales"] - without["sales"]).to_numpy()
    assert (lift > 0.5 * LIFT).all(), lift  # every store, every step: the promotion raises the forecast
    ends = frame.groupby("store")["date"].max()
    for store, rows in with_promo.groupby("store"):
        assert rows["date"].iloc[0] == ends[store] + pd.Timedelta("1D")  # after each series' own end


@pytest.mark.parametrize("model", ["naive", "seasonal_naive"])
def test_the_naive_baselines_ignore_the_covariates(model):
    frame = store_panel()
    fc = Forecaster(model, **WINDOWS, progress=False).fit(frame, date_column="date", **ROLES)
    with_promo = fc.predict(frame, future_covariates=future_frame(frame, promo=1.0))
    pd.testing.assert_frame_equal(with_promo, fc.predict(frame, future_covariates=future_frame(frame, promo=0.0)))
    other_regions = frame.assign(region=frame["region"].map({"north": "south", "south": "north"}))
    pd.testing.assert_frame_equal(with_promo, fc.predict(other_regions, future_covariates=future_frame(frame, 1.0)))


def test_a_csv_panel_fits_like_its_frame_and_shuffles_windows_across_series(tmp_path):
    frame = store_panel()
    path = tmp_path / "stores.csv"
    frame.to_csv(path, index=False)
    future = future_frame(frame, promo=1.0)
    options = dict(**WINDOWS, max_epochs=1, batch_size=16, seed=0, progress=False)
    from_file = Forecaster("dlinear", **options).fit(path, date_column="date", **ROLES)
    from_frame = Forecaster("dlinear", **options).fit(frame, date_column="date", **ROLES)
    pd.testing.assert_frame_equal(from_file.predict(path, future_covariates=future),
                                  from_frame.predict(frame, future_covariates=future))
    series = torch.cat([batch["series"] for batch in from_file.datamodule.train_dataloader()])  # one epoch's order
    assert sorted(series.tolist()) == sorted(from_file.datamodule.dataset("train").series.tolist())
    assert len(set(series[:16].tolist())) > 1  # the first batch already mixes series: shuffled across them


def test_a_panels_future_batch_carries_each_series_last_label_len_inputs_then_unknowns():
    """Mutation testing: the decoder's label part taken one step early (`[-label_len - 1:-1]`) passed the suite."""
    dm = panel_module()
    batch = dm.future_batch(future=future_frame(store_panel(), promo=0.0, pred_len=WINDOWS["pred_len"])).batch
    label_len = WINDOWS["label_len"]
    torch.testing.assert_close(batch["y"][:, :label_len], batch["x"][:, -label_len:])  # [N, label_len, C]
    assert torch.isnan(batch["y"][:, label_len:]).all()


def test_a_panels_future_batch_carries_each_series_last_known_rows_then_the_given_future_ones():
    """x_known: the known covariates of each series' last seq_len rows; y_known: those of its last label_len rows,
    then the future steps' as given, all on the fitted pooled scale."""
    frame = store_panel()
    dm = panel_module(frame)
    seq_len, label_len, pred_len = WINDOWS["seq_len"], WINDOWS["label_len"], WINDOWS["pred_len"]
    future = future_frame(frame, promo=0.0, pred_len=pred_len)
    future["promo"] = np.arange(len(future)) % 3  # distinct steps
    batch = dm.future_batch(future=future).batch
    fit = dm.fitted.panel
    for index, series in enumerate(dm.panel.series):
        last = fit.scale_known(series.future[-seq_len:], "last rows")  # [L, K]
        ahead = fit.scale_known(future.loc[future["store"] == series.id, ["promo"]].to_numpy(), "future")  # [P, K]
        np.testing.assert_allclose(batch["x_known"][index].numpy(), last)
        np.testing.assert_allclose(batch["y_known"][index].numpy(), np.concatenate([last[-label_len:], ahead]))


def test_a_given_fit_scales_and_numbers_each_series_as_fitted_whatever_order_the_data_lists_them_in():
    """A window's series is its fit position (the id embedding's row, the scale un-scaling takes), not the
    series' place in the data given: the same windows, scaled alike, come out of the series in another order."""
    frame = store_panel()
    dm = panel_module(frame)
    shuffled = pd.concat([frame[frame["store"] == store] for store in ("s2", "s0", "s1")], ignore_index=True)
    given = panel_module(shuffled, fitted=dm.fitted)
    assert [series.id for series in given.panel.series] == ["s2", "s0", "s1"]
    for split in ("train", "val", "test"):
        def windows(module):
            dataset = module.dataset(split)
            return sorted((int(item["series"]), item["x"].numpy().tobytes(), item["truth"].numpy().tobytes())
                          for item in (dataset[index] for index in range(len(dataset))))
        assert windows(given) == windows(dm)


def test_prediction_refuses_missing_future_covariates_by_series_and_step():
    frame = store_panel()
    fc = Forecaster("naive", **WINDOWS, progress=False).fit(frame, date_column="date", **ROLES)
    future = future_frame(frame, promo=1.0)
    gap = future[~((future["store"] == "s1") & (future["date"] == future[future["store"] == "s1"]["date"].iloc[2]))]
    with pytest.raises(DataError, match=r"series 's1' lacks its future covariates at 1 of the 4 steps"):
        fc.predict(frame, future_covariates=gap)
    with pytest.raises(DataError, match="future covariates"):
        fc.predict(frame)
    with pytest.raises(DataError, match="series 's2' has no rows"):
        fc.predict(frame, future_covariates=future[future["store"] != "s2"])
    stranger = frame.assign(store=frame["store"].replace({"s2": "s9"}))
    with pytest.raises(DataError, match="series 's9' was not in the data the model was fitted on"):
        fc.predict(stranger, future_covariates=future_frame(stranger, promo=0.0))


def test_future_covariates_given_by_name_to_predict_are_told_to_be_a_table_of_values():
    """predict(df, future_covariates=['promo']), written as fit names them, said only 'data of type list'."""
    frame = store_panel()
    fc = Forecaster("naive", **WINDOWS, progress=False).fit(frame, date_column="date", **ROLES)
    with pytest.raises(ConfigError, match=r"future_covariates=\['promo'\] names columns, as fit\(\.\.\.\) does, but a "
                                          r"forecast takes their values.*'store', 'date' and \['promo'\] at the "
                                          r"pred_len=4 steps"):
        fc.predict(frame, future_covariates=["promo"])


@pytest.mark.parametrize("fill_nan", [None, "ffill"])
def test_forecast_steps_appended_to_the_history_are_refused_with_the_fix(fill_nan):
    """Steps to forecast appended with an empty target (and their promotions) were refused as 'row 280 is nan' with
    fill_nan as the fix, which refuses them too; now both name the empty last rows and the fix, as fill_nan did."""
    frame = store_panel()
    fc = Forecaster("naive", **WINDOWS, progress=False, fill_nan=fill_nan).fit(frame, date_column="date", **ROLES)
    future = future_frame(frame, promo=1.0)
    appended = pd.concat([frame, future.assign(region=future["store"].map({"s0": "north", "s1": "south",
                                                                           "s2": "north"}))], ignore_index=True)
    with pytest.raises(DataError, match=r"series 's0': column 'sales' is empty on its last 4 row\(s\), from row 280: a "
                                        r"forecast starts after the last row.*Fix: drop those rows \(a panel's future "
                                        r"steps go in predict\(\.\.\., future_covariates=\.\.\.\)\)"):
        fc.predict(appended, future_covariates=future)


def test_a_missing_future_covariate_value_names_the_series_column_and_steps(tmp_path):
    frame = store_panel()
    fc = Forecaster("naive", **WINDOWS, progress=False).fit(frame, date_column="date", **ROLES)
    future = future_frame(frame, promo=1.0)  # 4 rows per store: s0, s1, s2
    future.loc[[6, 8, 9], "promo"] = np.nan  # s1's step 3, s2's steps 1 and 2
    path = tmp_path / "calendar.csv"
    future.to_csv(path, index=False)
    with pytest.raises(NonFiniteValueError) as raised:
        fc.predict(frame, future_covariates=path)
    message = str(raised.value)
    s1_step_3 = str(future.loc[6, "date"])
    for words in (f"future covariates {path}", "future covariate 'promo' is nan",
                  "series 's1' at step(s) [3]; series 's2' at step(s) [1, 2] of the 4 forecast steps",
                  f"series 's1': ['{s1_step_3}']", "row 6 (line 8 of the file)", "3 non-finite values",
                  "predict(..., future_covariates=...)", "future.groupby('store')['promo'].ffill()"):
        assert words in message
    assert "fill_nan" not in message  # predict() takes no fill policy
    filled = future.assign(promo=future.groupby("store")["promo"].ffill().fillna(0))  # the fix it gives
    assert len(fc.predict(frame, future_covariates=filled)) == 3 * 4
    history = future.assign(date=future["date"] - pd.Timedelta("30D"))  # rows that are not forecast steps
    assert len(fc.predict(frame, future_covariates=pd.concat([history, filled]))) == 3 * 4  # are not read


def test_past_covariates_reach_the_model_and_need_no_future_values():
    frame = store_panel()
    frame["footfall"] = 50.0 + 10.0 * np.sin(np.arange(len(frame)) / 3.0)
    # Two training steps forecast worse than the windows' centres, so the recipe's correction fit would keep none
    # of the network's forecast, footfall's part included: this test is about what reaches the network.
    fc = Forecaster("transformer", **WINDOWS, d_model=16, n_heads=2, d_ff=16, max_epochs=1, limit_train_batches=2,
                    limit_val_batches=1, batch_size=8, progress=False, calibrate_correction=False)
    fc.fit(frame, date_column="date", **ROLES, past_covariates=["footfall"])
    fitted = fc.fitted_state
    assert fitted.input_columns == ("footfall", "sales") and fitted.output_columns == ("sales",)
    assert fc.model.spec.c_in == 2 and fc.model.spec.n_known == 1  # footfall is an input, promo a known covariate
    item = fc.datamodule.dataset("train")[0]  # store s0's first window: its own rows, on its training scale
    expected = (frame["footfall"].to_numpy()[:WINDOWS["seq_len"]] - fitted.panel.mean[0, 0]) / fitted.panel.scale[0, 0]
    np.testing.assert_allclose(item["x"][:, 0].numpy(), expected, rtol=1e-5)
    future = future_frame(frame, promo=1.0)
    assert "footfall" not in future.columns  # only the future covariates are asked for the forecast steps
    base = fc.predict(frame, future_covariates=future)
    assert list(base.columns) == ["store", "date", "sales"] and len(base) == 3 * 4
    pd.testing.assert_frame_equal(fc.predict(frame, future_covariates=future), base)  # deterministic
    # Another shape of footfall over the lookback (a rescaled one would look the same through RevIN).
    other = fc.predict(frame.assign(footfall=np.cos(np.arange(len(frame)) / 1.7) * 40.0), future_covariates=future)
    change = np.abs(other["sales"] - base["sales"]).to_numpy()
    assert change.max() > 1e-3, change  # the lookback's footfall moves the forecast


def test_a_probabilistic_panel_forecast_has_ordered_quantile_columns():
    frame = store_panel()
    fc = Forecaster("logsparse", head="gaussian", **WINDOWS, d_model=16, n_heads=2, d_ff=16, max_epochs=1,
                    limit_train_batches=2, limit_val_batches=1, batch_size=8, progress=False)
    fc.fit(frame, date_column="date", **ROLES)
    forecast = fc.predict(frame, future_covariates=future_frame(frame, promo=1.0))
    quantiles = ["sales_q0.1", "sales_q0.5", "sales_q0.9"]
    assert list(forecast.columns) == ["store", "date", "sales", *quantiles] and len(forecast) == 3 * 4
    assert forecast.groupby("store").size().to_dict() == {"s0": 4, "s1": 4, "s2": 4}
    levels = forecast[quantiles].to_numpy()  # [N * P, 3]
    assert np.isfinite(levels).all()
    assert (levels[:, 0] <= levels[:, 1]).all() and (levels[:, 1] <= levels[:, 2]).all()  # per row
    assert (levels[:, 0] < levels[:, 2]).all()  # a spread, not a point


def test_a_saved_panel_forecaster_predicts_the_same(tmp_path):
    frame = store_panel()
    fc = Forecaster("dlinear", **WINDOWS, max_epochs=1, progress=False).fit(frame, date_column="date", **ROLES)
    future = future_frame(frame, promo=1.0)
    loaded = Forecaster.load(fc.save(tmp_path / "run"))
    pd.testing.assert_frame_equal(loaded.predict(frame, future_covariates=future),
                                  fc.predict(frame, future_covariates=future))
    report = fc.evaluate()
    assert report.attrs["n_windows"] == fc.datamodule.split_sizes["test"]


def test_covariates_without_an_id_column_are_refused():
    with pytest.raises(ConfigError, match="needs id_column"):
        WindowDataModule(store_panel(), **WINDOWS, future_covariates=["promo"])
    with pytest.raises(ConfigError, match="fit\\(\\) takes the data-reading options"):
        Forecaster("naive", **WINDOWS).fit(store_panel(), batch_size=4)


def test_a_panel_refuses_options_that_would_choose_other_inputs_than_it_feeds():
    frame = store_panel().assign(footfall=1.0)
    with pytest.raises(ConfigError, match=r"features='S' forecasts from the target alone.*past_covariates="
                                          r"\['footfall'\]. Fix: leave past_covariates out"):
        WindowDataModule(frame, **WINDOWS, **ROLES, features="S", past_covariates=["footfall"])
    with pytest.raises(ConfigError, match="columns=.*Fix: leave columns unset"):
        WindowDataModule(frame, **WINDOWS, **ROLES, columns=["sales"])
    assert panel_module(frame, features="S").input_columns == ["sales"]  # the committed panel configs' univariate S
    for features in ("M", "MS"):  # the default, and all in with the target out: what a panel with covariates is
        assert panel_module(frame, features=features, past_covariates=["footfall"]).input_columns == ["footfall",
                                                                                                    "sales"]


def test_evaluation_pools_every_series_and_breaks_down_by_series():
    frame = store_panel()
    fc = Forecaster("naive", **WINDOWS, progress=False).fit(frame, date_column="date", **ROLES)
    pooled = fc.evaluate()
    by_series = fc.evaluate(by_series=True)
    dm = fc.datamodule
    assert list(by_series.index) == ["s0", "s1", "s2"] and by_series.index.name == "store"
    counts = pd.Series(dm.test_dataset.series.numpy()).map(dict(enumerate(dm.fitted.panel.ids))).value_counts()
    assert by_series["n_windows"].to_dict() == counts.to_dict()
    weights = by_series["n_windows"] / by_series["n_windows"].sum()  # every window has P steps
    for metric in ("mse", "mae"):
        assert (weights * by_series[metric]).sum() == pytest.approx(pooled.loc[metric, "standardized"], rel=1e-5)
        assert (weights * by_series[f"{metric}_orig"]).sum() == pytest.approx(pooled.loc[metric, "original"], rel=1e-5)
    # the naive forecast repeats each window's last value: check one series by hand, in original units
    rows = frame[frame["store"] == "s2"]["sales"].to_numpy()
    start, end = dm.borders["s2"]["test"]
    errors = [rows[i + 12:i + 16] - rows[i + 11] for i in range(start, end - 16 + 1)]
    assert by_series.loc["s2", "mse_orig"] == pytest.approx(np.mean(np.square(errors)), rel=1e-5)
    with pytest.raises(ConfigError, match=r"detail=True, by_series=True.*Fix: give either"):  # detail was dropped
        fc.evaluate(by_series=True, detail=True)


def test_a_probabilistic_model_is_broken_down_by_series_on_every_metric_it_is_scored_on():
    """The breakdown by series gave MSE and MAE alone: a Gaussian head's rho-risks and coverage were pooled only."""
    frame = store_panel()
    fc = Forecaster("logsparse", head="gaussian", **WINDOWS, d_model=16, n_heads=2, d_ff=16, n_layers=1, max_epochs=1,
                    progress=False).fit(frame, date_column="date", **ROLES)
    pooled, by_series = fc.evaluate(), fc.evaluate(by_series=True)
    for metric in pooled.index:
        for scale, suffix in (("standardized", ""), ("original", "_orig")):
            assert (f"{metric}{suffix}" in by_series) == bool(np.isfinite(pooled.loc[metric, scale])), metric
    weights = by_series["n_windows"] / by_series["n_windows"].sum()
    for column, (metric, scale) in {"coverage_0.8": ("coverage_0.8", "standardized"), "mse_orig": ("mse", "original"),
                                    "coverage_0.8_orig": ("coverage_0.8", "original")}.items():
        assert (weights * by_series[column]).sum() == pytest.approx(pooled.loc[metric, scale], rel=1e-5)
    # each series' 0.9 rho-risk by hand from its exact quantiles (the head's Gaussian), in original units
    dm = fc.datamodule
    series = dm.test_dataset.series.numpy()
    uppers, truths = [], []
    module = fc.predictor.module.eval()
    for batch in dm.test_dataloader():
        with torch.no_grad():
            forecast = module.score_batch(batch)["original"]
        uppers.append(forecast[2][0.9].numpy())
        truths.append(forecast[1].numpy())
    upper, truth = np.concatenate(uppers), np.concatenate(truths)
    first = series == 0
    loss = np.where(truth[first] > upper[first], 0.9, -0.1) * (truth[first] - upper[first])
    expected = 2 * loss.sum() / np.abs(truth[first]).sum()
    assert by_series.iloc[0]["rho_risk_0.9_orig"] == pytest.approx(expected, rel=1e-5)


def test_a_panel_at_another_frequency_is_refused_by_evaluate_as_by_predict():
    """Hourly stores scored by a model fitted on daily ones: evaluate read them at their own frequency and
    scored them silently; now it reads at the fitted one, as predict does, and refuses them alike."""
    frame = store_panel()
    fc = Forecaster("naive", **WINDOWS, progress=False).fit(frame, **ROLES)
    hourly = frame.assign(date=pd.Timestamp("2024-01-01") + pd.to_timedelta(frame.groupby("store").cumcount(), "h"))
    for score in (fc.predict, fc.evaluate):
        with pytest.raises(DataError, match="irregular steps for frequency 'D'"):
            score(hourly)


def test_new_data_lacking_a_fitted_column_names_it_as_fitted_for_predict_and_evaluate():
    """A table without the fitted static covariate (or id column) was told to 'name the column as the table
    spells it', though predict and evaluate name no column: the fit did."""
    frame = store_panel()
    fc = Forecaster("naive", **WINDOWS, progress=False).fit(frame, date_column="date", **ROLES)
    for score in (lambda data: fc.predict(data, future_covariates=future_frame(frame, promo=0.0)), fc.evaluate):
        for column, role in (("region", "static_covariates"), ("store", "id_column")):
            with pytest.raises(UnknownColumnError, match=rf"{role} '{column}' is not a column.*the model was fitted "
                                                         r"with it\. Fix: pass data holding the fitted columns"):
                score(frame.drop(columns=column))


def test_plots_of_a_panel_name_their_series():
    frame = store_panel()
    fc = Forecaster("naive", **WINDOWS, progress=False).fit(frame, date_column="date", **ROLES)
    figure = fc.plot(frame, series="s1", future_covariates=future_frame(frame, promo=0.0))
    assert "series 's1'" in figure.get_suptitle()
    history = next(line for line in figure.axes[0].lines if line.get_label() == "history")
    np.testing.assert_array_equal(history.get_ydata(), frame[frame["store"] == "s1"]["sales"].to_numpy()[-12:])
    assert "series 's" in fc.plot(window=-1).get_suptitle()
    with pytest.raises(ConfigError, match="series=<one id>"):
        fc.plot(frame, future_covariates=future_frame(frame, promo=0.0))
    with pytest.raises(DataError, match="no series 'nope'.*Fix"):
        fc.plot(frame, series="nope", future_covariates=future_frame(frame, promo=0.0))


def test_future_covariates_for_a_panel_fitted_without_them_are_refused():
    frame = store_panel()
    fc = Forecaster("naive", **WINDOWS, progress=False).fit(frame, date_column="date", id_column="store",
                                                            target="sales")
    with pytest.raises(ConfigError, match="future covariates were given, but the model was fitted with none"):
        fc.predict(frame, future_covariates=future_frame(frame, promo=0.0))
    assert len(fc.predict(frame)) == 3 * 4


def test_a_panel_config_fits_and_predicts_through_the_command_line(tmp_path, monkeypatch, capsys):
    import yaml

    from forecast.cli import main

    monkeypatch.chdir(tmp_path)
    frame = store_panel()
    frame.to_csv("stores.csv", index=False)
    future_frame(frame, promo=1.0).to_csv("calendar.csv", index=False)
    config = {"model": {"name": "dlinear"},
              "data": {"dataset": "stores.csv", **WINDOWS, "date_column": "date", **ROLES},
              "trainer": {"max_epochs": 1}, "seed": 0}
    Path("panel.yaml").write_text(yaml.safe_dump(config))
    assert main(["fit", "--config", "panel.yaml", "--run_dir", "run"]) == 0
    assert main(["predict", "--config", "panel.yaml", "--run_dir", "run", "--future_covariates", "calendar.csv",
                 "--output", "forecast.csv"]) == 0
    written = pd.read_csv("forecast.csv")
    assert list(written.columns) == ["store", "date", "sales"] and len(written) == 3 * WINDOWS["pred_len"]
    said = capsys.readouterr().out  # the steps per series, not the rows of all of them ("21 steps" for 3 x 7)
    assert f"forecast of {WINDOWS['pred_len']} steps after each series' last row (3 series, " \
           f"{3 * WINDOWS['pred_len']} rows) written to forecast.csv" in said
    assert main(["predict", "--config", "panel.yaml", "--run_dir", "run"]) != 0  # no calendar: refused, by name
    assert "future covariates" in capsys.readouterr().err
    calendar = Path("calendar.csv").read_text()  # the forecast written over the calendar it was read from
    assert main(["predict", "--config", "panel.yaml", "--run_dir", "run", "--future_covariates", "calendar.csv",
                 "--output", "calendar.csv"]) == 2
    assert "is the data this command reads (--future_covariates)" in capsys.readouterr().err
    assert Path("calendar.csv").read_text() == calendar
    assert main(["splits", "stores.csv", "--id-column", "store", "--target", "sales", "--seq-len", "12",
                 "--label-len", "6", "--pred-len", "4"]) == 0
    summary = capsys.readouterr().out
    assert "3 series" in summary and all(store in summary for store in ("s0", "s1", "s2"))


def test_a_checkpointed_panel_state_resumes_only_on_the_same_panel():
    frame = store_panel()
    dm = panel_module(frame)
    dm.load_state_dict(dm.state_dict())  # the same panel: accepted
    other = panel_module(frame.assign(sales=frame["sales"] * 2.0))
    with pytest.raises(DataError, match="fitted on other data"):
        other.load_state_dict(dm.state_dict())


def test_a_run_is_not_resumed_on_data_where_a_series_static_covariate_changed(tmp_path):
    """Store s2 moved from north to south: the region's values stayed the same, so the fitted states compared equal
    and the run resumed, its codes learned for s2's old region now standing for another."""
    frame = store_panel()
    moved = frame.assign(region=frame["region"].where(frame["store"] != "s2", "south"))
    named = r"series 's2': static covariate 'region' was 'north', is 'south' now"
    run_dir, options = tmp_path / "run", dict(**WINDOWS, max_epochs=1, progress=False)
    Forecaster("dlinear", **options).fit(frame, run_dir=run_dir, date_column="date", **ROLES)
    files = {path.name: path.read_bytes() for path in run_dir.iterdir() if path.is_file()}
    with pytest.raises(ConfigError, match=rf"holds a run fitted on other data \({named}\).*use another run_dir"):
        Forecaster("dlinear", **options).fit(moved, run_dir=run_dir, date_column="date", **ROLES)
    assert {path.name: path.read_bytes() for path in run_dir.iterdir() if path.is_file()} == files
    with pytest.raises(DataError, match=rf"checkpoint was fitted on other data \({named}\).*new run directory"):
        panel_module(moved).load_state_dict(panel_module(frame).state_dict())


def test_a_panel_state_saved_before_its_series_codes_were_kept_loads_predicts_and_resumes(tmp_path):
    frame, future = store_panel(), future_frame(store_panel(), promo=1.0)
    dm = panel_module(frame)
    old = dm.state_dict()
    del old["panel"]["series_codes"]
    assert FittedState.from_state_dict(old).state_dict() == old  # written back as it was saved
    dm.load_state_dict(old)  # a checkpoint of the same panel: accepted
    fc = Forecaster("naive", **WINDOWS, progress=False).fit(frame, date_column="date", **ROLES)
    directory = fc.save(tmp_path / "model")
    scaler = json.loads((directory / "scaler.json").read_text())
    del scaler["panel"]["series_codes"]
    (directory / "scaler.json").write_text(json.dumps(scaler))
    config = json.loads((directory / "config.json").read_text())
    del config["files"]  # as a run saved before config.json named its files
    (directory / "config.json").write_text(json.dumps(config))
    pd.testing.assert_frame_equal(Forecaster.load(directory).predict(frame, future_covariates=future),
                                  fc.predict(frame, future_covariates=future))
    run_dir, options = tmp_path / "run", dict(**WINDOWS, max_epochs=1, progress=False)
    Forecaster("dlinear", **options).fit(frame, run_dir=run_dir, date_column="date", **ROLES)
    (run_dir / "scaler.json").write_text(json.dumps({"panel": {
        key: value for key, value in json.loads((run_dir / "scaler.json").read_text())["panel"].items()
        if key != "series_codes"}}))
    Forecaster("dlinear", **{**options, "max_epochs": 2}).fit(frame, run_dir=run_dir, date_column="date", **ROLES)
    assert "series_codes" in json.loads((run_dir / "scaler.json").read_text())["panel"]


@pytest.mark.parametrize("encoding", ["fixed", "learned"])
def test_integer_calendars_keep_their_tables_beside_the_panel_codes(encoding):
    dm = panel_module(time_encoding=encoding)
    spec = DataSpec.from_fitted(dm.fitted)
    assert spec.time_feature_sizes is not None and spec.n_step_features == spec.n_time_features + 1 + 2
    torch.manual_seed(0)
    net = build_model("informer", spec, d_model=16, n_heads=2, d_ff=16).eval()
    batch = next(iter(dm.test_dataloader()))
    with torch.no_grad():
        base = net(*model_inputs(spec, batch))
        region = net(*model_inputs(spec, batch | {"static": 1 - batch["static"]}))
    assert torch.isfinite(base).all() and not torch.allclose(base, region)


def test_logsparse_forecast_steps_never_read_later_known_covariates():
    dm = panel_module()
    spec = DataSpec.from_fitted(dm.fitted)
    torch.manual_seed(0)
    net = build_model("logsparse", spec, d_model=16, n_heads=2, d_ff=16).eval()
    batch = next(iter(dm.test_dataloader()))
    later = batch["y_known"].clone()
    later[:, -1] += 5.0  # the last forecast step's promotion changes
    with torch.no_grad():
        base = net(*model_inputs(spec, batch))
        changed = net(*model_inputs(spec, batch | {"y_known": later}))
    torch.testing.assert_close(changed[:, :-1], base[:, :-1])  # causal: earlier steps are untouched
    assert not torch.allclose(changed[:, -1], base[:, -1])  # and the step itself reads it


@pytest.mark.parametrize("column", ["sales", "promo"])
def test_a_panel_value_too_large_for_float32_after_scaling_names_its_series_and_cell(column):
    frame = store_panel()
    last_row_of_s1 = frame.index[frame["store"] == "s1"][-1]  # a test row: the training rows stay ordinary
    frame.loc[last_row_of_s1, column] = 1e45
    with pytest.raises(DataError, match=rf"series 's1'.*column '{column}', row 119 .* float32"):
        panel_module(frame)


def test_a_csv_panel_keeps_its_ids_as_written_from_fit_to_forecast(tmp_path):
    """Ids read as numbers ('007' as 7) renamed the series in every forecast. A fit that knows them as numbers
    (a frame's, or a file's read before) still finds them in a file."""
    frame = store_panel().assign(store=lambda f: f["store"].map({"s0": "007", "s1": "010", "s2": "012"}))
    path, calendar = tmp_path / "stores.csv", tmp_path / "calendar.csv"
    frame.to_csv(path, index=False)
    future_frame(frame, promo=1.0).to_csv(calendar, index=False)
    fc = Forecaster("naive", **WINDOWS, progress=False).fit(path, date_column="date", **ROLES)
    assert fc.fitted_state.panel.ids == ("007", "010", "012")
    forecast = fc.predict(path, future_covariates=calendar)
    assert forecast["store"].unique().tolist() == ["007", "010", "012"]
    numbers = Forecaster("naive", **WINDOWS, progress=False).fit(frame.assign(store=frame["store"].astype(int)),
                                                                 date_column="date", **ROLES)
    assert numbers.fitted_state.panel.ids == (7, 10, 12)
    pd.testing.assert_frame_equal(numbers.predict(path, future_covariates=calendar), forecast)


def test_a_panel_fitted_on_its_csv_forecasts_a_frame_numbering_its_series(tmp_path):
    """Fitted on a file (ids '10', '2', '33'), the frame those ids came from (10, 2, 33) was 'not in the data the
    model was fitted on' and told to fit again; the other way round worked."""
    frame = store_panel().assign(store=lambda f: f["store"].map({"s0": 10, "s1": 2, "s2": 33}))
    path = tmp_path / "stores.csv"
    frame.to_csv(path, index=False)
    calendar = future_frame(frame, promo=1.0)
    fc = Forecaster("naive", **WINDOWS, progress=False).fit(path, date_column="date", **ROLES)
    assert fc.fitted_state.panel.ids == ("10", "2", "33")
    from_frame = fc.predict(frame, future_covariates=calendar)
    from_file = fc.predict(path, future_covariates=calendar.assign(store=calendar["store"].astype(str)))
    assert from_frame["store"].tolist() == [int(store) for store in from_file["store"]]
    np.testing.assert_allclose(from_frame["sales"], from_file["sales"])


def test_a_panel_of_mixed_id_types_forecasts_from_its_csv(tmp_path):
    """Fitted on a frame with ids 1, 2 and 's2', the same stores read from its CSV ('1', '2', 's2') were 'not in the
    data the model was fitted on': the numbers were matched as numbers only where no fitted id was text."""
    frame = store_panel().assign(store=lambda f: f["store"].map({"s0": 1, "s1": 2, "s2": "s2"}).astype(object))
    fc = Forecaster("naive", **WINDOWS, progress=False).fit(frame, date_column="date", **ROLES)
    path, calendar = tmp_path / "stores.csv", tmp_path / "calendar.csv"
    frame.to_csv(path, index=False)
    future_frame(frame, promo=1.0).to_csv(calendar, index=False)
    from_file = fc.predict(path, future_covariates=calendar)
    from_frame = fc.predict(frame, future_covariates=future_frame(frame, promo=1.0))
    assert from_file["store"].tolist() == from_frame["store"].astype(str).tolist()
    np.testing.assert_allclose(from_file["sales"], from_frame["sales"])


def test_a_frame_of_mixed_id_types_takes_its_future_covariates_from_their_csv(tmp_path):
    """Ids 1, 2 and 's2' in a frame: its future covariates' CSV ('1', '2', 's2') had 'no rows' for series 1, its ids
    matched by type where the history's are matched through the text a CSV writes them as."""
    frame = store_panel().assign(store=lambda f: f["store"].map({"s0": 1, "s1": 2, "s2": "s2"}).astype(object))
    fc = Forecaster("naive", **WINDOWS, progress=False).fit(frame, date_column="date", **ROLES)
    calendar, path = future_frame(frame, promo=1.0), tmp_path / "calendar.csv"
    calendar.to_csv(path, index=False)
    pd.testing.assert_frame_equal(fc.predict(frame, future_covariates=path),
                                  fc.predict(frame, future_covariates=calendar))
    calendar[calendar["store"] != 1].to_csv(path, index=False)
    with pytest.raises(DataError, match=rf"future covariates {path}: series 1 has no rows"):
        fc.predict(frame, future_covariates=path)


def test_a_panel_fitted_in_a_time_zone_forecasts_the_same_instants_given_in_another():
    """Paris days given in UTC: a step of 23 hours at the clock change read as a gap, and the steps matched no
    covariate row; converted to the fitted zone, they are the fitted series' days."""
    frame = store_panel()
    frame["date"] = frame["date"].dt.tz_localize("Europe/Paris")  # the stores cross the March clock change
    fc = Forecaster("naive", **WINDOWS, progress=False).fit(frame, date_column="date", **ROLES)
    future = future_frame(frame, promo=1.0)
    expected = fc.predict(frame, future_covariates=future)
    assert str(expected["date"].dt.tz) == "Europe/Paris"
    in_utc = fc.predict(frame.assign(date=frame["date"].dt.tz_convert("UTC")),
                        future_covariates=future.assign(date=future["date"].dt.tz_convert("UTC")))
    pd.testing.assert_frame_equal(in_utc, expected)
    with pytest.raises(DataError, match="date column 'date' has no time zone.*'Europe/Paris'.*Fix: give them"):
        fc.predict(frame, future_covariates=future.assign(date=future["date"].dt.tz_localize(None)))
    assert fc.fitted_state.prepare_options["time_zone"] == "Europe/Paris"
