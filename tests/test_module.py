"""ForecastModule: trains any registered model, scores every test window, predicts with timestamps."""

from __future__ import annotations

import itertools
import logging
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from lightning.pytorch.callbacks import Callback

from forecast.data import WindowDataModule
from forecast.errors import ConfigError
from forecast.models import MODELS, DataSpec, build_model
from forecast.models.base import model_inputs
from forecast.module import ForecastModule
from forecast.training import TrainingConfig, build_trainer, has_trainable_parameters, lightning_warnings

TINY = {"d_model": 16, "n_heads": 2, "d_ff": 32, "dropout": 0.0, "factor": 2}
LOGSPARSE = {"d_model": 16, "n_heads": 2, "d_ff": 32, "dropout": 0.0}
OPTIONS = {"informer": TINY, "transformer": TINY, "naive": {}, "seasonal_naive": {"season_length": 12},
           "logsparse": LOGSPARSE, "dlinear": {"kernel_size": 5}}


def sine_frame(rows: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t = np.arange(rows)
    return pd.DataFrame({
        "date": pd.date_range("2021-01-01", periods=rows, freq="h"),
        "a": np.sin(2 * np.pi * t / 24) + 0.05 * rng.standard_normal(rows),
        "b": np.cos(2 * np.pi * t / 12) + 0.05 * rng.standard_normal(rows),
        "OT": np.sin(2 * np.pi * t / 24 + 1.0) * 3 + 10 + 0.05 * rng.standard_normal(rows),
    })


def datamodule(features: str = "M", batch_size: int = 16) -> WindowDataModule:
    dm = WindowDataModule(sine_frame(), seq_len=32, label_len=16, pred_len=8,
                          features=features, batch_size=batch_size, seed=0)
    dm.setup()
    return dm


def trainer(max_epochs: int = 1, **overrides):
    config = TrainingConfig(max_epochs=max_epochs, patience=5)
    return build_trainer(config, None, enable_progress_bar=False, enable_model_summary=False,
                         **overrides)


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("features", ["M", "MS"])
def test_every_model_trains_and_scores_every_test_window(name, features):
    dm = datamodule(features, batch_size=7)
    torch.manual_seed(0)
    model = build_model(name, DataSpec.from_fitted(dm.fitted), **OPTIONS[name])
    module = ForecastModule(model, learning_rate=1e-3)
    run = trainer(limit_train_batches=3, limit_val_batches=2)
    with lightning_warnings():  # the calls' warnings the library leaves out too
        if has_trainable_parameters(model):
            run.fit(module, datamodule=dm)
        metrics = run.test(module, datamodule=dm, verbose=False)[0]
    assert metrics["test_windows"] == len(dm.test_dataset)
    report = module.test_report
    assert set(report["scale"]) == {"standardized", "original"}
    overall = report[(report.horizon == "all") & (report.variable == "all")]
    mse_std = overall[(overall.scale == "standardized") & (overall.metric == "mse")].value.item()
    assert mse_std == pytest.approx(metrics["test_mse"], rel=1e-6)
    assert len(report[(report.metric == "mse") & (report.variable == "all")]) == 2 * (1 + 8)


def test_original_scale_metrics_match_an_independent_computation():
    dm = datamodule("MS", batch_size=5)
    module = ForecastModule(build_model("naive", DataSpec.from_fitted(dm.fitted)))
    with lightning_warnings():
        metrics = trainer().test(module, datamodule=dm, verbose=False)[0]
    items = [dm.test_dataset[i] for i in range(len(dm.test_dataset))]
    truth = np.stack([item["y"][-8:, -1:].numpy() for item in items])
    naive = np.stack([np.repeat(item["x"][-1:, -1:].numpy(), 8, axis=0) for item in items])
    truth_orig = dm.fitted.to_original(truth)
    naive_orig = dm.fitted.to_original(naive)
    assert metrics["test_mse"] == pytest.approx(np.mean((naive - truth) ** 2), rel=1e-5)
    assert metrics["test_mae_orig"] == pytest.approx(np.mean(np.abs(naive_orig - truth_orig)),
                                                     rel=1e-5)


@pytest.mark.parametrize("name", ["naive", "dlinear"])
def test_a_point_forecast_is_scored_as_every_quantile(name):
    from forecast.metrics import rho_risk
    from forecast.models import model_inputs

    dm = datamodule("M", batch_size=16)
    torch.manual_seed(0)
    model = build_model(name, DataSpec.from_fitted(dm.fitted), **OPTIONS[name]).eval()
    module = ForecastModule(model)
    with lightning_warnings():
        metrics = trainer().test(module, datamodule=dm, verbose=False)[0]
    with torch.no_grad():
        batches = list(dm.test_dataloader())
        pred = torch.cat([model(*model_inputs(model.spec, batch)) for batch in batches])  # [N, P, C]
        true = torch.cat([module._target(batch, pred) for batch in batches])
    deviation = (true - pred).abs().sum() / true.abs().sum()  # R0.5 is the normalized deviation
    assert metrics["test_rho_risk_0.5"] == pytest.approx(float(deviation), rel=1e-5)
    assert metrics["test_rho_risk_0.9"] == pytest.approx(rho_risk(pred.numpy(), true.numpy(), 0.9), rel=1e-5)
    assert np.isfinite(metrics["test_rho_risk_0.5_orig"])
    assert not any(name.startswith("test_coverage") for name in metrics)  # a point has no interval


def test_probabilistic_models_add_rho_risk_and_coverage_on_both_scales():
    dm = datamodule("MS", batch_size=16)
    torch.manual_seed(0)
    model = build_model("logsparse", DataSpec.from_fitted(dm.fitted), head="gaussian", **LOGSPARSE)
    module = ForecastModule(model, learning_rate=1e-3, n_samples=20)
    run = trainer(limit_train_batches=2, limit_val_batches=1)
    with lightning_warnings():
        run.fit(module, datamodule=dm)
        first = run.test(module, datamodule=dm, verbose=False)[0]
    for name in ("rho_risk_0.5", "rho_risk_0.9", "coverage_0.8"):
        assert np.isfinite(first[f"test_{name}"]) and np.isfinite(first[f"test_{name}_orig"])
    assert 0.0 <= first["test_coverage_0.8"] <= 1.0
    # Coverage is a count: identical on both scales (the un-scaling is monotone).
    assert first["test_coverage_0.8"] == pytest.approx(first["test_coverage_0.8_orig"])
    metrics = set(module.test_report.metric)
    assert {"mse", "rho_risk_0.9", "coverage_0.8"} <= metrics
    with lightning_warnings():
        again = run.test(module, datamodule=dm, verbose=False)[0]
    assert again["test_rho_risk_0.9"] == first["test_rho_risk_0.9"]  # seeded sampling


def test_a_model_with_its_own_objective_says_what_the_loss_option_still_sets_when_it_trains(caplog):
    """A Gaussian-head LogSparse given loss='mae' trained on the likelihood while nothing said so; then it said so
    at every construction, also when a saved run was loaded to predict."""
    dm = datamodule("S")
    spec = DataSpec.from_fitted(dm.fitted)
    gaussian = ForecastModule(build_model("logsparse", spec, head="gaussian", **LOGSPARSE), loss="mae")
    point = ForecastModule(build_model("logsparse", spec, **LOGSPARSE), loss="mae")  # a point head trains on mae
    with caplog.at_level(logging.INFO, logger="forecast.module"), lightning_warnings():
        ForecastModule(build_model("logsparse", spec, head="gaussian", **LOGSPARSE), loss="mae")
        assert not [record for record in caplog.records if record.name == "forecast.module"]  # built, not trained
        for module in (gaussian, point):
            trainer(max_epochs=1, limit_train_batches=1, limit_val_batches=1).fit(module, datamodule=dm)
    said = [record.getMessage() for record in caplog.records if record.name == "forecast.module"]
    assert said == ["LogSparseTransformer trains on the Gaussian negative log-likelihood; loss='mae' sets only the "
                    "validation loss (early stopping, the best epoch)."]


def test_a_model_that_reads_only_each_variables_own_past_says_which_inputs_it_leaves(caplog):
    """dlinear under features='MS' forecast the target from the target alone and said nothing of the other
    variables it was given; a model that reads them (Informer) says nothing."""
    dm = datamodule("MS")
    spec = DataSpec.from_fitted(dm.fitted)
    assert spec.c_in > spec.c_out
    with caplog.at_level(logging.INFO, logger="forecast.module"), lightning_warnings():
        for name, options in (("dlinear", {}), ("informer", TINY)):
            module = ForecastModule(build_model(name, spec, **options), fitted=dm.fitted)
            trainer(max_epochs=1, limit_train_batches=1, limit_val_batches=1).fit(module, datamodule=dm)
    said = [record.getMessage() for record in caplog.records if record.name == "forecast.module"]
    others = list(dm.fitted.input_columns[:-1])
    assert said == [f"DLinear forecasts each output variable from its own past, so its other inputs, {others!r} "
                    "(features='MS', or a panel's past_covariates), are not read."]


def test_loss_falls_on_a_learnable_series():
    dm = datamodule("M")
    torch.manual_seed(0)
    model = build_model("informer", DataSpec.from_fitted(dm.fitted), **TINY)
    module = ForecastModule(model, learning_rate=3e-3, lr_schedule="none")
    run = trainer(max_epochs=4)
    with lightning_warnings():
        before = run.validate(module, datamodule=dm, verbose=False)[0]["val_loss"]
        run.fit(module, datamodule=dm)
        after = trainer().validate(module, datamodule=dm, verbose=False)[0]["val_loss"]
    assert after < 0.5 * before


def test_predict_step_returns_original_units_with_timestamps():
    dm = datamodule("MS", batch_size=6)
    module = ForecastModule(build_model("naive", DataSpec.from_fitted(dm.fitted)))
    with lightning_warnings():
        batches = trainer().predict(module, datamodule=dm)
    stamps = np.concatenate([b["timestamps"] for b in batches])
    expected = dm.forecast_timestamps(dm.config.predict_split)
    np.testing.assert_array_equal(stamps, expected)
    first = dm.test_dataset[0]
    assert batches[0]["forecast"][0, 0, 0].item() == pytest.approx(
        dm.fitted.to_original(first["x"][-1:, -1:].numpy()).item(), rel=1e-5)


@pytest.mark.parametrize("schedule, expected", [("halve", [1e-3, 5e-4, 2.5e-4]),
                                                ("cosine", [1e-3, 7.5e-4, 2.5e-4]),  # over the run's 3 epochs
                                                ("none", [1e-3, 1e-3, 1e-3])])
def test_learning_rate_schedules(schedule, expected):
    """Per epoch (two steps each: a schedule stepped per batch would move twice as far)."""
    dm = datamodule("S")
    module = ForecastModule(build_model("informer", DataSpec.from_fitted(dm.fitted), **TINY),
                            learning_rate=1e-3, lr_schedule=schedule)
    seen = []

    class Record(Callback):
        def on_train_epoch_start(self, trainer, pl_module):
            seen.append(trainer.optimizers[0].param_groups[0]["lr"])

    with lightning_warnings():
        trainer(max_epochs=3, limit_train_batches=2, limit_val_batches=1,
                callbacks=[Record()]).fit(module, datamodule=dm)
    assert seen == pytest.approx(expected)


def test_bad_settings_raise_config_errors():
    from forecast.errors import ConfigError

    model = torch.nn.Linear(1, 1)
    with pytest.raises(ConfigError, match="loss"):
        ForecastModule(model, loss="rmsle")
    with pytest.raises(ConfigError, match="lr_schedule"):
        ForecastModule(model, lr_schedule="step")


def test_compiled_training_matches_eager_and_keeps_plain_state_dict_keys():
    from forecast.training import CompileModel

    assert any(isinstance(c, CompileModel) for c in
               build_trainer(TrainingConfig(compile_model=True), None, enable_progress_bar=False).callbacks)
    dm = datamodule("M")
    states = []
    for callbacks in ([], [CompileModel(backend="eager")]):  # eager: the compile path without minutes of codegen
        torch.manual_seed(0)
        module = ForecastModule(build_model("informer", DataSpec.from_fitted(dm.fitted), **TINY), learning_rate=1e-3)
        with lightning_warnings():
            trainer(limit_train_batches=2, limit_val_batches=1, callbacks=callbacks).fit(module, datamodule=dm)
        assert (module.model._compiled_call_impl is not None) == bool(callbacks)
        states.append(module.model.state_dict())
    assert states[0].keys() == states[1].keys()
    for name, value in states[0].items():
        torch.testing.assert_close(states[1][name], value)


@pytest.mark.parametrize("name", ["informer", "logsparse"])
def test_bf16_mixed_precision_trains_and_scores_every_window(name):
    """The bf16 switch (`precision="bf16-mixed"`) on CPU: finite float32 metrics over every test window."""
    dm = datamodule("M", batch_size=7)
    torch.manual_seed(0)
    module = ForecastModule(build_model(name, DataSpec.from_fitted(dm.fitted), **OPTIONS[name]), learning_rate=1e-3)
    run = trainer(limit_train_batches=2, limit_val_batches=1, precision="bf16-mixed")
    with lightning_warnings():
        run.fit(module, datamodule=dm)
        metrics = run.test(module, datamodule=dm, verbose=False)[0]
    assert metrics["test_windows"] == len(dm.test_dataset)
    assert np.isfinite([metrics["test_mse"], metrics["test_mae"], metrics["test_mse_orig"]]).all()
    assert all(p.dtype == torch.float32 for p in module.parameters())  # autocast: weights stay float32


def test_gradient_clipping_under_mixed_precision_trains():
    """Lightning refuses to clip a fused optimizer's gradients under mixed precision: precision="bf16-mixed" with
    gradient_clip_val failed every fit. Such a run takes Adam's per-tensor loop, and its gradients are clipped."""
    dm = datamodule("M", batch_size=7)
    torch.manual_seed(0)
    module = ForecastModule(build_model("dlinear", DataSpec.from_fitted(dm.fitted)), learning_rate=1e-3)
    norms = []

    class GradientNorm(Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):  # the gradients stepped on
            norms.append(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in pl_module.parameters()])))

    run = trainer(limit_train_batches=2, limit_val_batches=1, precision="bf16-mixed", gradient_clip_val=1e-3,
                  gradient_clip_algorithm="norm", callbacks=[GradientNorm()])
    with lightning_warnings():
        run.fit(module, datamodule=dm)
    assert run.optimizers[0].defaults["fused"] is None  # the fused kernel only where nothing clips
    assert len(norms) == 2 and max(norms) <= 1e-3 * 1.001
    plain = trainer(limit_train_batches=1, limit_val_batches=1, precision="bf16-mixed")
    with lightning_warnings():
        plain.fit(ForecastModule(build_model("dlinear", DataSpec.from_fitted(dm.fitted))), datamodule=dm)
    assert plain.optimizers[0].defaults["fused"] is True


