"""Installed packages that extend the ``forecast`` command: their own models and attentions.

A package declares an entry point in the group ``forecast.plugins`` (in its ``pyproject.toml``)::

    [project.entry-points."forecast.plugins"]
    my_models = "my_package.forecasting:register"

and the command loads it before it reads its command line: the module is imported, and a function named
after the colon is called with no arguments. Either registers what the package offers, with
:func:`forecast.models.register_model` or in :data:`forecast.layers.attention.ATTENTIONS`, so that
``forecast fit --model.name my_model`` and a saved run's ``forecast predict`` find it. In Python,
import the package (or call its function) yourself: the library never loads plugins on its own.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import logging

from forecast.errors import ConfigError

__all__ = ["PLUGIN_GROUP", "load_plugins"]

logger = logging.getLogger(__name__)

PLUGIN_GROUP = "forecast.plugins"


def load_plugins() -> list[str]:
    """Load every installed ``forecast.plugins`` entry point; returns their names. ConfigError naming the
    plugin, its package and the fix when one fails to import or to register."""
    loaded = []
    for entry in importlib.metadata.entry_points(group=PLUGIN_GROUP):
        package = entry.dist.name if entry.dist is not None else entry.module
        try:
            target = entry.load()
            if inspect.isfunction(target):
                target()
        except Exception as error:  # a plugin's own failure, whatever it is, stops the command with its name
            raise ConfigError(
                f"the plugin {entry.name!r} ({entry.value}, from the package {package!r}) failed to load: "
                f"{type(error).__name__}: {error}. Fix: update or repair that package, or uninstall it "
                f"(pip uninstall {package})."
            ) from error
        loaded.append(entry.name)
    if loaded:
        logger.debug("loaded the forecast plugins %s", loaded)
    return loaded
