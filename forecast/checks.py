"""Checks of option values, shared by every config dataclass and public function.

Each ``require_*`` returns the value (as a plain ``int``/``float``/``bool``/tuple) or
raises :class:`~forecast.errors.ConfigError` with one message shape, naming the option,
what to pass and the value given: ``"<name> must be <what> (<hint>), got <name>=<repr>"``.
``bool`` is never a number here: ``True`` passed as a size or a rate is a mistake, not
a 1. Numpy scalars count as numbers (``numbers.Integral``/``numbers.Real``).
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Collection, Iterable

from forecast.errors import ConfigError

__all__ = ["closest_name", "did_you_mean", "is_int", "is_real", "require_bool", "require_choice", "require_int",
           "require_ints", "require_levels", "require_real"]


def is_int(value: object) -> bool:
    """Whether ``value`` is an integer (numpy integers included), ``bool`` excluded."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: object) -> bool:
    """Whether ``value`` is a finite real number (numpy scalars included), ``bool`` excluded."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond the float range
        return False


def _fail(name: str, expected: str, value: object, hint: str = "") -> ConfigError:
    detail = f" ({hint})" if hint else ""
    return ConfigError(f"{name} must be {expected}{detail}, got {name}={value!r}")


def require_int(name: str, value: object, minimum: int | None = None, *, optional: bool = False,
                hint: str = "") -> int | None:
    """``value`` as an ``int`` (``>= minimum`` when given); ``None`` passes when ``optional``."""
    if optional and value is None:
        return None
    if not is_int(value) or (minimum is not None and value < minimum):
        expected = "an integer" if minimum is None else f"an integer >= {minimum}"
        raise _fail(name, f"None or {expected}" if optional else expected, value, hint)
    return int(value)


def require_bool(name: str, value: object) -> bool:
    """``value`` if it is ``True`` or ``False`` (not 0/1, not ``'yes'``)."""
    if not isinstance(value, bool):
        # YAML 1.2, which configs are read as, reads yes/no/on/off as text, where YAML 1.1 read them as booleans.
        text = isinstance(value, str) and value.lower() in ("yes", "no", "on", "off", "y", "n", "true", "false")
        raise _fail(name, "True or False", value, "in YAML: true or false, unquoted" if text else "")
    return value


# What other code of the field names our options (Informer2020's flags, then common words): offered for a name
# that is none of ours, where spelling alone finds nothing close.
OTHER_NAMES = {"data_path": "dataset", "root_path": "dataset", "path": "dataset", "csv": "dataset", "file": "dataset",
               "train_epochs": "max_epochs", "epochs": "max_epochs", "lr": "learning_rate", "lradj": "lr_schedule",
               "attn": "attention", "embed": "time_encoding", "use_amp": "precision", "s_layers": "stack",
               "cols": "columns", "out_len": "pred_len", "horizon": "pred_len", "prediction_length": "pred_len",
               "input_len": "seq_len", "lookback": "seq_len", "context_length": "seq_len", "batch": "batch_size"}


def closest_name(value: object, choices: Iterable[object]) -> str | None:
    """The one of ``choices`` that text ``value`` most likely meant: the name it is another spelling of
    (:data:`OTHER_NAMES`), else the closest by spelling (a typo); ``None`` where none is close."""
    if not isinstance(value, str):
        return None
    names = [choice for choice in choices if isinstance(choice, str)]
    if OTHER_NAMES.get(value) in names:
        return OTHER_NAMES[value]
    close = difflib.get_close_matches(value, names, n=1)
    return close[0] if close else None


def did_you_mean(value: object, choices: Iterable[object]) -> str:
    """`` Did you mean 'informer'?`` where ``value`` is text close to one of ``choices`` (a typo, or another
    code's name for it: :func:`closest_name`), else ``""``."""
    close = closest_name(value, choices)
    return f" Did you mean {close!r}?" if close else ""


def require_choice(name: str, value: object, choices: Collection[object]) -> object:
    """``value`` if it is one of ``choices`` (a tuple lookup, so an unhashable value fails cleanly)."""
    options = tuple(choices)
    if value not in options:
        raise ConfigError(f"{_fail(name, f'one of {options}', value)}.{did_you_mean(value, options)}")
    return value


def _interval(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if low is not None and high is not None:
        return f"a real number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if low is not None:
        return f"a finite real number {'>' if low_open else '>='} {low:g}"
    if high is not None:
        return f"a finite real number {'<' if high_open else '<='} {high:g}"
    return "a finite real number"


def require_real(name: str, value: object, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False, hint: str = "") -> float:
    """``value`` as a finite ``float`` within the bounds; ``*_open`` excludes that bound.

    Dropout is ``low=0, high=1, high_open=True``; a level ``low=0, high=1, low_open=True,
    high_open=True``; a scale ``low=0, low_open=True``. NaN and infinities never pass.
    """
    valid = is_real(value)
    if valid and low is not None:
        valid = value > low if low_open else value >= low
    if valid and high is not None:
        valid = value < high if high_open else value <= high
    if not valid:
        if not hint and (low, high) == (0, 1):  # a level, rho, coverage or dropout rate
            hint = _percent_hint(value)
        raise _fail(name, _interval(low, high, low_open, high_open), value, hint)
    return float(value)


def _items(name: str, values: object, expected: str, allow_empty: bool) -> tuple[object, ...]:
    """``values`` as a tuple: any iterable but a string or a single value, empty only if allowed."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise _fail(name, expected, values)
    items = tuple(values)
    if not items and not allow_empty:
        raise _fail(name, expected, values)
    return items


def require_ints(name: str, values: object, minimum: int | None = None, *,
                 allow_empty: bool = False) -> tuple[int, ...]:
    """Integers (each ``>= minimum`` when given) as a tuple, order kept; element i is named ``name[i]``."""
    kind = "integers" if minimum is None else f"integers >= {minimum}"
    items = _items(name, values, f"a {'' if allow_empty else 'non-empty '}list of {kind}", allow_empty)
    return tuple(require_int(f"{name}[{index}]", value, minimum) for index, value in enumerate(items))


def require_levels(name: str, values: object, *, allow_empty: bool = False) -> tuple[float, ...]:
    """Probability levels strictly in (0, 1) (quantiles, rho-risks) as floats, order kept.

    Element i is named ``name[i]`` in the message. Repeated levels are the caller's concern.
    """
    expected = f"a {'' if allow_empty else 'non-empty '}list of levels in (0, 1), e.g. (0.1, 0.5, 0.9)"
    items = _items(name, values, expected, allow_empty)
    return tuple(require_real(f"{name}[{index}]", value, low=0, high=1, low_open=True, high_open=True)
                 for index, value in enumerate(items))


def _percent_hint(value: object) -> str:
    """How to write a fraction given in percent (90 for 0.9), else nothing."""
    if is_real(value) and 1 < value < 100:
        return f"pass a fraction, not a percentage: {value!r} percent is {value / 100:g}"
    return ""
