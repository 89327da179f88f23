"""Attributes of a package imported on first use (PEP 562), so light imports stay light."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(package: str, namespace: dict[str, Any], sources: Mapping[str, str]
                    ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package`` resolving ``sources`` on demand.

    ``sources`` maps a public name to the module defining it, or to the submodule of that
    name. A resolved name is stored in ``namespace`` (the package's ``globals()``), so
    later look-ups never come back here.
    """

    def __getattr__(name: str) -> Any:
        module_name = sources.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(module_name)
        value = module if module_name == f"{package}.{name}" else getattr(module, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(sources))

    return __getattr__, __dir__
