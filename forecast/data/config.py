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

    ``seq_len`` L (lookback), ``label_len`` (decoder start tokens, ``<= seq_len``) and
    ``pred_len`` P (horizon). ``features``: ``'M'`` all variables in and out, ``'S'`` the
    target alone, ``'MS'`` all in, the target out. ``target=None``: a registered dataset's
    own target, else every column as it is (``M``) or the last numeric column (``S``/``MS``).
    ``date_column=None``: the DatetimeIndex, else the one column holding timestamps.
    ``split``: ``None`` (the registered protocol of a known dataset, else ``'ratio'``), a
    protocol name, three fractions, three integer row ends, two dates where val and test
    start, or a ``RowSplit``/``FractionSplit``/``DateSplit``. ``drop_last_train`` defaults to
    ``False`` (every training window is used each epoch; the field drops the last partial
    batch: pass ``True`` to do the same). Val/test/predict loaders never drop
    or shuffle. ``test_split`` and ``predict_split`` name the windows the test and predict
    loaders serve (``'test'``; ``test_split='val'`` scores the validation windows with the
    test report, e.g. to check a probabilistic model's calibration before looking at test, unless
    ``calibrate_scale`` fitted its scale on those very windows).

    ``id_column`` reads the data as a long-format panel of many series
    (:func:`~forecast.data.panel.prepare_panel`): the model's inputs are ``past_covariates`` then
    ``target`` (which must be named), its output the target; ``future_covariates`` (known ahead)
    and ``static_covariates`` travel beside them. ``features`` then plays no part (``'S'`` with
    ``past_covariates`` is refused, as it would feed them all the same), and ``columns`` and the wide-table
    quirks (``allow_irregular``, ``allow_duplicates``) are refused.
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
