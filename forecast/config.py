"""YAML run configs: one file names a model, its options, the data and the training.

    model:                     # a registered model and the fields of its config dataclass
      name: informer
      d_model: 512
      factor: 3
    data:                      # a registered dataset or a CSV path, then DataConfig fields
      dataset: ETTh1
      features: M
      seq_len: 48
      label_len: 48
      pred_len: 24
      batch_size: 32
    trainer:                   # TrainingConfig fields and any lightning.Trainer argument
      max_epochs: 6
      learning_rate: 1.0e-4
      accelerator: auto
    seed: 0
    recipe: improved           # optional: the named recipe the options start from (forecast.recipes)
    run_dir: runs/etth1        # optional: checkpoints and the saved forecaster

Files are read safely (no Python objects). The command line is ``jsonargparse``'s
(:func:`config_parser`): several ``--config`` files merge in order, and every option can be
set or overridden as ``--section.key value`` (or ``--section.key=value``, or ``--seed 1`` at
the top level), so a run can be named by flags alone. Each option is parsed with the type of
the dataclass field it fills (``InformerConfig``, ``DataConfig``, ``TrainingConfig``) or of the
``lightning.Trainer`` argument: ``--trainer.max_epochs 1`` is an integer, ``--model.stack
[3,2,1]`` a list, ``--model.d_model sixteen`` an error, and ``--data.target no`` the string
``no``. ``forecast fit --help`` lists every option of the model the config names with its type
and the default the run gets: the recipe in effect (the config's ``recipe:``, ``--recipe``, default
``improved``) over the model's and TrainingConfig's own defaults, each option the recipe sets marked
so. Unknown sections and keys fail with the closest name and the list of valid ones.
Only the options given are kept: the recipe fills in the rest when a Forecaster or an
Experiment is built, and a results key names what was chosen, not every default. So
``--print_config`` (:func:`describe_config`) prints the options given as the config, then what the
recipe and the defaults fill in as YAML comments: fed back, it is the same config and the same run.

A :class:`RunConfig` builds a :class:`~forecast.Forecaster` (the console script's
``fit``/``validate``/``test``/``predict``) or an :class:`~forecast.experiment.Experiment`
(``forecast sweep``), so both routes train exactly what the file says.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import json
import operator
import os
import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from forecast import datasets as registry
from forecast.checks import closest_name, did_you_mean, require_bool, require_int
from forecast.errors import ConfigError
from forecast.recipes import DEFAULT_RECIPE, RECIPES, get_recipe

__all__ = [
    "CONFIG_NAME",
    "RunConfig",
    "WINDOW_DEFAULTS",
    "add_data_arguments",
    "config_parser",
    "data_option_names",
    "describe_config",
    "load_config",
    "parse_config",
    "read_config_text",
    "read_yaml",
    "snake_case_flag",
    "trainer_option_names",
    "valid_options_hint",
]

SECTIONS = ("model", "data", "trainer")
TOP_LEVEL = ("seed", "recipe", "run_dir", "quantiles", "progress")
# Where `forecast fit` and `forecast sweep` keep run folders unless told otherwise: one scheme for both.
DEFAULT_RUNS_DIR = Path("runs")
# Benchmark config files are named <model>_<features>_<pred_len>.yaml, in a folder per dataset.
CONFIG_NAME = re.compile(r"^(?P<model>.+)_(?P<features>M|S|MS)_(?P<pred_len>\d+)$")
_BOOL_TAG, _INT_TAG, _FLOAT_TAG = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
# jsonargparse's name for how this package's parsers read --config files (config_parser).
_PARSER_MODE = "forecast_yaml"

# The window and variables an Experiment holds as its own fields; the rest of `data` are data options.
_WINDOW = ("seq_len", "label_len", "pred_len", "features", "target", "time_encoding")
# A config's window where its data section leaves it out (the Informer paper's ETTh1 setting at horizon 24).
WINDOW_DEFAULTS = {"seq_len": 96, "label_len": 48, "pred_len": 24, "features": "M", "time_encoding": "timeF"}
# Loader settings that are also training settings; they live in `data`, like a LightningDataModule's.
_LOADER = ("batch_size", "num_workers")


@functools.lru_cache(maxsize=None)
def data_option_names() -> tuple[str, ...]:
    """Keys of the ``data`` section: ``dataset``, ``split`` and the DataConfig fields (the seed is top-level;
    the windows to score are ``forecast test --windows``)."""
    from forecast.data import DataConfig

    return ("dataset", "split", *(f.name for f in dataclasses.fields(DataConfig)
                                  if f.name not in ("seed", "split", "test_split")))


@functools.lru_cache(maxsize=None)
def trainer_option_names() -> tuple[str, ...]:
    """Keys of the ``trainer`` section: TrainingConfig fields, then ``lightning.Trainer`` arguments."""
    import lightning as L

    from forecast.options import MANAGED_TRAINER_ARGUMENTS  # checkpoints follow run_dir; callbacks are objects
    from forecast.training import TrainingConfig

    training = [f.name for f in dataclasses.fields(TrainingConfig)
                if f.name not in ("seed", "extra_trainer_options", *_LOADER)]
    trainer = [name for name in inspect.signature(L.Trainer.__init__).parameters
               if name not in (*MANAGED_TRAINER_ARGUMENTS, *training, *_LOADER)]
    return (*training, *trainer)


# ----------------------------------------------------------------------------- reading


class _Yaml12Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` reading plain scalars as YAML 1.2 does, like the command line: only ``true`` and
    ``false`` are booleans (YAML 1.1's ``no``, ``yes``, ``on``, ``off`` are the strings they look like: a column
    named ``no`` in ``target: no``), ``1e-4`` is a float (YAML 1.1 wants ``1.0e-4``), and an integer is decimal
    unless written ``0x``/``0o``: ``010`` is 10 (YAML 1.1: octal 8) and ``12:00`` the text (YAML 1.1: 720, base 60)."""

    yaml_implicit_resolvers = {
        first: [(tag, pattern) for tag, pattern in resolvers if tag not in (_BOOL_TAG, _INT_TAG, _FLOAT_TAG)]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """A mapping whose keys are unique: YAML would keep the last of two alike (``name: naive`` then ``name:
        dlinear``) and say nothing."""
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    f"in the mapping starting at line {node.start_mark.line + 1}", node.start_mark,
                    f"key {key!r} appears twice (lines {seen[key].line + 1} and {key_node.start_mark.line + 1}), and "
                    "only the second would be read. Fix: keep one", key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        text = str(self.construct_scalar(node)).replace("_", "")
        base = {"0x": 16, "0o": 8}.get(text[:2], 10)
        return int(text[2:] if base != 10 else text, base)


_Yaml12Loader.add_implicit_resolver(_BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_Yaml12Loader.add_constructor(_INT_TAG, _Yaml12Loader.construct_yaml_int)
_Yaml12Loader.add_implicit_resolver(_INT_TAG, re.compile(r"^(?:[-+]?[0-9][0-9_]*|0o[0-7_]+|0x[0-9a-fA-F_]+)$"),
                                    list("-+0123456789"))
_Yaml12Loader.add_implicit_resolver(  # after the int resolver, which keeps the integers
    _FLOAT_TAG, re.compile(r"^[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?$"
                           r"|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"), list("-+0123456789."))


def load_yaml(text: str) -> Any:
    """``text`` as YAML 1.2 plain data (:class:`_Yaml12Loader`): config files, sweep files and, through
    the parser's mode, ``--config`` files alike."""
    loader = _Yaml12Loader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_config_text(path: str | os.PathLike[str]) -> str:
    """The text of config file ``path``, which may be a pipe (``--config <(...)``, read once); ConfigError naming
    the file where it is missing, a folder or unreadable."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"config file {path} is a folder. Fix: name a YAML file, e.g. {path / 'config.yaml'}.")
    try:
        return path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist.") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"config file {path} cannot be read as text: {error}. Fix: name a YAML file.") from None


def read_yaml(path: str | os.PathLike[str], text: str | None = None) -> dict[str, Any]:
    """A YAML mapping from ``path`` (:func:`load_yaml`), or from ``text`` already read from it; ConfigError naming
    the file otherwise."""
    path = Path(path)
    text = read_config_text(path) if text is None else text
    try:
        content = load_yaml(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML: {error}") from error
    if content is None:
        return {}
    if not isinstance(content, dict):
        raise ConfigError(f"{path} must hold a mapping of sections ({', '.join((*SECTIONS, *TOP_LEVEL))}), "
                          f"not a {type(content).__name__}.")
    return content


# ----------------------------------------------------------------------------- parsing

# Top-level keys of the config besides the sections, with their types for the parser.
_TOP_LEVEL_TYPES: dict[str, tuple[Any, Any, str]] = {
    "seed": (int, 0, "seeds Python, numpy and torch and the loader's shuffling"),
    "recipe": (str, DEFAULT_RECIPE, f"the named recipe the options start from, one of {sorted(RECIPES)} "
                                    "(forecast.recipes); the defaults listed here are its"),
    "run_dir": (str | None, None, "the run folder (default runs/<run name>)"),
    "quantiles": (list[float] | None, None, "levels of predict's quantile columns"),
    "progress": (bool | None, None, "show Lightning's progress bar (default: in interactive use, a terminal or "
                                    "Jupyter, unless the CI environment variable is set)"),
}


def _annotations(function: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(function)
    except (NameError, TypeError):  # an annotation naming what is not importable: each taken as written
        return {}


def _int_before_float(annotation: Any) -> Any:
    """A union of int and float with int tried first, so ``3`` stays the integer 3 (three batches, not
    300% of them); ``typing`` may hand back such a union with float first."""
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return annotation
    members = typing.get_args(annotation)
    if int not in members or float not in members:
        return annotation
    return functools.reduce(operator.or_, [int, float, *(m for m in members if m not in (int, float))])


def _trainer_arguments() -> Iterator[tuple[str, Any, Any]]:
    """``(name, annotation, default)`` of every option of the trainer section: the TrainingConfig fields,
    then the ``lightning.Trainer`` arguments it passes on."""
    import lightning as L

    from forecast.training import TrainingConfig

    defaults, hints = TrainingConfig(), _annotations(TrainingConfig)
    training = [f.name for f in dataclasses.fields(TrainingConfig)
                if f.name not in ("seed", "extra_trainer_options", *_LOADER)]
    for name in training:
        yield name, _int_before_float(hints.get(name, Any)), getattr(defaults, name)
    hints = _annotations(L.Trainer.__init__)
    parameters = inspect.signature(L.Trainer.__init__).parameters
    for name in trainer_option_names():
        if name not in training:
            yield name, _int_before_float(hints.get(name, Any)), parameters[name].default


def config_parser(model: str = "informer", *, recipe: str = DEFAULT_RECIPE, prog: str = "forecast",
                  description: str | None = None, add_arguments: Callable[[Any], None] | None = None):
    """The typed command-line parser (``jsonargparse``) of a run config whose model is ``model``.

    It offers ``--config FILE.yaml`` (repeatable, later files win) and every option of every section
    with its type and default: ``--model.<field>`` of the model's config dataclass, ``--data.<field>``
    of :class:`~forecast.data.DataConfig` (and ``--data.dataset``), ``--trainer.<field>`` of
    :class:`~forecast.training.TrainingConfig` and every ``lightning.Trainer`` argument, and the
    top-level keys. The defaults are those a run of ``model`` under ``recipe`` gets (:func:`recipe_defaults`
    over the dataclasses' own); they are only shown (``--help``): :func:`parse_config` keeps the options
    given. Values are type-checked as they are parsed (``--model.d_model sixteen`` fails)
    and read as YAML 1.2 (``--data.target no`` is the string ``no``). ``add_arguments(parser)`` adds
    a command's own flags.
    """
    import lightning as L
    from jsonargparse import ActionConfigFile, ArgumentParser, set_loader

    from forecast.models import MODELS, model_config_class
    from forecast.training import TrainingConfig

    set_loader(_PARSER_MODE, load_yaml, exceptions=(yaml.YAMLError,))
    parser = ArgumentParser(prog=prog, description=description, exit_on_error=False, allow_abbrev=False,
                            parser_mode=_PARSER_MODE)
    parser.add_argument("--config", action=ActionConfigFile,
                        help="a YAML config (repeatable: later files override earlier ones)")
    parser.add_argument("--model.name", type=str, default="informer",
                        help=f"a registered model, one of {sorted(MODELS)}; --help lists the named model's options")
    config_class, fixed = model_config_class(model)
    if config_class is not None:
        parser.add_class_arguments(config_class, "model", skip=set(fixed))
    parser.add_argument("--data.dataset", type=str | None, default=None,
                        help=f"a registered dataset {list(registry.names())} or a CSV path")
    add_data_arguments(parser, "data")
    descriptions = _descriptions(TrainingConfig, L.Trainer.__init__)
    for name, annotation, default in _trainer_arguments():
        try:
            parser.add_argument(f"--trainer.{name}", type=annotation, default=default, help=descriptions.get(name))
        except (ValueError, TypeError):  # an annotation the parser cannot check: taken as written
            parser.add_argument(f"--trainer.{name}", type=Any, default=default, help=descriptions.get(name))
    for name, (annotation, default, help_text) in _TOP_LEVEL_TYPES.items():
        parser.add_argument(f"--{name}", type=annotation, default=default, help=help_text)
    _set_recipe_defaults(parser, model, recipe)
    if add_arguments is not None:
        add_arguments(parser)
    _readable_help(parser, "data")
    return parser


def _descriptions(*documented: Any) -> dict[str, str]:
    """Each option's description in the docstrings of ``documented`` (their attribute and argument sections), the
    first one found winning, on one line."""
    import docstring_parser

    found: dict[str, str] = {}
    for each in documented:
        for param in docstring_parser.parse(each.__doc__ or "").params:
            if param.description:
                found.setdefault(param.arg_name, " ".join(param.description.split()))
    return found


def _readable_help(parser: Any, nested_key: str | None) -> None:
    """``--help`` as a terminal shows it: docstring markup as plain text (:func:`terminal_text`), and no
    ``--data.<option>.help`` (jsonargparse's help of the subclasses of ``Hashable`` or of the split's date types,
    which says nothing of the option)."""
    import argparse

    from forecast.data import DataConfig

    prefix = f"{nested_key}." if nested_key else ""
    data_help = {f"{prefix}{field.name}.help" for field in dataclasses.fields(DataConfig)}
    for action in parser._actions:
        if type(action).__name__ == "_ActionHelpClassPath" and action.dest in data_help:
            action.help = argparse.SUPPRESS
        elif action.help and action.help is not argparse.SUPPRESS:
            action.help = terminal_text(action.help)
    for group in parser._action_groups:  # a section's title is its dataclass's summary line
        group.title = group.title and terminal_text(group.title)
        group.description = group.description and terminal_text(group.description)


def terminal_text(docstring: str) -> str:
    """``docstring`` as ``--help`` prints it: a Sphinx role as the name Sphinx shows (``:class:`~a.B``` as ``B``)
    and double backticks as single ones."""
    named = re.sub(r":\w+:`(~?)([^`]+)`",
                   lambda match: f"`{match.group(2).rpartition('.')[2] if match.group(1) else match.group(2)}`",
                   docstring)
    return named.replace("``", "`")


def recipe_defaults(model: str, recipe: str) -> dict[str, Any]:
    """What recipe ``recipe`` (:mod:`forecast.recipes`) sets for a run of ``model``, as dotted option names:
    ``model.<option>``, ``trainer.<setting>``, and ``data.<setting>`` for the loader's (``batch_size``)."""
    chosen = get_recipe(recipe)
    defaults = {f"model.{name}": value for name, value in chosen.options_for(model).items()}
    for name, value in chosen.training.items():
        defaults[f"{'data' if name in _LOADER else 'trainer'}.{name}"] = value
    return defaults


def _set_recipe_defaults(parser: Any, model: str, recipe: str) -> None:
    """The parser's defaults of the options recipe ``recipe`` sets for ``model``, each option's help naming
    the recipe and its own default; none for an unknown recipe (the config check names it)."""
    if recipe not in RECIPES:
        return
    actions = {action.dest: action for action in parser._actions}
    defaults = {name: value for name, value in recipe_defaults(model, recipe).items() if name in actions}
    for name, value in defaults.items():
        action = actions[name]
        note = f"recipe {recipe!r} sets it (the option's own default: {action.default!r})".replace("%", "%%")
        action.help = f"{action.help.rstrip('.')}; {note}" if action.help else note
    if defaults:
        parser.set_defaults(defaults)


def add_data_arguments(parser: Any, nested_key: str | None = "data", *, skip: Iterable[str] = ()) -> None:
    """The data options (the window, then the :class:`~forecast.data.DataConfig` fields but ``seed`` and
    ``test_split``) on a ``jsonargparse`` parser, as ``--<nested_key>.<field>`` (``--<field>`` without one),
    each with its type and default; the fields in ``skip`` left out. ``forecast fit`` and ``forecast splits``
    both take their data options from here."""
    from forecast.data import DataConfig

    skip = set(skip)
    prefix = f"{nested_key}." if nested_key else ""
    descriptions = _descriptions(DataConfig)
    for name in _WINDOW[:3]:
        if name not in skip:
            parser.add_argument(f"--{prefix}{name}", type=int, default=WINDOW_DEFAULTS[name],
                                help=descriptions[name])
    parser.add_class_arguments(DataConfig, nested_key, skip={"seed", "test_split", *_WINDOW[:3], *skip})
    _readable_help(parser, nested_key)


def snake_case_flag(token: str) -> str:
    """``--name-with-dashes[=value]`` as ``--name_with_dashes[=value]`` (the one flag style); other tokens
    as given."""
    if not token.startswith("--"):
        return token
    name, equals, value = token[2:].partition("=")
    return f"--{name.replace('-', '_')}{equals}{value}"


def _named_model_and_recipe(files: Sequence[tuple[Path, dict[str, Any]]], tokens: Sequence[str],
                            documents: Mapping[str, dict[str, Any]]) -> tuple[str, str]:
    """The model and the recipe the files (each with its parsed YAML) and then the tokens (``--config FILE``
    included, found in ``documents``) name last, default ``informer`` and :data:`~forecast.recipes.DEFAULT_RECIPE`:
    the parser offers that model's options, with the defaults that recipe gives them."""
    name, recipe = "informer", DEFAULT_RECIPE

    def from_file(path: str | os.PathLike[str], content: dict[str, Any]) -> None:
        nonlocal name, recipe
        if content.get("format") == "forecast.Forecaster":
            raise ConfigError(f"{path} is what a fitted run saved, not a run config. Fix: --run_dir "
                              f"{Path(path).parent} to validate, test or predict from that run; or --config "
                              "FILE.yaml, the config it was fitted with.")
        section = content.get("model")
        if isinstance(section, Mapping) and isinstance(section.get("name"), str):
            name = section["name"]
        if isinstance(content.get("recipe"), str):
            recipe = content["recipe"]

    for path, content in files:
        from_file(path, content)
    for index, token in enumerate(tokens):
        flag, equals, value = token.partition("=")
        if not equals:
            value = tokens[index + 1] if index + 1 < len(tokens) else ""
        if flag == "--config" and value:
            from_file(value, documents[value])
        elif flag == "--model.name" and value:
            name = value
        elif flag == "--recipe" and value:
            recipe = value
    return name, recipe


def _tokens(overrides: Iterable[tuple[str, Any]] | Sequence[str]) -> list[str]:
    """Overrides as command-line tokens: ``(dotted.key, value)`` pairs (a string value is taken as typed on
    a command line, anything else as JSON), or tokens, where ``key=value`` means ``--key=value``; option
    names may use ``-`` for ``_`` (``--trainer.max-epochs``). A token after a flag without its value is that
    value, ``=`` or not (``--run_dir runs/dataset=ETTh1_model=...``, a run folder's name)."""
    tokens: list[str] = []
    for item in overrides:
        if isinstance(item, tuple):
            name, value = item
            item = f"--{name}={value if isinstance(value, str) else json.dumps(value)}"
        elif not item.startswith("-") and "=" in item and not (tokens and tokens[-1].startswith("-")
                                                              and "=" not in tokens[-1]):
            item = f"--{item}"
        tokens.append(snake_case_flag(item))
    return tokens


def parse_config(paths: Sequence[str | os.PathLike[str]], overrides: Iterable[tuple[str, Any]] | Sequence[str] = (),
                 *, prog: str = "forecast fit", description: str | None = None,
                 add_arguments: Callable[[Any], None] | None = None, flag: str = "--{}"
                 ) -> tuple[RunConfig, dict[str, Any]]:
    """The validated :class:`RunConfig` of config files and overrides, and the values of the command's
    own flags (``add_arguments``) that were given. ``--help`` prints every option and exits. ``flag``: how the
    caller's command line sets option ``{}`` (``forecast sweep``'s ``--set {}=VALUE``), for the messages."""
    from jsonargparse import ArgumentError

    tokens: list[str] = []
    for token in _tokens(overrides):  # `--config FILE` as the one token `--config=FILE`
        if tokens and tokens[-1] == "--config":
            tokens[-1] = f"--config={token}"
        else:
            tokens.append(token)

    def named_file(token: str) -> str | None:  # the file of a `--config=FILE` token, as Path spells it
        return str(Path(token[len("--config="):])) if token.startswith("--config=") else None

    tokens = [f"--config={named_file(token)}" if named_file(token) else token for token in tokens]
    files = [*map(Path, paths), *(Path(named_file(token)) for token in tokens if named_file(token))]
    flags = [token for token in tokens if token.startswith("--") and not named_file(token)]
    source = ", ".join(map(str, files)) + (" and the command line" if files and flags else "") or "<command line>"
    # Each file read once, its text handed on: `--config <(...)` is a pipe, empty when read a second time.
    texts = {str(path): read_config_text(path) for path in files}
    documents = {str(path): read_yaml(path, texts[str(path)]) for path in files}  # each parsed once too
    # A file holding no YAML document (empty, or comments only) sets nothing: jsonargparse would refuse it.
    paths = [path for path in files[:len(paths)] if documents[str(path)]]
    tokens = [token for token in tokens if not named_file(token) or documents[named_file(token)]]
    model, recipe = _named_model_and_recipe([(path, documents[str(path)]) for path in paths], tokens, documents)
    for path in files:
        _require_section_mappings(documents[str(path)], str(path))
    _require_section_mappings(_section_flags(tokens), "<command line>", flag=True)
    try:
        parser = config_parser(model, recipe=recipe, prog=prog, description=description,
                               add_arguments=add_arguments)
    except ConfigError as error:
        raise ConfigError(f"{source}: model.name={model!r}: {error}") from None
    _refuse_base_60(parser, {str(path): documents[str(path)] for path in files}, tokens, flag)
    _refuse_foreign_classes({str(path): documents[str(path)] for path in files}, tokens, flag)
    arguments = [*(f"--config={texts[str(path)]}" for path in paths),
                 *(f"--config={texts[named_file(token)]}" if named_file(token) else token for token in tokens)]
    try:
        given = parser.parse_args(arguments, defaults=False).as_dict()
    except ArgumentError as error:
        message = " ".join(str(error).split())
        # The command's own spelling: `forecast fit --help` lists the options, not how another command sets them.
        fix = (f"see `{prog} --help` for every option and its type" if flag == "--{}" else
               f"{flag.format('section.key')} with an option and a value of its type, as `{prog} --help` lists them")
        listed = re.search(r'Parser key "([\w.]+)": Does not validate against any of the Union subtypes Subtypes: '
                           r'\[(?:list|tuple)\[.*Given value: (.*)$', message)
        if listed:  # a list option given one bare value: jsonargparse's Union report names no fix
            fix = f"give a list, as {flag.format(listed[1])} '[{listed[2]}]'"
        spread = _list_spread_over_tokens(parser, message, tokens)
        if spread:  # `--data.split 0.6 0.2 0.2`: the values after the first are left over
            fix = f"give a list as one value, {flag.format(spread[0])} '[{', '.join(spread[1])}]'"
        raise ConfigError(f"{source}: {message}.{valid_options_hint(parser, message, flag)} Fix: {fix}.") from None
    given = _plain(given)
    given.pop("config", None)
    for block in (given, *(given.get(section) for section in SECTIONS)):  # where a file was read (--data FILE)
        if isinstance(block, dict):
            block.pop("__path__", None)
    own = {name: given.pop(name) for name in list(given) if name not in (*SECTIONS, *TOP_LEVEL)}
    return RunConfig.from_mapping(given, source), own


# Digits in groups of two after colons, which YAML 1.1 reads as a number in base 60 (1:30 is 90).
_BASE_60 = re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")


def _flag_values(tokens: Sequence[str]) -> list[tuple[str, str | None, int]]:
    """Each ``--name value`` or ``--name=value`` of a command line: ``(name, value, where the tokens after its value
    start)``; the value is ``None`` for a last flag without one."""
    flags = []
    for index, token in enumerate(tokens):
        if token.startswith("--"):
            name, equals, value = token.removeprefix("--").partition("=")
            if equals:
                flags.append((name, value, index + 1))
            else:
                flags.append((name, tokens[index + 1] if index + 1 < len(tokens) else None, index + 2))
    return flags


def _typed_options(parser: Any, accepts: Callable[[set[Any]], bool]) -> set[str]:
    """The options of ``parser`` whose type (a Union's members, None left out) ``accepts``."""
    typed = set()
    for action in parser._actions:
        typehint = getattr(action, "_typehint", None)
        members = set(typing.get_args(typehint)) - {type(None)} if typing.get_origin(typehint) in (
            typing.Union, types.UnionType) else {typehint}
        if members and accepts(members):
            typed.add(action.dest)
    return typed


def _refuse_base_60(parser: Any, documents: Mapping[str, Any], tokens: Sequence[str], flag: str) -> None:
    """ConfigError for a number option given ``1:30``: jsonargparse converts such text to a number with YAML 1.1's
    rules (base 60: 90), where this package's reading keeps it as the text it is (:class:`_Yaml12Loader`)."""
    numeric = _typed_options(parser, lambda members: members <= {int, float})
    given = [(f"{path}: {section}.{key}", f"{section}.{key}", value) for path, document in documents.items()
             for section, block in document.items() if isinstance(block, dict) for key, value in block.items()]
    given += [(f"{path}: {key}", key, value) for path, document in documents.items()
              for key, value in document.items() if not isinstance(value, dict)]
    given += [(flag.format(name.replace("-", "_")), name.replace("-", "_"), value)
              for name, value, _ in _flag_values(tokens) if value is not None]
    for where, name, value in given:
        if name in numeric and isinstance(value, str) and _BASE_60.match(value.strip()):
            raise ConfigError(f"{where} is {value!r}, which YAML 1.1 would read as a number in base 60 "
                              f"({_yaml_11_number(value)}); the option takes a number. Fix: write the number itself.")


# The options a config may give as a class to build, and the modules those classes may come from: jsonargparse
# imports a class path's module as it parses it, so a config naming any other would run that module's code.
_CLASS_OPTIONS = ("trainer.logger", "trainer.profiler")
_CLASS_MODULES = ("lightning.pytorch.loggers.", "lightning.pytorch.profilers.")


def _refuse_foreign_classes(documents: Mapping[str, Any], tokens: Sequence[str], flag: str) -> None:
    """ConfigError for a class path a config would have jsonargparse import, before it parses anything: only
    Lightning's loggers and profilers (``trainer.logger``, ``trainer.profiler``), by their module path or the bare
    class name jsonargparse resolves among those already imported. A config is data and never imports other code
    (a module beside it, ``python -m forecast`` putting the folder on the import path)."""
    given: list[tuple[str, str, Any]] = [(path, "", document) for path, document in documents.items()]
    for name, value, _ in _flag_values(tokens):
        name = name.replace("-", "_")
        if value is None:
            continue
        if name in SECTIONS and Path(value).is_file():  # a section's own file: `--trainer trainer.yaml`
            given.append((value, name, read_yaml(value)))
            continue
        try:
            parsed = load_yaml(value)
        except yaml.YAMLError:
            parsed = value
        given.append((flag.format(name), name.removesuffix(".class_path"),
                      {"class_path": value} if name.endswith(".class_path") else parsed))
    for where, name, value in given:
        for option, path in _class_paths(name, value):
            allowed = option in _CLASS_OPTIONS and isinstance(path, str) and (
                path.startswith(_CLASS_MODULES) or "." not in path)
            if not allowed:
                raise ConfigError(
                    f"{where}: {option} names the class {path!r}: a config builds Lightning's loggers and profilers "
                    f"alone ({', '.join(module + '*' for module in _CLASS_MODULES)}, as trainer.logger and "
                    "trainer.profiler) and never imports other code. Fix: name one of those, or build the object in "
                    "Python and pass it: Forecaster(..., logger=...).")


def _class_paths(option: str, value: Any) -> Iterator[tuple[str, Any]]:
    """``(option, class path)`` of each class ``value`` (given as ``option``) would have jsonargparse build: a
    mapping's ``class_path`` anywhere in it, and a dotted name given as a logger or profiler."""
    if isinstance(value, dict):
        if "class_path" in value:
            yield option, value["class_path"]
        for key, item in value.items():
            if key != "class_path":
                yield from _class_paths(f"{option}.{key}".lstrip("."), item)
    elif isinstance(value, list):
        for item in value:
            yield from _class_paths(option, item)
    elif isinstance(value, str) and option in _CLASS_OPTIONS and "." in value:
        yield option, value


def _yaml_11_number(text: str) -> float:
    sign = -1 if text.strip().startswith("-") else 1
    number = 0.0
    for part in text.strip().lstrip("+-").replace("_", "").split(":"):
        number = number * 60 + float(part)
    return int(sign * number) if number.is_integer() else sign * number


def _list_spread_over_tokens(parser: Any, message: str, tokens: Sequence[str]) -> tuple[str, list[str]] | None:
    """``(option, its values)`` where ``message`` reports bare values left over after a list option given several,
    as a shell spells a list (``--data.split 0.6 0.2 0.2``)."""
    left = re.match(r"unrecognized arguments: (.*)$", message)
    if not left or any(word.startswith("--") for word in left[1].split()):
        return None
    leftover = left[1].split()
    listed = _typed_options(parser, lambda members: any(typing.get_origin(member) in (list, tuple, Sequence)
                                                        for member in members))
    for name, value, after in _flag_values(tokens):
        if name in listed and value is not None and list(tokens[after:after + len(leftover)]) == leftover:
            return name, [value, *leftover]
    return None


# The option a section's one word most likely meant (`data: ETTh1`, `model: informer`).
_SECTION_KEY = {"model": "name", "data": "dataset"}


def _section_flags(tokens: Sequence[str]) -> dict[str, str | None]:
    """The values a command line gives whole sections (``--data X``, ``--data=X``)."""
    return {name: value for name, value, _ in _flag_values(tokens) if name in SECTIONS}


def _inline_mapping(text: str) -> bool:
    """Whether ``text`` is a section written inline, ``{d_model: 24}`` (jsonargparse reads it as the section)."""
    if not text.lstrip().startswith("{"):
        return False
    try:
        return isinstance(yaml.safe_load(text), dict)
    except yaml.YAMLError:
        return False


def _require_section_mappings(sections: Mapping[str, Any], source: str, flag: bool = False) -> None:
    """ConfigError for a section given as a word (``data: good.csv``, ``--data good.csv``) rather than a mapping of
    options or the YAML file of one, which jsonargparse would try to read as that file ("Unable to load config")."""
    for section in SECTIONS:
        value = sections.get(section)
        # a section's own file (--data <(...) is a pipe), never the data's CSV
        if isinstance(value, str) and not (value.lower().endswith((".yaml", ".yml")) or _inline_mapping(value)
                                           or (Path(value).exists() and Path(value).suffix.lower() != ".csv")):
            option = _SECTION_KEY.get(section, "<option>")
            written = f"--{section}.{option} {value}" if flag else f"{section}: {{{option}: {value}}}"
            raise ConfigError(f"{source}: section {section!r} is {value!r}, not a mapping of options. Fix: write "
                              f"{written}, or name a YAML file holding the section.")


def valid_options_hint(parser: Any, message: str, flag: str = "--{}") -> str:
    """For unrecognized options: the valid options of their sections (and the closest names, as ``flag`` sets
    them on the command line)."""
    unknown = [*(re.findall(r"--([\w.]+)", message) if message.startswith("unrecognized arguments") else []),
               *(f"{group}.{option}" for group, option in
                 re.findall(r"Group '([\w.]+)' does not accept option '(\w+)'", message)),
               *re.findall(r"Option '([\w.]+)' is not accepted", message)]
    # A section's own flag (--model, which takes a whole section) is no option to suggest for a misspelt key, nor
    # jsonargparse's list-append form (--quantiles+).
    known = [option[2:] for action in parser._actions for option in action.option_strings
             if option.startswith("--") and not option.endswith("+")
             and option[2:] not in ("help", "config", "print_config", "print_shtab", *SECTIONS)]
    by_key: dict[str, list[str]] = {}
    for option in known:
        by_key.setdefault(option.rpartition(".")[2], []).append(option)
    hints = []
    for name in unknown:
        section, _, key = name.rpartition(".")
        valid = sorted(option.rpartition(".")[2] for option in known if option.rpartition(".")[0] == section)
        others = _models_with_option(key) if section == "model" else []
        if others:  # a config written for another model, its name overridden: no typo to offer
            hints.append(f" {key!r} is an option of {', '.join(others)}, not of this model: remove it (or "
                         "name that model).")
            close = None
        else:  # Keys are compared without their sections: a shared "model." made d_modle look close to model.name.
            close = closest_name(key, by_key)
        if close:
            options = by_key[close]
            suggestion = next((option for option in options if option.rpartition(".")[0] == section), options[0])
            hints.append(f" Did you mean {flag.format(suggestion)}?")
        if valid:
            hints.append(f" Valid {section or 'top-level'} options: {valid}.")
        else:
            hints.append(f" {section!r} is not a section: {list(SECTIONS)}, or top-level {list(TOP_LEVEL)}.")
    return "".join(dict.fromkeys(hints))


def _models_with_option(key: str) -> list[str]:
    from forecast.models import MODELS, model_options

    return sorted(name for name in MODELS if key in model_options(name))


def _plain(value: Any) -> Any:
    """Parsed values as YAML types: tuples (``model.stack``) become lists."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


# ------------------------------------------------------------------------------ config


def _require_mapping(value: Any, name: str, source: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{source}: section {name!r} must be a mapping of options, not {value!r}.")
    return dict(value)


def _check_keys(given: Iterable[str], valid: Sequence[str], section: str, source: str, hint: str = "") -> None:
    unknown = sorted(set(given) - set(valid))
    if unknown:
        close = "".join(did_you_mean(name, valid) for name in unknown)
        raise ConfigError(f"{source}: unknown {section} option(s) {unknown}.{close} Valid: {sorted(valid)}.{hint}")


def _model_section(mapping: Mapping[str, Any], source: str) -> tuple[str, dict[str, Any]]:
    from forecast.models import MODELS, model_options

    options = _require_mapping(mapping.get("model"), "model", source)
    name = options.pop("name", None)
    if not isinstance(name, str) or name not in MODELS:
        raise ConfigError(f"{source}: model.name={name!r}; Fix: name a registered model {sorted(MODELS)}."
                          f"{did_you_mean(name, MODELS)}")
    _check_keys(options, model_options(name), f"model {name!r}", source)
    collisions = sorted(set(options) & {*data_option_names(), *trainer_option_names(), *_LOADER, *TOP_LEVEL})
    if collisions:
        raise ConfigError(f"{source}: model {name!r} options {collisions} share names with data or trainer "
                          "options, so they could not be told apart.")
    return name, options


def _data_section(mapping: Mapping[str, Any], source: str) -> dict[str, Any]:
    data = _require_mapping(mapping.get("data"), "data", source)
    _check_keys(data, data_option_names(), "data", source, " (the seed is the top-level key 'seed'.)")
    dataset = data.get("dataset")
    if not isinstance(dataset, str) or not dataset:
        given = "is not given" if dataset is None else f"must name the data, got data.dataset={dataset!r}"
        raise ConfigError(f"{source}: data.dataset {given}. Fix: name a registered dataset {list(registry.names())} "
                          "or a CSV path (--data.dataset on the command line).")
    for key, default in WINDOW_DEFAULTS.items():
        data.setdefault(key, default)
    if "target" not in data:
        info = registry.find(dataset)
        data["target"] = info.target if info is not None else None
    return data


def _trainer_section(mapping: Mapping[str, Any], source: str) -> dict[str, Any]:
    trainer = _require_mapping(mapping.get("trainer"), "trainer", source)
    misplaced = sorted(set(trainer) & set(_LOADER))
    if misplaced:
        raise ConfigError(f"{source}: {misplaced} are loader options. Fix: put them in the data section "
                          f"(--data.{misplaced[0]}).")
    _check_keys(trainer, trainer_option_names(), "trainer", source)
    return trainer


def _top_level(mapping: Mapping[str, Any], source: str) -> dict[str, Any]:
    """``seed``, ``recipe``, ``run_dir``, ``quantiles`` and ``progress``, checked."""
    try:
        seed = require_int("seed", mapping.get("seed", 0), 0)
        progress = mapping.get("progress")
        if progress is not None:
            require_bool("progress", progress)
        recipe = get_recipe(mapping.get("recipe", DEFAULT_RECIPE)).name
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    run_dir = mapping.get("run_dir")
    if run_dir is not None and not isinstance(run_dir, str):
        raise ConfigError(f"{source}: run_dir={run_dir!r}; Fix: a directory path.")
    quantiles = mapping.get("quantiles")
    if quantiles is not None and not isinstance(quantiles, list):
        raise ConfigError(f"{source}: quantiles={quantiles!r}; Fix: a list of levels, e.g. [0.1, 0.5, 0.9].")
    return {"seed": seed, "recipe": recipe, "run_dir": run_dir,
            "quantiles": tuple(quantiles) if quantiles is not None else None, "progress": progress}


@dataclass(frozen=True)
class RunConfig:
    """A validated run configuration: model, model options, data, trainer options, seed and recipe.

    Build one with :meth:`from_mapping` (or :func:`load_config` for files and overrides).
    ``data`` always holds ``dataset`` and the window (defaults filled in: the registered
    target of a known dataset, else ``None``: every column for ``M``, the last numeric one
    for ``S``/``MS``); ``trainer`` holds TrainingConfig fields and
    ``lightning.Trainer`` arguments. ``model_options`` and ``trainer`` hold what the file
    says; the ``recipe`` (:mod:`forecast.recipes`) fills in the rest when a Forecaster
    or an Experiment is built.
    """

    model: str
    model_options: dict[str, Any]
    data: dict[str, Any]
    trainer: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    recipe: str = DEFAULT_RECIPE
    run_dir: str | None = None
    quantiles: tuple[float, ...] | None = None
    progress: bool | None = None
    source: str = "<config>"

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any], source: str = "<config>") -> RunConfig:
        """Check section and option names of a parsed config; ConfigError naming ``source`` and the fix."""
        if not isinstance(mapping, Mapping):
            raise ConfigError(f"{source}: a config is a mapping of sections, not {type(mapping).__name__}.")
        _check_keys(mapping, (*SECTIONS, *TOP_LEVEL), "top-level", source)
        model, options = _model_section(mapping, source)
        return cls(model, options, _data_section(mapping, source), _trainer_section(mapping, source),
                   source=source, **_top_level(mapping, source))

    # ------------------------------------------------------------------- views

    @property
    def dataset(self) -> str:
        return self.data["dataset"]

    def to_mapping(self) -> dict[str, Any]:
        """The config as plain YAML types (what ``--print_config`` shows)."""
        mapping: dict[str, Any] = {
            "model": {"name": self.model, **copy.deepcopy(self.model_options)},
            "data": copy.deepcopy(self.data),
            "trainer": copy.deepcopy(self.trainer),
            "seed": self.seed,
            "recipe": self.recipe,
        }
        if self.run_dir is not None:
            mapping["run_dir"] = self.run_dir
        if self.quantiles is not None:
            mapping["quantiles"] = list(self.quantiles)
        if self.progress is not None:
            mapping["progress"] = self.progress
        return mapping

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_mapping(), sort_keys=False)

    def with_seed(self, seed: int) -> RunConfig:
        return dataclasses.replace(self, seed=seed)

    def resolved_run_dir(self, root: str | os.PathLike[str] = DEFAULT_RUNS_DIR) -> Path:
        """``run_dir`` if set, else ``root/<run name>``: the folder ``forecast sweep`` trains this run in
        (:meth:`~forecast.experiment.Experiment.run_name`), so either resumes or predicts from the other's.

        The name covers the dataset, window, seed, recipe, model options and every training setting
        that changes what is learned: a changed option, or more epochs, trains in a fresh folder. A CSV file is
        named by its stem and a digest of its bytes (:func:`~forecast.experiment.dataset_label`), so another file
        of that name, or the file after an edit, names another folder.
        """
        # expanduser: a "~" in a YAML file, or in --run_dir=~/x, is not the shell's to expand, and Lightning
        # expands it in the checkpoints' folder: unexpanded, the run's files were split between two folders.
        if self.run_dir is not None:
            return Path(self.run_dir).expanduser()
        return Path(root).expanduser() / self.experiment().run_name()

    # ---------------------------------------------------------------- builders

    def forecaster_options(self) -> dict[str, Any]:
        """Keyword arguments of :class:`~forecast.Forecaster` (everything but the data and split)."""
        data = {k: v for k, v in self.data.items() if k not in ("dataset", "split")}
        options: dict[str, Any] = {**data, **self.trainer, **self.model_options, "seed": self.seed,
                                   "recipe": self.recipe, "progress": self.progress}
        if self.quantiles is not None:
            options["quantiles"] = self.quantiles
        return options

    def forecaster(self):
        """An unfitted :class:`~forecast.Forecaster` for this config (values checked here)."""
        from forecast.api import Forecaster
        from forecast.data.splits import resolve_split

        try:
            if self.split is not None:  # fit's split, not the Forecaster's: checked here so a config shown is one fit takes
                resolve_split(self.split)
            return Forecaster(self.model, **self.forecaster_options())
        except ConfigError as error:
            raise ConfigError(f"{self.source}: {error}") from error

    @property
    def split(self) -> Any:
        return self.data.get("split")

    def experiment(self):
        """The :class:`~forecast.experiment.Experiment` of this config (the sweep's unit of work)."""
        from forecast.experiment import Experiment
        from forecast.training import TrainingConfig

        training_fields = {f.name for f in dataclasses.fields(TrainingConfig)}
        training = {k: v for k, v in self.trainer.items() if k in training_fields}
        extra = {k: v for k, v in self.trainer.items() if k not in training_fields}
        loader = {k: self.data[k] for k in _LOADER if k in self.data}
        data_options = {k: v for k, v in self.data.items() if k not in ("dataset", *_WINDOW, *_LOADER)}
        try:
            return Experiment.from_recipe(
                self.recipe, self.model, self.model_options,
                {"seed": self.seed, "extra_trainer_options": extra, **loader, **training},
                dataset=self.dataset, data_options=data_options, quantiles=self.quantiles,
                **{k: self.data[k] for k in _WINDOW},
            )
        except (ConfigError, TypeError) as error:
            raise ConfigError(f"{self.source}: {error}") from error


def describe_config(config: RunConfig) -> str:
    """``--print_config``'s text: the config (:meth:`RunConfig.to_yaml`: the options given), then, as YAML
    comments, what else the run takes: the recipe's model options and training settings (each marked so),
    then the model's, :class:`~forecast.data.DataConfig`'s and :class:`~forecast.training.TrainingConfig`'s
    own defaults (the defaults ``--help`` lists); the other ``lightning.Trainer`` arguments keep Lightning's.

    Comments, not options: fed back, the text is the same config and names the same run. Written as
    options, a default would become one given: in the results key and run folder of the run (model and
    data options are keyed as given), and kept when another recipe is chosen.
    """
    from forecast.training import TrainingConfig

    defaults = _plain(config_parser(config.model, recipe=config.recipe).get_defaults().as_dict())
    from_recipe = recipe_defaults(config.model, config.recipe)
    given = config.to_mapping()
    training = {f.name for f in dataclasses.fields(TrainingConfig)}
    lines = []
    for section in SECTIONS:
        rest = {name: value for name, value in (defaults.get(section) or {}).items()
                if name not in given[section] and name != "name" and (section != "trainer" or name in training)}
        if rest:
            lines.append(f"# {section}:")
        for name, value in rest.items():
            mark = f"  # recipe {config.recipe}" if f"{section}.{name}" in from_recipe else ""
            lines.append(f"#   {name}: {_flow_yaml(value)}{mark}")
    if not lines:
        return config.to_yaml()
    return (f"{config.to_yaml()}# Not options of this config: what the run takes besides (recipe {config.recipe!r}, "
            "then the defaults).\n" + "\n".join(lines) + "\n")


def _flow_yaml(value: Any) -> str:
    """``value`` as one line of YAML (flow style); its text where YAML has no form for it."""
    try:
        text = yaml.safe_dump(value, default_flow_style=True, width=float("inf")).strip()
    except yaml.YAMLError:
        return str(value)
    return text.removesuffix("...").strip()


def load_config(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    overrides: Iterable[tuple[str, Any]] | Sequence[str] = (),
    *,
    flag: str = "--{}",
) -> RunConfig:
    """Read one or more YAML files (merged in order), apply overrides, validate (:func:`parse_config`).

    ``overrides`` are ``(dotted.key, value)`` pairs or command-line tokens
    (``["--trainer.max_epochs", "1"]``); ``flag``: how the caller's command line sets an option, for messages.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return parse_config(paths, overrides, flag=flag)[0]
