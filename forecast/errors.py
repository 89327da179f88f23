"""The package's exceptions: one hierarchy, so callers can catch ``ForecastError``.

Every message names what was wrong (file, column, row or option) and how to fix it.
Data errors also subclass ``ValueError`` so generic handlers keep working.
"""

from __future__ import annotations


class ForecastError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(ForecastError, ValueError):
    """An invalid model, data or training setting."""


class DataError(ForecastError, ValueError):
    """Input data that cannot be turned into forecasting windows as it is."""


class DatasetUnavailableError(ForecastError, FileNotFoundError):
    """A registered benchmark dataset could not be found locally nor downloaded."""


class ChecksumError(ForecastError):
    """A downloaded or mirrored file does not have the registered sha256."""


# Specific data errors (CSV loading and validation, splits). Each message names the
# file (or '<DataFrame>'), the column or row, and the fix.


class CsvReadError(DataError):
    """A CSV file is missing, empty or cannot be parsed as a table."""


class MissingDateColumnError(DataError):
    """The date column named by ``date_column`` is not in the table."""


class UnparsableDateError(DataError):
    """A value of the date column is empty or is not a timestamp."""


class UnsortedTimestampError(DataError):
    """Timestamps go backwards at some row."""


class DuplicateTimestampError(DataError):
    """The same timestamp appears on more than one row."""


class IrregularTimestampError(DataError):
    """Consecutive timestamps are not one frequency step apart (gaps or jitter)."""


class MixedFrequencyError(DataError):
    """The series of a panel step by different frequencies."""


class NonNumericColumnError(DataError):
    """A variable column holds values that are not numbers."""


class NonFiniteValueError(DataError):
    """A variable holds NaN or infinite values and no fill policy was chosen."""


class NoVariablesError(DataError):
    """The table has no variable column besides the date."""


class UnknownColumnError(DataError):
    """A requested column is not in the table."""


class UnknownTargetError(UnknownColumnError):
    """The forecasting target is not a column of the table."""


class SeriesTooShortError(DataError):
    """Some split has fewer rows than one window needs."""


class DuplicateColumnError(DataError):
    """Two columns of the table have the same name."""


class UnknownSeriesError(DataError, KeyError):
    """A series id that is not in the panel (also a ``KeyError``: a panel is looked up by id)."""

    __str__ = Exception.__str__  # the message as written, not KeyError's quoted repr


class NonFiniteForecastError(ForecastError):
    """A model produced NaN or infinite forecasts (a diverged training or extreme inputs)."""
