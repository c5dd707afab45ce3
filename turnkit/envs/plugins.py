"""Env plugins: installed packages register their envs through the ``turnkit.envs`` entry-point group.

A package makes its envs available to every ``turnkit`` command by declaring, in its ``pyproject.toml``::

    [project.entry-points."turnkit.envs"]
    my_pkg = "my_pkg.envs"              # a module: imported for its gymnasium.register(...) calls
    # or
    my_pkg = "my_pkg.envs:register"     # a function: called once, with no arguments

Prefer the module form: the same module then also works with ``turnkit --import my_pkg.envs`` and with
Gymnasium's own ``gymnasium.make("my_pkg.envs:MyEnv-v0")`` form. The entry point's name is only a label.

**When plugins load.** The ``turnkit`` command calls :func:`load_plugins` once, after parsing its arguments
and before running the sub-command, so ``turnkit list | play | eval | train | synth`` all see plugin envs.
``import turnkit`` does *not* load them, for three reasons: (1) cost: reading the metadata of every
installed distribution costs another ~18% of a fresh ``import turnkit`` (BENCHMARKS.md, "Start-up and
checksum costs"), and every rollout worker and the checker's fresh process
would pay it again; (2) a plugin usually imports ``turnkit`` itself, so loading it from
``turnkit/__init__.py`` would run third-party code against a half-initialised package; (3) Gymnasium made
the same call: 0.26 loaded its ``gymnasium.envs`` entry points on ``import gymnasium``, 1.0 dropped that for
explicit imports and the ``module:env-id`` form. Library code that wants the CLI's set of envs calls
:func:`load_plugins` (free after the first call). Subprocesses need nothing as long as envs are registered
with a ``"module:Class"`` string: an env rebuilt from ``env.spec`` imports its entry point itself.

**A broken plugin never breaks turnkit.** An entry point that fails to import, to resolve or to run is
skipped as a whole (envs it registered before failing are unregistered again) with a
:class:`PluginWarning` naming the distribution, the entry point and the error; the other plugins and the
built-in envs load as usual.

Example:
    >>> plugins = load_plugins()  # the entry points installed here (none, or some); loaded once per process
    >>> load_plugins() is plugins
    True
    >>> import_env_module("turnkit.envs.registration")  # built-in ids were registered already: nothing new
    ()
"""

from __future__ import annotations

import importlib
import importlib.metadata
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium

from turnkit.errors import ConfigError

ENTRY_POINT_GROUP = "turnkit.envs"
"""The entry-point group that installed packages declare their env modules or registration functions in."""


class PluginWarning(UserWarning):
    """An env plugin failed to load; turnkit skipped it and went on."""


@dataclass(frozen=True)
class Plugin:
    """One entry point of the ``turnkit.envs`` group, and what loading it did.

    Attributes:
        distribution: The installed distribution declaring it, with its version (``"my-pkg 1.0"``).
        name: The entry point's name.
        value: What it points to: a module (``"my_pkg.envs"``) or a function (``"my_pkg.envs:register"``).
        env_ids: The env ids it registered (or re-registered); empty when it failed.
        error: ``None``, or why it failed: the exception and where it was raised.
    """

    distribution: str
    name: str
    value: str
    env_ids: tuple[str, ...] = ()
    error: str | None = None

    def describe(self) -> str:
        """Name the entry point the way a user finds it in a ``pyproject.toml``.

        Example:
            >>> Plugin("my-pkg 1.0", "my_pkg", "my_pkg.envs:register").describe()
            "entry point 'my_pkg = my_pkg.envs:register' (group turnkit.envs) of distribution 'my-pkg 1.0'"
        """
        where = f"(group {ENTRY_POINT_GROUP}) of distribution '{self.distribution}'"
        return f"entry point '{self.name} = {self.value}' {where}"


_loaded: dict[str, tuple[Plugin, ...]] = {}
_imported: dict[str, tuple[str, ...]] = {}


