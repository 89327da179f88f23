"""``DataConfig``: the typed, self-validating settings of a ``WindowDataModule``."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from forecast.checks import require_bool, require_choice, require_int
from forecast.data.io import FEATURES, FILL_POLICIES, parse_offset
from forecast.data.splits import SPLIT_NAMES, SplitLike, resolve_split
from forecast.data.timefeatures import TIME_ENCODINGS
from forecast.errors import ConfigError


@dataclass(frozen=True)
class DataConfig:
    """Window sizes, variable choice, validation policies and loader settings.

    Val/test/predict loaders never drop or shuffle windows. A panel (``id_column``) is read by
    :func:`~forecast.data.panel.prepare_panel`: the model's inputs are ``past_covariates`` then
    ``target`` (which must be named), its output the target; ``features`` then plays no part
    (``'S'`` with ``past_covariates`` is refused, as it would feed them all the same), and
    ``columns`` and the wide-table quirks (``allow_irregular``, ``allow_duplicates``) are refused.

    Attributes:
        seq_len: L, the lookback: the steps each window's input holds.
        label_len: the decoder's start tokens, the last steps of the lookback (``<= seq_len``).
        pred_len: P, the horizon: the steps each window forecasts.
        features: ``M`` every variable in and out, ``S`` the target alone, ``MS`` every variable in
            and the target out.
        target: the column to forecast. None: a registered dataset's own target, else every
            column as it is (``M``) or the last numeric column (``S``/``MS``).
        freq: the data's frequency as a pandas offset (``h``, ``15min``, ``D``). None: inferred
            from the dates.
        time_encoding: the calendar features: ``timeF`` (continuous, in [-0.5, 0.5]), or
            ``fixed``/``learned`` (integer fields embedded by a fixed or a learned table).
        batch_size: training windows per batch.
        eval_batch_size: windows per validation, test and predict batch. None: ``batch_size``.
        num_workers: DataLoader worker processes (0: load in the training process).
        date_column: the column holding the dates. None: the DatetimeIndex, else the one column
            holding timestamps.
        split: where train, validation and test end. None: the registered protocol of a known
            dataset, else ``ratio`` (70/10/20). A protocol name (``ett_hour``, ``ett_minute``,
            ``ratio``), three fractions, three integer row ends, two dates where validation and test
            start, or a ``RowSplit``/``FractionSplit``/``DateSplit``.
        allow_irregular: accept dates that skip or repeat steps (the windows then span what they
            span in rows); refused by default.
        allow_duplicates: accept a date given twice; refused by default.
        fill_nan: how missing values are filled: ``ffill``, ``interpolate`` or ``zero``. None:
            missing values are refused, naming where they are.
        columns: the variables to read from a wide table, in order. None: every numeric column.
        seed: seeds the training loader's shuffling.
        drop_last_train: drop each epoch's last partial training batch, as the field's code does.
            False: every training window is used each epoch.
        test_split: the windows the test loader scores: ``test``, or ``val`` to check a
            probabilistic model's calibration before looking at test (unless ``calibrate_scale``
            fitted its scale on those very windows).
        predict_split: the windows the predict loader forecasts.
        pin_memory: pin the loaders' batches in page-locked memory (faster copies to a GPU).
        persistent_workers: keep the loader workers between epochs. None: when there are
            workers.
        id_column: the series id of a long-format panel of many series; None: a wide table.
        past_covariates: a panel's columns known up to each window's end, fed as inputs.
        future_covariates: a panel's columns known ahead, over the horizon too.
        static_covariates: a panel's columns constant within each series.
    """

    seq_len: int
    label_len: int
    pred_len: int
    features: str = "M"
    target: Hashable | None = None
    freq: str | None = None
    time_encoding: str = "timeF"
    batch_size: int = 32
    eval_batch_size: int | None = None
    num_workers: int = 0
    date_column: str | None = None
    split: SplitLike | None = None
    allow_irregular: bool = False
    allow_duplicates: bool = False
    fill_nan: str | None = None
    columns: tuple[Hashable, ...] | None = None
    seed: int = 0
    drop_last_train: bool = False
    test_split: str = "test"
    predict_split: str = "test"
    pin_memory: bool = False
    persistent_workers: bool | None = None
    id_column: Hashable | None = None
    past_covariates: tuple[Hashable, ...] = ()
    future_covariates: tuple[Hashable, ...] = ()
    static_covariates: tuple[Hashable, ...] = ()

    def __post_init__(self) -> None:
        require_int("seq_len", self.seq_len, 1)
        require_int("pred_len", self.pred_len, 1)
        require_int("label_len", self.label_len, 0)
        if self.label_len > self.seq_len:
            raise ConfigError(
                f"label_len={self.label_len} > seq_len={self.seq_len}; Fix: the decoder's start "
                "tokens are the end of the lookback, so pass label_len <= seq_len."
            )
        require_choice("features", self.features, FEATURES)
        if self.freq is not None:
            parse_offset(self.freq)
        require_choice("time_encoding", self.time_encoding, TIME_ENCODINGS)
        require_int("batch_size", self.batch_size, 1)
        require_int("eval_batch_size", self.eval_batch_size, 1, optional=True)
        require_int("num_workers", self.num_workers, 0)
        require_int("seed", self.seed, 0)
        if self.date_column is not None and (not isinstance(self.date_column, str) or not self.date_column):
            raise ConfigError(
                f"date_column={self.date_column!r}; Fix: pass the column name as a string, or None to use the "
                "DatetimeIndex or the one column holding timestamps."
            )
        if self.split is not None:
            resolve_split(self.split)
        for name in ("allow_irregular", "allow_duplicates", "drop_last_train", "pin_memory"):
            require_bool(name, getattr(self, name))
        if self.persistent_workers is not None:
            require_bool("persistent_workers", self.persistent_workers)
        require_choice("fill_nan", self.fill_nan, (None, *FILL_POLICIES))
        if self.columns is not None:
            if not isinstance(self.columns, (list, tuple)) or not all(isinstance(c, Hashable) for c in self.columns):
                raise ConfigError(f"columns={self.columns!r}; Fix: pass a list of column names.")
            object.__setattr__(self, "columns", tuple(self.columns))
        for role in ("past_covariates", "future_covariates", "static_covariates"):
            columns = getattr(self, role)
            if isinstance(columns, (str, bytes)) or not isinstance(columns, (list, tuple)):
                raise ConfigError(f"{role}={columns!r}; Fix: pass a list of column names.")
            object.__setattr__(self, role, tuple(columns))
            if columns and self.id_column is None:
                raise ConfigError(f"{role}={list(columns)!r} needs id_column: covariates are read from a long-format "
                                  "panel. Fix: pass id_column=<the series id column> (one series: a constant column).")
        if self.id_column is not None:
            if self.target is None:
                raise ConfigError("id_column is given but target is not; Fix: name the column to forecast (target=...).")
            for name in ("allow_irregular", "allow_duplicates"):
                if getattr(self, name):
                    raise ConfigError(f"{name}=True is for wide tables; a panel's series must be regular and "
                                      "unique in time. Fix: resample the series, or drop the repeated rows.")
            if self.features == "S" and self.past_covariates:
                raise ConfigError(f"features='S' forecasts from the target alone, but a panel's inputs are its target "
                                  f"and the covariates it names, past_covariates={list(self.past_covariates)!r}. "
                                  "Fix: leave past_covariates out for a univariate model (features plays no part "
                                  "in a panel).")
            if self.columns is not None:
                raise ConfigError("columns=... chooses a wide table's variables; a panel's are its target and "
                                  "past_covariates. Fix: leave columns unset.")
        require_choice("test_split", self.test_split, SPLIT_NAMES)
        require_choice("predict_split", self.predict_split, SPLIT_NAMES)