@pytest.mark.parametrize("precision", ["bf16-true", "16-true", "64-true", "64", 64])
def test_precisions_that_cast_the_weights_are_refused_with_the_fix(precision):
    """Calibration and predict feed float32 windows to the model: a bf16-true fit failed after training (a matmul
    of Float and BFloat16), and predict did under any recipe; "64" (Lightning's "64-true") passed the check."""
    with pytest.raises(ConfigError, match=rf"precision={precision!r} casts the weights themselves.*Fix: "
                                          r"precision='bf16-mixed'"):
        TrainingConfig(precision=precision)
    for plain in ("32-true", "32", 32, "bf16-mixed", "16-mixed"):  # float32 weights: "32-true" was refused too
        TrainingConfig(precision=plain)


@pytest.mark.parametrize("native", [True, False])
def test_bf16_on_a_cpu_without_bf16_instructions_warns_once_with_the_fix(native, monkeypatch, caplog):
    """Emulated bf16 makes a step several times slower (benchmarks/README.md): say so where it is asked for."""
    import forecast.training as training

    monkeypatch.setattr(training, "cpu_has_bf16", lambda: native)
    with caplog.at_level(logging.WARNING, logger="forecast.training"):
        trainer(precision="bf16-mixed")
        trainer()  # fp32: nothing to say
    warnings = [record.getMessage() for record in caplog.records if "bf16" in record.getMessage()]
    if native:
        assert warnings == []
    else:
        assert len(warnings) == 1
        assert "precision=bf16-mixed on a CPU without bf16 instructions" in warnings[0]
        assert "Fix: leave precision unset (fp32)" in warnings[0]