def load_plugins(*, group: str = ENTRY_POINT_GROUP, warn: bool = True) -> tuple[Plugin, ...]:
    """Load every installed entry point of ``group`` once per process; later calls return the same result.

    Args:
        group: The entry-point group (tests use their own).
        warn: Issue a :class:`PluginWarning` for each plugin that fails (the ``turnkit`` command prints them
            itself instead).

    Returns:
        One :class:`Plugin` per entry point, in the order loaded (sorted by distribution and entry point name),
        with the env ids it registered or the error that made turnkit skip it.

    Example:
        >>> load_plugins(group="turnkit.no-such-group")
        ()
    """
    if group in _loaded:
        return _loaded[group]
    entry_points = sorted(
        importlib.metadata.entry_points(group=group),
        key=lambda ep: (_distribution(ep), ep.name),
    )
    plugins = tuple(_load(ep) for ep in entry_points)
    _loaded[group] = plugins
    if warn:
        for plugin in plugins:
            if plugin.error is not None:
                warnings.warn(plugin_failure(plugin), PluginWarning, stacklevel=2)
    return plugins


def plugin_failure(plugin: Plugin) -> str:
    """The message for a plugin that failed to load.

    Example:
        >>> print(plugin_failure(Plugin("p 1.0", "p", "p.envs", error="OSError: x")))
        skipped env plugin: entry point 'p = p.envs' (group turnkit.envs) of distribution 'p 1.0' failed: OSError: x
    """
    return f"skipped env plugin: {plugin.describe()} failed: {plugin.error}"


def import_env_module(name: str) -> tuple[str, ...]:
    """Import module ``name`` for its ``gymnasium.register`` calls (``turnkit --import NAME``).

    Importing a module twice runs it once, as usual in Python; the env ids are remembered from the first time.

    Args:
        name: A dotted module name importable from ``sys.path``.

    Returns:
        The env ids the import registered (or re-registered).

    Raises:
        ConfigError: The import failed; the message names the module and the error.

    Example:
        >>> import_env_module("nope")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: cannot import env module 'nope': ModuleNotFoundError: No module named 'nope'
    """
    if name in _imported:
        return _imported[name]
    try:
        env_ids = _registering(lambda: importlib.import_module(name))
    except Exception as exc:
        raise ConfigError(f"cannot import env module {name!r}: {_error(exc)}") from exc
    _imported[name] = env_ids
    return env_ids


def env_origins() -> dict[str, str]:
    """Where each env id that plugins or :func:`import_env_module` registered came from.

    Returns:
        Env id -> the distribution name (for a plugin) or the module name (for an imported module), for ids
        still in the registry. A later registration of the same id wins.

    Example:
        >>> "turnkit/MathEpisodes-v0" in env_origins()  # built-in envs come from turnkit itself
        False
    """
    origins: dict[str, str] = {}
    for plugins in _loaded.values():
        for plugin in plugins:
            origins.update(dict.fromkeys(plugin.env_ids, plugin.distribution.split(" ")[0]))
    for module, env_ids in _imported.items():
        origins.update(dict.fromkeys(env_ids, module))
    return {env_id: origin for env_id, origin in origins.items() if env_id in gymnasium.registry}


def _distribution(ep: importlib.metadata.EntryPoint) -> str:
    dist = ep.dist
    return f"{dist.name} {dist.version}" if dist is not None else "(unknown distribution)"


def _load(ep: importlib.metadata.EntryPoint) -> Plugin:
    def run() -> None:
        target = ep.load()
        if isinstance(target, ModuleType):
            return  # importing it registered its envs
        if not callable(target):
            raise TypeError(f"{ep.value} is a {type(target).__name__}, not a module or a function")
        target()

    plugin = Plugin(_distribution(ep), ep.name, ep.value)
    try:
        return replace(plugin, env_ids=_registering(run))
    except Exception as exc:
        return replace(plugin, error=_error(exc))


def _registering(action: Callable[[], Any]) -> tuple[str, ...]:
    """Run ``action``; return the env ids it registered, or undo its registrations if it raises."""
    registry = gymnasium.registry
    before = dict(registry)
    try:
        action()
    except Exception:
        for env_id in [i for i, spec in registry.items() if before.get(i) is not spec]:
            if env_id in before:
                registry[env_id] = before[env_id]
            else:
                del registry[env_id]
        raise
    return tuple(i for i, spec in registry.items() if before.get(i) is not spec)


def _error(exc: BaseException) -> str:
    """``Type: message``, plus the innermost frame in the plugin's code (not importlib's, not this module's)."""
    this_file, importlib_dir = Path(__file__).resolve(), Path(importlib.__file__).resolve().parent
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<")  # frozen importlib
        and Path(frame.filename).resolve() != this_file
        and not Path(frame.filename).resolve().is_relative_to(importlib_dir)
    ]
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"
