"""``Forecaster``: fit, evaluate, predict the real future, plot, save and load, in a few lines.

    from forecast import Forecaster, datasets
    fc = Forecaster("informer", seq_len=96, label_len=48, pred_len=24, max_epochs=6, seed=0)
    fc.fit(datasets.load("ETTh1"))      # the canonical split of a known dataset, else 70/10/20
    report = fc.evaluate()              # metric x scale table over every test window (detail=True: long)
    future = fc.predict()               # the pred_len steps after the last row, original units
    fc.save("runs/etth1"); fc = Forecaster.load("runs/etth1")

It composes the package's parts and adds no modelling of its own: a
:class:`~forecast.data.WindowDataModule` cuts and scales the windows, a registered model
(:data:`forecast.models.MODELS`) is trained by :class:`~forecast.module.ForecastModule`
through the shared recipe of :mod:`forecast.training` (early stopping on validation
loss; the best epoch's weights are kept).

Options are routed by name (:class:`~forecast.options.ForecasterOptions`):
:class:`~forecast.data.DataConfig` fields go to the data,
:class:`~forecast.training.TrainingConfig` fields to training (``batch_size`` and
``num_workers`` to both), ``lightning.Trainer`` arguments to the trainer, and every
other name must be a field of the model's config (``InformerConfig`` for ``informer``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Hashable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import pandas as pd
from lightning.pytorch.utilities.seed import isolate_rng
from matplotlib.figure import Figure

from forecast.checks import require_bool, require_choice
from forecast.data import WindowDataModule
from forecast.data.fitted import FittedState
from forecast.data.io import Table
from forecast.data.splits import SPLIT_NAMES
from forecast.errors import ConfigError
from forecast.metrics import DEFAULT_QUANTILES, check_variable_names, pivot_report
from forecast.models import DataSpec, ForecastModel, build_model, model_options
from forecast.module import ForecastModule
from forecast.options import ForecasterOptions
from forecast.plotting import check_forecast_names
from forecast.predictor import (DataFile, Predictor, fit_lock, prepare_run_dir, read_config, refuse_point_quantiles,
                                series_report)
from forecast.recipes import DEFAULT_RECIPE
from forecast.training import EpochLog, TrainedRun, TrainingConfig, fit_best, placement, test_windows

__all__ = ["Forecaster", "model_option_names"]


log = logging.getLogger(__name__)


def model_option_names(model: str) -> tuple[str, ...]:
    """The options the registered ``model`` accepts: the fields of its config dataclass."""
    return model_options(model)


def _train(options: ForecasterOptions, data: Table, split: Any, run_dir: str | os.PathLike[str] | None,
           resume: bool) -> tuple[TrainedRun, Predictor]:
    """``Forecaster.fit``'s training: the shared recipe (:func:`~forecast.training.fit_best`) run with
    ``options`` on ``data``; with ``run_dir``, checkpoints there (resumed if ``resume`` and they match) and the
    fitted predictor saved there, under the folder's fit lock."""
    placement(options.training)  # a device setting Lightning refuses is named before the data is read
    with _seeded(options.training.seed):
        return _train_seeded(options, data, split, run_dir, resume)