def test_lightnings_loggers_progress_bar_and_callbacks_work_unchanged(tmp_path):
    """A plain Lightning Trainer with its CSV and TensorBoard loggers, its progress bar and a callback of
    the user's: each receives what the module logs (the one unit test that turns them on)."""
    from lightning import Trainer
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    class BatchCounter(Callback):
        batches = 0

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            self.batches += 1

    dm = datamodule("M")
    torch.manual_seed(0)
    module = ForecastModule(build_model("informer", DataSpec.from_fitted(dm.fitted), **TINY), learning_rate=1e-3)
    csv, tensorboard, counter = CSVLogger(tmp_path, name="csv"), TensorBoardLogger(tmp_path, name="tb"), BatchCounter()
    run = Trainer(max_epochs=2, limit_train_batches=3, limit_val_batches=2, log_every_n_steps=1,
                  logger=[csv, tensorboard], callbacks=[counter], enable_progress_bar=True,
                  enable_checkpointing=False, enable_model_summary=False)
    with lightning_warnings():
        run.fit(module, datamodule=dm)
    assert {"train_loss", "val_loss"} <= set(run.progress_bar_metrics)
    with lightning_warnings():
        run.test(module, datamodule=dm, verbose=False)
    assert counter.batches == 6
    logged = pd.read_csv(f"{csv.log_dir}/metrics.csv")
    assert logged["train_loss"].notna().sum() == 6 and logged["val_loss"].notna().sum() == 2
    assert logged["test_windows"].dropna().tolist() == [len(dm.test_dataset)]
    events = EventAccumulator(tensorboard.log_dir)
    events.Reload()
    assert len(events.Scalars("train_loss")) == 6 and len(events.Scalars("val_loss")) == 2
    assert {"test_mse", "test_mae", "test_mse_orig", "test_mae_orig"} <= set(events.Tags()["scalars"])


# ------------------------------------------------------------------- values fill_nan made up

# Every model that trains, and LogSparse's Gaussian head (a loss of its own). Not the autoregressive LogSparse:
# its training reads the horizon's values as teacher-forced inputs, through which made-up values change its loss.
TRAINED = [("informer", TINY), ("transformer", TINY), ("dlinear", {"kernel_size": 5}), ("logsparse", LOGSPARSE),
           ("logsparse", {**LOGSPARSE, "head": "gaussian"})]


def with_made_up_values(batch: dict[str, torch.Tensor], s: DataSpec, seed: int = 0):
    """The batch with about a third of its horizon's output cells marked as made up by fill_nan (truth NaN), and
    the same marked batch with other values in those cells."""
    horizon = batch["y"][:, -s.pred_len:, -s.c_out:]  # [B, P, C_out]
    unobserved = torch.rand(horizon.shape, generator=torch.Generator().manual_seed(seed)) < 1 / 3
    truth = horizon.double().masked_fill(unobserved, float("nan"))
    other = batch["y"].clone()
    other[:, -s.pred_len:, -s.c_out:] += 3.0 * unobserved
    return {**batch, "truth": truth}, {**batch, "y": other, "truth": truth}


def seeded(call, *args):
    torch.manual_seed(0)  # ProbSparse samples keys, dropout draws masks
    return call(*args)