# What seed_everything(workers=True) leaves in the environment, for later Trainers of the process to read.
_SEED_VARIABLES = ("PL_GLOBAL_SEED", "PL_SEED_WORKERS")


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Python, numpy and torch seeded with ``seed`` (``lightning.seed_everything``) for the duration; the caller's
    random states and Lightning's seed variables are theirs again after: a fit does not make the caller's later
    draws repeat, nor seed a later Trainer's workers."""
    saved = {name: os.environ.get(name) for name in _SEED_VARIABLES}
    with isolate_rng():
        L.seed_everything(seed, workers=True, verbose=False)
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def _train_seeded(options: ForecasterOptions, data: Table, split: Any, run_dir: str | os.PathLike[str] | None,
                  resume: bool) -> tuple[TrainedRun, Predictor]:
    data_file = DataFile.of(data)  # before the file is read: its digest then, not after an edit during training
    datamodule = options.new_datamodule(data, split)
    datamodule.setup()
    fitted = datamodule.fitted
    check_forecast_names(fitted.output_columns, source=datamodule.source)  # the levels: checked by the options
    check_variable_names(fitted.output_columns, source=datamodule.source)  # before training, not at evaluate()
    model = build_model(options.model, DataSpec.from_fitted(fitted), **options.model_options)
    refuse_point_quantiles(options.model, options.quantiles, model.probabilistic)
    module = options.new_module(model, fitted)
    # expanduser: Lightning expands "~" in the checkpoints' folder, so the run's files would be split in two.
    run_path, config = Path(run_dir).expanduser() if run_dir is not None else None, options.config()
    with fit_lock(run_path):
        resume = prepare_run_dir(run_path, config, fitted, split, data_file, resume) if run_path is not None else False
        run = fit_best(module, datamodule, options.training, run_path, callbacks=options.callbacks,
                       progress=options.progress, resume=resume)
        predictor = Predictor(module, fitted, config, split=split, datamodule=datamodule, data_file=data_file)
        if run_path is not None and (run.trainer is None or run.trainer.is_global_zero):  # under DDP one saves
            predictor.save(run_path)
    return run, predictor


def _score(forecaster: Forecaster, data: Table | None, split: Any, windows: str, detail: bool, by_series: bool
           ) -> pd.DataFrame:
    """``Forecaster.evaluate``'s scoring: the report of split ``windows`` of the fitted data or of ``data``
    (split by ``split``, default the fit's), scaled with the fitted state."""
    predictor, options = forecaster.predictor, forecaster._options
    module = predictor.module
    if data is None:
        datamodule = predictor.require_data("evaluate()")
        if split is not None or windows != datamodule.config.test_split:
            # Scaled with the fitted state: a new split's training rows never refit the scaler.
            resplit = {"split": split} if split is not None else {}
            datamodule = datamodule.with_options(test_split=windows, fitted=predictor.fitted_state, **resplit)
    else:
        datamodule = forecaster.windows_of(data, split=split, windows=windows)
    if require_bool("by_series", by_series):
        if require_bool("detail", detail):  # the breakdown by series has no per-step rows: detail was dropped
            raise ConfigError("evaluate(detail=True, by_series=True): the breakdown by series is one row of "
                              "metrics per series, with no per-horizon or per-variable report. Fix: give either.")
        return series_report(module, predictor.fitted_state, datamodule.test_dataloader())
    test_windows(module, datamodule, options.training, callbacks=options.callbacks, progress=options.progress)
    assert module.test_report is not None
    if windows == "val" and options.training.calibrate_scale and module.model.calibratable:
        log.info("coverage_0.8 of the fit's validation windows is in-sample: calibrate_scale fitted the predictive "
                 "scale to cover 80% of them; judge calibration on the test windows")
    return module.test_report.copy() if require_bool("detail", detail) else pivot_report(module.test_report)


def _window_source(forecaster: Forecaster, df: Table | None, window: int | None, split: str
                   ) -> tuple[WindowDataModule | None, Table | None]:
    """``(df's windows, None)`` where a window of ``df`` is asked for, else ``(None, df)``."""
    if window is None or df is None:
        return None, df
    return forecaster.windows_of(df, windows=split), None


def _unfitted(cls: type[Forecaster], config: Mapping[str, Any], path: Path) -> Forecaster:
    """The unfitted forecaster a saved ``config`` (of ``path``) describes; ConfigError names an edited file, or an
    attention registered at run time that this process has not registered."""
    from forecast.layers.attention import ATTENTIONS

    unregistered = [f"{key}={value!r}" for key in ("attention", "decoder_attention")
                    if isinstance(value := config["model_options"].get(key), str) and value not in ATTENTIONS]
    if unregistered:
        raise ConfigError(f"{path}: the run was fitted with {', '.join(unregistered)}, which this process has not "
                          f"registered (it has {sorted(ATTENTIONS)}). Fix: import the code that registers it "
                          "(forecast.layers.attention.ATTENTIONS[name] = ...) before loading.")
    training = dict(config["training"])
    try:
        # Saved before recipes existed: the paper's settings were the only ones.
        return cls(config["model"], **config["data"], max_epochs=training.pop("max_epochs"),
                   seed=training.pop("seed"), recipe=config.get("recipe", "paper"), quantiles=config["quantiles"],
                   progress=config["progress"], **config["model_options"], **training)
    except (ConfigError, KeyError, TypeError) as error:  # options edited in the file: missing, unknown, invalid
        problem = f"training.{error.args[0]} is missing" if isinstance(error, KeyError) else str(error)
        raise ConfigError(f"{path / 'config.json'}: {problem} (the file was edited or damaged). Fix: "
                          "restore it as the fit saved it, or fit again.") from None