@pytest.mark.parametrize("name, options", TRAINED, ids=str)
def test_values_fill_nan_made_up_count_in_no_training_or_validation_loss(name, options):
    """They are no truth: the losses are the same whatever values fill_nan wrote in those cells, and the values
    would have counted had they been observed (so the test can fail)."""
    dm = datamodule("MS")
    s = DataSpec.from_fitted(dm.fitted)
    torch.manual_seed(0)
    module = ForecastModule(build_model(name, s, **options)).eval()  # in training ProbSparse draws new keys
    marked, changed = with_made_up_values(next(iter(dm.val_dataloader())), s)
    observed_changed = {**changed, "truth": changed["y"][:, -s.pred_len:, -s.c_out:].double()}
    with torch.no_grad():
        losses = [seeded(module.model.loss, batch, torch.nn.functional.mse_loss)
                  for batch in (marked, changed, observed_changed)]
    assert float(losses[0]) == pytest.approx(float(losses[1]), rel=1e-6)
    assert float(losses[0]) != pytest.approx(float(losses[2]), rel=1e-3)
    none_observed = {**marked, "truth": torch.full_like(marked["truth"], float("nan"))}  # a long outage's windows
    loss = seeded(module.model.loss, none_observed, torch.nn.functional.mse_loss)
    loss.backward()  # the mean over no cell was NaN, and so was every gradient
    assert float(loss.detach()) == 0.0
    gradients = [p.grad for p in module.parameters() if p.grad is not None]
    assert gradients and all(torch.equal(grad, torch.zeros_like(grad)) for grad in gradients)

    def validation(batch: dict[str, torch.Tensor]) -> tuple[float, float, float]:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*self.log", category=UserWarning)  # no trainer here
            module.on_validation_epoch_start()
            module.validation_step(batch, 0)
        return tuple(float(metric.compute()) for metric in (module.val_loss, module.val_mse, module.val_mae))

    assert validation(marked) == pytest.approx(validation(changed), rel=1e-6)
    assert validation(marked)[0] != pytest.approx(validation(observed_changed)[0], rel=1e-3)


def test_the_validation_loss_is_the_mean_over_every_observed_cell_of_the_epoch():
    """Not the mean of the batches' means: a batch that fill_nan left few observed cells weighs as little."""
    dm = datamodule("MS")
    s = DataSpec.from_fitted(dm.fitted)
    torch.manual_seed(0)
    module = ForecastModule(build_model("informer", s, **TINY)).eval()
    first, second = itertools.islice(iter(dm.val_dataloader()), 2)
    sparse, _ = with_made_up_values(first, s)
    sparse["truth"][:, 1:] = float("nan")  # only the first step of each window observed
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*self.log", category=UserWarning)  # no trainer here
        module.on_validation_epoch_start()
        for index, batch in enumerate((sparse, second)):
            module.validation_step(batch, index)
    assert float(module.val_loss.compute()) == pytest.approx(float(module.val_mse.compute()), rel=1e-6)


@pytest.mark.parametrize("name, options", [("informer", TINY), ("logsparse", {**LOGSPARSE, "head": "gaussian"})],
                         ids=str)
def test_values_fill_nan_made_up_are_no_truth_to_calibrate_on(name, options):
    """The share of the correction kept and the Gaussian head's predictive scale, fitted on validation windows,
    are the same whatever values fill_nan wrote in the cells it filled."""
    dm = datamodule("MS")
    s = DataSpec.from_fitted(dm.fitted)
    torch.manual_seed(0)
    model = build_model(name, s, **options, revin=True).eval()
    batch = next(iter(dm.val_dataloader()))
    center, correction = model.center_and_correction(*model_inputs(s, batch))  # [B, P, C_out] each
    noise = 0.1 * torch.randn(center.shape, generator=torch.Generator().manual_seed(1))
    batch["y"][:, -s.pred_len:, -s.c_out:] = center + 0.4 * correction + noise  # a share of about 0.4 fits
    marked, changed = with_made_up_values(batch, s)
    observed_changed = {**changed, "truth": changed["y"][:, -s.pred_len:, -s.c_out:].double()}
    shares = [seeded(model.fit_correction_weight, [batch]) for batch in (marked, changed, observed_changed)]
    assert 0 < shares[0] < 1 and shares[0] == pytest.approx(shares[1], abs=1e-6)
    assert shares[0] != pytest.approx(shares[2], abs=1e-3)
    if model.calibratable:
        factors = [seeded(model.calibrate_scale, [batch]) for batch in (marked, changed, observed_changed)]
        assert factors[0] == pytest.approx(factors[1], rel=1e-6)
        assert factors[0] != pytest.approx(factors[2], rel=1e-3)


def test_validation_and_testing_run_without_gradients():
    """docs/pitfalls.md: the original code validates and tests without ``no_grad``. Here the model's forward builds
    no graph outside training: every validation and test forward runs with gradients off."""
    dm = datamodule("M", batch_size=16)
    torch.manual_seed(0)
    model = build_model("dlinear", DataSpec.from_fitted(dm.fitted), **OPTIONS["dlinear"])
    module = ForecastModule(model, learning_rate=1e-3)
    grad_modes: list[tuple[bool, bool]] = []  # (training, gradients enabled) of each forward
    model.register_forward_pre_hook(lambda m, _: grad_modes.append((m.training, torch.is_grad_enabled())))
    run = trainer(limit_train_batches=2, limit_val_batches=2, limit_test_batches=2)
    with lightning_warnings():
        run.fit(module, datamodule=dm)
        run.test(module, datamodule=dm, verbose=False)
    assert (True, True) in grad_modes  # the training steps did run, with gradients
    assert {enabled for training, enabled in grad_modes if not training} == {False}