class Forecaster:
    """Fit a registered model on a table, evaluate it, forecast the real future, save and load it.

    Args:
        model: a registered model name (``informer``, ``transformer``, ``naive``, ...).
        seq_len, label_len, pred_len: lookback L, decoder start tokens, horizon P.
        features: ``"M"`` all variables in and out, ``"S"`` the target alone, ``"MS"``
            all in, the target out.
        target: the target column (last in model order). ``None`` (the default): a
            registered dataset's own target; otherwise ``M`` uses every column as it is and
            ``S``/``MS`` the last numeric column (logged).
        max_epochs: training epochs at most (early stopping on validation loss); ``None``
            takes the recipe's.
        seed: seeds Python, numpy and torch during ``fit`` (``lightning.seed_everything``; the
            caller's random states are restored when it returns) and the training loader's shuffling.
            Sampled quantile forecasts are drawn as ``evaluate`` scores them, from 100 paths with a
            fixed seed of their own, whatever ``seed`` is.
        recipe: the named recipe (:mod:`forecast.recipes`) whose model options and
            training settings the forecaster starts from: ``improved`` (the default:
            reversible instance normalization and the settings chosen on validation
            windows) or ``paper`` (the papers' settings). Options given here win.
        quantiles: levels of the quantile columns ``predict`` adds for models that
            forecast distributions (``model.probabilistic``); levels other than the default asked
            of a model that forecasts points are refused.
        progress: show Lightning's progress bar; ``None`` (the default): in interactive use (a
            terminal or a Jupyter kernel) unless the ``CI`` environment variable is set.
            Lightning's own messages (accelerator summary, tips) are never shown; every
            epoch logs one INFO line on the ``forecast`` logger, and :attr:`history` keeps them.
        **options: data options (:class:`~forecast.data.DataConfig` fields such as
            ``freq``, ``time_encoding``, ``columns``, ``date_column``), training options
            (:class:`~forecast.training.TrainingConfig` fields such as ``learning_rate``,
            ``patience``, ``batch_size``, ``accelerator``), ``lightning.Trainer``
            arguments (``limit_val_batches``, ``logger``, ``callbacks``, ...) and model
            options (the fields of the model's config, e.g. ``d_model``, ``factor``).
            An unknown name raises :class:`~forecast.errors.ConfigError` listing them.
            ``callbacks`` (Lightning callbacks) and Trainer options without a JSON form
            are used by ``fit`` but not saved.

    ``fit`` trains; ``evaluate`` scores the test windows; ``predict`` forecasts the
    ``pred_len`` steps after the last row; ``plot`` draws it; ``attention_weights``
    returns the encoder's attention for the attention plots; ``save``/``load`` keep
    the whole forecaster in a directory. A loaded forecaster predicts on any frame with
    the fitted variables and evaluates on data given to ``evaluate``. ``fit(df, id_column=...)``
    trains one model over a long-format panel of many series, with future and static covariates.
    """

    def __init__(
        self,
        model: str = "informer",
        seq_len: int = 96,
        label_len: int = 48,
        pred_len: int = 24,
        features: str = "M",
        target: Hashable | None = None,
        max_epochs: int | None = None,
        seed: int = 0,
        *,
        recipe: str = DEFAULT_RECIPE,
        quantiles: Sequence[float] = DEFAULT_QUANTILES,
        progress: bool | None = None,
        **options: Any,
    ) -> None:
        window = {"seq_len": seq_len, "label_len": label_len, "pred_len": pred_len, "features": features,
                  "target": target}
        self._options = ForecasterOptions.route(model, window, max_epochs, seed, recipe=recipe, quantiles=quantiles,
                                                progress=progress, options=options)
        self._run = TrainedRun(None, EpochLog().frame())
        self._predictor: Predictor | None = None

    # ---------------------------------------------------------------- configuration

    @property
    def model_name(self) -> str:
        return self._options.model

    @property
    def model_options(self) -> dict[str, Any]:
        """The model's config options given to the constructor."""
        return dict(self._options.model_options)

    @property
    def training(self) -> TrainingConfig:
        return self._options.training

    @property
    def seed(self) -> int:
        return self._options.training.seed

    @property
    def progress(self) -> bool:
        """Whether Lightning's progress bar is shown (``progress=None`` resolved at construction)."""
        return self._options.progress

    @property
    def quantile_levels(self) -> tuple[float, ...]:
        """The levels of ``predict``'s quantile columns: the fitted predictor's, else the ``quantiles`` option."""
        return self._options.quantiles if self._predictor is None else self._predictor.quantile_levels

    @property
    def config(self) -> dict[str, Any]:
        """Everything needed to rebuild this forecaster (unfitted), as JSON types."""
        return self._options.config()

    @property
    def is_fitted(self) -> bool:
        return self._predictor is not None

    @property
    def predictor(self) -> Predictor:
        """The fitted model with its data state (after ``fit`` or ``load``): what predicts, plots and saves."""
        if self._predictor is None:
            raise ConfigError("this Forecaster is not fitted. Fix: call fit(data) or Forecaster.load(path) first.")
        return self._predictor

    @property
    def module(self) -> ForecastModule:
        """The trained :class:`~forecast.module.ForecastModule` (after ``fit`` or ``load``)."""
        return self.predictor.module

    @property
    def model(self) -> ForecastModel:
        """The trained model (after ``fit`` or ``load``)."""
        return self.predictor.model

    @property
    def datamodule(self) -> WindowDataModule | None:
        """The data module of the last ``fit`` (``None`` for a loaded forecaster)."""
        return self._predictor.datamodule if self._predictor is not None else None

    @property
    def input_columns(self) -> list[Hashable]:
        return self.predictor.input_columns

    @property
    def output_columns(self) -> list[Hashable]:
        return self.predictor.output_columns

    @property
    def freq(self) -> str:
        return self.predictor.freq

    def windows_of(self, data: Table, *, split: Any = None, windows: str = "test") -> WindowDataModule:
        """A data module cutting ``data``'s windows as this forecaster's fit did, scaled with the fitted state
        (never refitted): split by ``split`` (default the fit's), its test loader serving split ``windows``.
        Call ``setup("fit")`` for the train and validation loaders, ``setup("test")`` for the test one. For
        work on a fitted model's windows beyond :meth:`evaluate`, such as refitting what is fitted after training."""
        require_choice("windows", windows, SPLIT_NAMES)
        predictor = self.predictor
        return self._options.new_datamodule(data, split if split is not None else predictor.split,
                                            fitted=predictor.fitted_state, test_split=windows)

    def __repr__(self) -> str:
        window = ", ".join(f"{key}={value!r}" for key, value in self._options.window.items())
        options = "".join(f", {key}={value!r}" for key, value in self._options.model_options.items())
        state = f"fitted on {self._predictor.fitted_state.dataset}" if self._predictor is not None else "not fitted"
        return f"Forecaster({self.model_name!r}, {window}{options}, seed={self.seed}) [{state}]"

    @property
    def history(self) -> pd.DataFrame:
        """One row per epoch of the last ``fit`` (``epoch``, ``train_loss``, ``val_loss``, ``learning_rate``,
        ``seconds``), a resumed run's earlier epochs included; empty for a model that does not train
        and for a loaded forecaster."""
        return self._run.history.copy()

    @property
    def last_fit(self) -> TrainedRun:
        """What the last ``fit`` left: its history, training seconds, epochs, best epoch and validation
        loss, and the Lightning trainer (``None`` when nothing was trained, or for a loaded forecaster)."""
        return self._run

    @property
    def fitted_state(self) -> FittedState:
        """The fitted data state (variables, frequency, windows, train-row scaler) that scales any data
        this forecaster reads, e.g. ``WindowDataModule(other, ..., fitted=fc.fitted_state)``."""
        return self.predictor.fitted_state

    # --------------------------------------------------------------------------- fit

    def fit(
        self,
        data: Table,
        *,
        split: Any = None,
        run_dir: str | os.PathLike[str] | None = None,
        resume: bool = True,
        **reading: Any,
    ) -> Forecaster:
        """Train on a DataFrame, a Series, a CSV path or a registered dataset name; returns ``self``.

        ``reading``: how to read ``data``, overriding the constructor's: ``target``,
        ``date_column``, ``freq``, ``fill_nan``, ``columns``, and for a long-format panel of many
        series ``id_column`` with ``past_covariates``, ``future_covariates`` (known ahead: predict
        then needs their future values) and ``static_covariates``, e.g.
        ``fit(df, id_column="unique_id", date_column="ds", target="y", future_covariates=["promo"])``.
        They are kept, so ``save``/``load``, ``evaluate(data)`` and ``predict(df)`` read alike.

        ``split``: ``None`` gives a registered dataset its canonical protocol and other
        data 70/10/20 by rows; or a protocol name, three fractions, three row ends, or two
        timestamps where val and test start, e.g. ``("2023-07-01", "2023-10-01")`` (see
        :class:`~forecast.data.DataConfig`). ``data`` may also be a DataFrame indexed by
        its timestamps or a ``pd.Series``. Everything is seeded from ``seed``.
        The weights of the epoch with the lowest validation loss are kept. Models
        without trainable parameters (``naive``) and ``max_epochs=0`` skip training.

        With ``run_dir``: a checkpoint every epoch under ``run_dir/checkpoints``
        (``last.ckpt`` and the best), the curves in ``run_dir/lightning_logs`` (unless a
        ``logger`` option says otherwise), and the saved forecaster (as :meth:`save`) in
        ``run_dir``. With ``resume`` (default), a run killed earlier continues from its
        ``last.ckpt``, after checking that it was made with the same model, options,
        variables and data (the same scaling of the training rows), before the folder is touched.
        A finished run there without checkpoints (a sweep's re-fit, a :meth:`save` folder) is checked
        alike: another run is refused, the same one trains again.
        A fit that does not resume replaces the run in ``run_dir``: the weights and checkpoints
        another fit left there are removed as it starts (a resumed one keeps the checkpoints), so a
        fit stopped before it finishes leaves a folder that :meth:`load` refuses, never one that
        pairs this fit's scaler with another fit's weights. A second process fitting the same ``run_dir`` meanwhile
        is refused (the folder's ``.fit.lock``).
        """
        options = self._options.with_reading(reading)  # kept only by a fit that succeeds: a failed one changes nothing
        self._run, self._predictor = _train(options, data, split, run_dir, resume)
        self._options = options
        return self

    # ---------------------------------------------------------------------- evaluate

    def evaluate(self, data: Table | None = None, *, split: Any = None, windows: str = "test",
                 detail: bool = False, by_series: bool = False) -> pd.DataFrame:
        """Score every window of a split (test by default).

        Returns a metric x scale table (:func:`forecast.metrics.pivot_report`): MSE, MAE, RMSE on the standardized
        and the original scale, MAPE and MSPE in original units only, rho-risks (a point forecast taken as every
        quantile) and, for probabilistic models, interval coverage, all horizons and variables pooled;
        ``attrs["n_windows"]`` counts the windows. ``detail=True`` returns the long report
        (:func:`forecast.metrics.report`) instead, with columns ``scale``, ``metric``, ``horizon`` (``"all"`` or
        1..P), ``variable``, ``value``, ``n_windows``, for per-horizon and per-variable breakdowns.

        Default: the fitted data's test windows. ``windows='val'`` (or ``'train'``) scores that split's windows
        instead: e.g. a probabilistic model's interval coverage on validation, checked before looking at test (but
        ``calibrate_scale``, on in the ``improved`` recipe, fits the scale to cover 80% of the validation windows:
        their coverage is then 0.8 by construction, as logged). ``split`` (default the fit's) splits the fitted data
        another way, e.g. ``split=("2021-06-01", "2021-09-01")`` to score a later period; ``data`` scores other
        data, e.g. after ``load``. Both are scaled with the fitted state (never refitted); ``data`` must hold the
        fitted variables (found by name, in any order), else :class:`~forecast.errors.UnknownColumnError`.

        A panel's windows of every series are pooled; ``by_series=True`` returns one row per series instead, with
        a column per metric and scale (``mse``, ``mse_orig``, ``coverage_0.8_orig``, ...) and ``n_windows``
        (:func:`forecast.predictor.series_report`).
        """
        require_choice("windows", windows, SPLIT_NAMES)
        return _score(self, data, split, windows, detail, by_series)

    # ------------------------------------------------------- forecasts (the predictor's)

    def predict(self, df: Table | None = None, *, future_covariates: Table | None = None) -> pd.DataFrame:
        """The ``pred_len`` steps after the last row of ``df`` (default: the fitted data), original units,
        with quantile columns for probabilistic models; for a panel, after each series' own end, as a
        long frame, with ``future_covariates`` giving the known covariates of those steps:
        :meth:`Predictor.predict <forecast.predictor.Predictor.predict>`."""
        return self.predictor.predict(df, future_covariates=future_covariates)

    def plot(self, df: Table | None = None, *, window: int | None = None, split: str = "test",
             columns: Sequence[Hashable] | None = None, history: int | None = None, series: Hashable | None = None,
             future_covariates: Table | None = None) -> Figure:
        """A Figure of the forecast of the real future (a panel's: of series ``series``), or of window
        ``window`` of ``split`` against the truth (of ``df``'s windows, cut as the fit cut its data, where ``df`` is
        given: a loaded forecaster holds no data): :meth:`Predictor.plot <forecast.predictor.Predictor.plot>`."""
        windows, df = _window_source(self, df, window, split)
        return self.predictor.plot(df, window=window, split=split, columns=columns, history=history, series=series,
                                   future_covariates=future_covariates, windows=windows)

    def attention_weights(self, df: Table | None = None, *, window: int | None = None,
                          split: str = "test") -> list[Any]:
        """The encoder's attention weights for one input window (a window of ``df`` where both are given, as
        :meth:`plot`): :meth:`Predictor.attention_weights <forecast.predictor.Predictor.attention_weights>`."""
        windows, df = _window_source(self, df, window, split)
        return self.predictor.attention_weights(df, window=window, split=split, windows=windows)

    # ---------------------------------------------------------------- save and load

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the fitted forecaster to directory ``path`` (:meth:`Predictor.save
        <forecast.predictor.Predictor.save>`: ``config.json``, ``scaler.json``, ``model.pt``); returns it."""
        return self.predictor.save(path)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, scored_like: Forecaster | None = None) -> Forecaster:
        """A forecaster written by :meth:`save` (or by ``fit(..., run_dir=path)``), ready to predict.

        The weights are read with ``torch.load(..., weights_only=True)`` onto the CPU: a file holding
        pickled code (or a damaged one) raises :class:`~forecast.errors.ConfigError`. ``scored_like``: a
        forecaster whose loader and device settings (never its model) evaluate this one, and place it for
        ``predict``, where the saved ones were another machine's.
        """
        path = Path(path).expanduser()  # as fit's run_dir
        config = read_config(path)
        forecaster = _unfitted(cls, config, path)
        if scored_like is not None:
            forecaster._options = forecaster._options.with_scoring(scored_like._options)
        options = forecaster._options
        forecaster._predictor = Predictor.load(path, config, options.model_options, options.new_module,
                                               device=None if scored_like is None else placement(options.training))
        return forecaster
