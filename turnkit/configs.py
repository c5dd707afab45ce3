"""One place for config dataclasses: value checks, loading from JSON/TOML, ``--set`` overrides, nesting.

Every settings class in turnkit (``TrainConfig``, ``GRPOConfig``, ``IQLearnConfig``, a critic's config, …) is a
frozen dataclass whose ``__post_init__`` calls the checks below, so every error reads the same way:
``<Class>.<field> must be <what>, got <value>``. A field whose type is itself a config dataclass is a nested
table: ``{"grpo": {"clip_eps": 0.3}}`` in a file, ``--set grpo.clip_eps=0.3`` on the command line.

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Inner:
    ...     rate: float = 0.1
    ...     def __post_init__(self):
    ...         check_float(self, "rate", low=0.0, open_low=True)
    >>> @dataclass(frozen=True)
    ... class Outer:
    ...     steps: int = 3
    ...     inner: Inner = Inner()
    ...     def __post_init__(self):
    ...         check_int(self, "steps")
    >>> cfg = apply_overrides(Outer(), ["steps=5", "inner.rate=0.5"])
    >>> cfg.steps, cfg.inner.rate, to_dict(cfg)
    (5, 0.5, {'steps': 5, 'inner': {'rate': 0.5}})
    >>> from_dict(Outer, {"inner": {"rat": 1}})
    Traceback (most recent call last):
    ...
    turnkit.errors.ConfigError: Outer.inner: unknown Inner key 'rat' (did you mean 'rate'?)
    >>> apply_overrides(Outer(), ["inner.rate=-1"])
    Traceback (most recent call last):
    ...
    turnkit.errors.ConfigError: --set: Outer.inner: Inner.rate must be a finite number > 0, got -1
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import typing
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from turnkit.errors import ConfigError


def _owner(cfg: object) -> str:
    return type(cfg).__name__


def check_int(cfg: object, *names: str, low: int = 1, optional: bool = False) -> None:
    """Each named field is an int ``>= low`` (``None`` too when ``optional``).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> check_int(NS(n=0), "n")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: SimpleNamespace.n must be an int >= 1, got 0
    """
    for name in names:
        value = getattr(cfg, name)
        if optional and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            what = f"null or an int >= {low}" if optional else f"an int >= {low}"
            raise ConfigError(f"{_owner(cfg)}.{name} must be {what}, got {value!r}")


def check_float(
    cfg: object,
    *names: str,
    low: float = -math.inf,
    high: float = math.inf,
    open_low: bool = False,
    open_high: bool = False,
    optional: bool = False,
) -> None:
    """Each named field is a finite number within the bounds (``None`` too when ``optional``).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> check_float(NS(p=1.5), "p", low=0.0, high=1.0)
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: SimpleNamespace.p must be a finite number >= 0 and <= 1, got 1.5
    """
    for name in names:
        value = getattr(cfg, name)
        if optional and value is None:
            continue
        ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
        if ok:
            ok = (value > low if open_low else value >= low) and (value < high if open_high else value <= high)
        if not ok:
            bounds = []
            if low != -math.inf:
                bounds.append(f"> {low:g}" if open_low else f">= {low:g}")
            if high != math.inf:
                bounds.append(f"< {high:g}" if open_high else f"<= {high:g}")
            what = "a finite number" + (" " + " and ".join(bounds) if bounds else "")
            raise ConfigError(f"{_owner(cfg)}.{name} must be {'null or ' if optional else ''}{what}, got {value!r}")


def check_str(cfg: object, *names: str, empty: bool = False, optional: bool = False) -> None:
    """Each named field is a string (non-empty unless ``empty``; ``None`` too when ``optional``).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> check_str(NS(path=""), "path")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: SimpleNamespace.path must be a non-empty string, got ''
    """
    for name in names:
        value = getattr(cfg, name)
        if optional and value is None:
            continue
        if not isinstance(value, str) or (not empty and not value):
            what = "a string" if empty else "a non-empty string"
            raise ConfigError(f"{_owner(cfg)}.{name} must be {'null or ' if optional else ''}{what}, got {value!r}")


def check_bool(cfg: object, *names: str) -> None:
    """Each named field is ``True`` or ``False`` (not ``1``, not ``"yes"``).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> check_bool(NS(flag=1), "flag")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: SimpleNamespace.flag must be true or false, got 1
    """
    for name in names:
        value = getattr(cfg, name)
        if not isinstance(value, bool):
            raise ConfigError(f"{_owner(cfg)}.{name} must be true or false, got {value!r}")


def check_choice(cfg: object, name: str, choices: Iterable[Any]) -> None:
    """The named field is one of ``choices``.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> check_choice(NS(mode="fast"), "mode", ("turns", "episodes"))
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: SimpleNamespace.mode must be one of ['turns', 'episodes'], got 'fast'
    """
    value, options = getattr(cfg, name), list(choices)
    if isinstance(value, bool) or value not in options:
        raise ConfigError(f"{_owner(cfg)}.{name} must be one of {options}, got {value!r}")


def suggest(key: str, names: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``names``, or ``""``.

    Example:
        >>> suggest("stepz", ["steps", "seed"])
        " (did you mean 'steps'?)"
    """
    close = difflib.get_close_matches(key, sorted(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _nested_types(cls: Any) -> dict[str, Any]:
    """Fields of ``cls`` whose declared type (or default) is itself a dataclass: the nested tables."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # annotations that do not resolve here: fall back on the defaults
        hints = {}
    nested = {}
    for f in dataclasses.fields(cls):
        kind = hints.get(f.name)
        if not dataclasses.is_dataclass(kind):
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            kind = type(default) if dataclasses.is_dataclass(default) else None
        if kind is not None:
            nested[f.name] = kind
    return nested


def _default_table(cls: Any, name: str) -> dict[str, Any]:
    """The default of field ``name`` of ``cls`` as a table (``{}`` when it has no dataclass default)."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    if not dataclasses.is_dataclass(default) or isinstance(default, type):
        return {}
    return {k.name: getattr(default, k.name) for k in dataclasses.fields(default)}


def from_dict(cls: Any, data: Mapping[str, Any], *, source: str = "config", aliases: Mapping[str, str] = {}) -> Any:
    """``cls(**data)`` for a config dataclass, nested tables built from dicts; unknown keys name ``source``.

    Args:
        cls: The config dataclass.
        data: Its keys (a nested table may be a dict or already an instance).
        source: Where the data came from (a file, ``--set``), for the error message.
        aliases: Other spellings of field names (``{"async": "async_rollout"}``); a class's own
            ``KEY_ALIASES`` class attribute adds to them (a nested table's too).

    A class's ``FLAT_KEYS`` (``{old: (table, key)}``: keys written flat before the class had that table) move
    into their tables with one ``FutureWarning`` (:func:`move_flat_keys`); a key written outside its table
    names the table it belongs in.

    Raises:
        ConfigError: An unknown key (with the closest name), or an invalid value (from the class's checks).
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: {cls.__name__} must be a table of keys, got {data!r}")
    if getattr(cls, "FLAT_KEYS", None):
        data = move_flat_keys(data, cls.FLAT_KEYS, source=source)
    names = {f.name for f in dataclasses.fields(cls)}
    aliases = {**getattr(cls, "KEY_ALIASES", {}), **aliases}
    nested = _nested_types(cls)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        key = aliases.get(key, key) if aliases.get(key) in names else key
        if key not in names:
            hint = _placement(cls, nested, key)
            hint = f" (did you mean {hint!r}?)" if hint else suggest(key, names)
            raise ConfigError(f"{source}: unknown {cls.__name__} key {key!r}{hint}")
        if key in nested and isinstance(value, Mapping):
            for inner in value:
                if (where := _placement(cls, nested, inner, outside=key)) is not None:
                    kind = nested[key].__name__
                    hint = f"did you mean {cls.__name__}'s {where!r}?"  # relative to the outer table, not to ``key``
                    message = f"{cls.__name__}.{key}: unknown {kind} key {inner!r} ({hint})"
                    raise ConfigError(message if source == "config" else f"{source}: {message}")
            value = {**_default_table(cls, key), **value}  # a partial table keeps the field's own defaults
            try:
                value = from_dict(nested[key], value, source=f"{cls.__name__}.{key}")
            except ConfigError as exc:
                message = str(exc)
                if not message.startswith(f"{cls.__name__}.{key}"):
                    message = f"{cls.__name__}.{key}: {message}"
                raise ConfigError(message if source == "config" else f"{source}: {message}") from exc
        kwargs[key] = value
    return cls(**kwargs)


def _placement(cls: Any, nested: Mapping[str, Any], key: str, *, outside: str | None = None) -> str | None:
    """Where ``key`` belongs when written outside its table (``None``: it fits there, or has no single home).

    A flat key the class moved (``FLAT_KEYS``) or a key of exactly one nested table other than ``outside``.
    """
    if outside is not None:
        inner = nested[outside]
        known = {f.name for f in dataclasses.fields(inner)}
        if key in known | set(getattr(inner, "KEY_ALIASES", {})) | set(getattr(inner, "FLAT_KEYS", {})):
            return None
    moved = getattr(cls, "FLAT_KEYS", {})
    if key in moved:
        return ".".join(moved[key])
    homes = [
        name for name, kind in nested.items() if name != outside and key in {f.name for f in dataclasses.fields(kind)}
    ]
    return f"{homes[0]}.{key}" if len(homes) == 1 else None


def flat_dict(cfg: Any) -> dict[str, Any]:
    """A config as :func:`dataclasses.asdict` wrote it before its tables: the shape that cache keys hash.

    A class with ``FLAT_ORDER`` (its old field names in their old order) and ``FLAT_KEYS`` (``{old: (table,
    key)}``) is written flat again: the same keys and values as before the tables, so hashes of it do not
    change. A table key that the old fields lacked is added, dotted (``"optim.eps"``), only when it differs from
    the class's default table (then the key must differ: the trained bits do). Other dataclasses inside are
    written as :func:`~dataclasses.asdict` does.

    Example:
        >>> from dataclasses import dataclass, field
        >>> @dataclass(frozen=True)
        ... class Inner:
        ...     lr: float = 0.1
        ...     eps: float = 1e-8
        >>> @dataclass(frozen=True)
        ... class Outer:
        ...     FLAT_KEYS: typing.ClassVar[dict] = {"lr": ("inner", "lr")}
        ...     FLAT_ORDER: typing.ClassVar[tuple] = ("steps", "lr")
        ...     steps: int = 3
        ...     inner: Inner = field(default_factory=Inner)
        >>> flat_dict(Outer()), flat_dict(Outer(inner=Inner(lr=0.5, eps=0.1)))
        ({'steps': 3, 'lr': 0.1}, {'steps': 3, 'lr': 0.5, 'inner.eps': 0.1})
    """
    kind = type(cfg)
    data = {f.name: _flat_value(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)}
    order, moves = getattr(kind, "FLAT_ORDER", None), getattr(kind, "FLAT_KEYS", {})
    if order is None:
        return data
    flat = {name: data[moves[name][0]][moves[name][1]] if name in moves else data[name] for name in order}
    old = set(moves.values())
    for table in dict.fromkeys(t for t, _ in moves.values()):
        default = _default_table(kind, table)
        for key, value in data[table].items():
            if (table, key) not in old and value != _flat_value(default[key]):
                flat[f"{table}.{key}"] = value
    return flat


def _flat_value(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return flat_dict(value)
    if isinstance(value, dict):
        return {k: _flat_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_flat_value(v) for v in value)
    return value


def upgrade_tables(cls: Any, saved: Mapping[str, Any]) -> dict[str, Any]:
    """A saved config of ``cls`` (a checkpoint's, a run folder's) in the current shape, to compare with a live one.

    ``cls.FLAT_KEYS`` move into their tables quietly (a comparison, not the user's spelling) and those tables
    are written out in full with the class's defaults.

    Example:
        >>> from dataclasses import dataclass, field
        >>> @dataclass(frozen=True)
        ... class Inner:
        ...     lr: float = 0.1
        ...     eps: float = 1e-8
        >>> @dataclass(frozen=True)
        ... class Outer:
        ...     FLAT_KEYS: typing.ClassVar[dict] = {"lr": ("inner", "lr")}
        ...     steps: int = 3
        ...     inner: Inner = field(default_factory=lambda: Inner(eps=1e-6))
        >>> upgrade_tables(Outer, {"steps": 2, "lr": 0.5})
        {'steps': 2, 'inner': {'lr': 0.5, 'eps': 1e-06}}
    """
    moves = getattr(cls, "FLAT_KEYS", {})
    data = move_flat_keys(saved, moves, warn=False)
    nested = _nested_types(cls)
    for name in dict.fromkeys(t for t, _ in moves.values()):
        if isinstance(data.get(name), Mapping):
            table = {**_default_table(cls, name), **data[name]}
            data[name] = to_dict(from_dict(nested[name], table, source=f"{cls.__name__}.{name}"))
    return data


def to_dict(cfg: Any) -> dict[str, Any]:
    """A config as JSON-ready data (nested tables as dicts, tuples as lists)."""
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def parse_value(raw: str) -> Any:
    """A ``--set`` value: JSON if it parses, else the raw string.

    Example:
        >>> parse_value("3"), parse_value("true"), parse_value("runs/x"), parse_value('["a", "b"]')
        (3, True, 'runs/x', ['a', 'b'])
    """
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def apply_overrides(cfg: Any, overrides: Sequence[str], *, aliases: Mapping[str, str] = {}) -> Any:
    """Apply ``KEY=VALUE`` overrides and re-validate; ``a.b.c=v`` sets a key inside nested tables or dicts.

    A string field takes the text as it is (``out_dir=123`` is a folder name); other values are parsed by
    :func:`parse_value`. ``cfg``'s class may define ``from_dict(data, source=...)`` (used when present, so
    it can migrate old keys); otherwise :func:`from_dict` builds it.

    Raises:
        ConfigError: A malformed override, an unknown key, or an invalid resulting value.
    """
    data = to_dict(cfg)
    kind = type(cfg).__name__
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        path = key.split(".")
        path[0] = aliases.get(path[0], path[0]) if aliases.get(path[0]) in data else path[0]
        if len(path) > 1 and path[0] in data and not isinstance(data[path[0]], dict):
            data = _normalized(cfg, data)  # a shorthand (``critic=mrt``) becomes its table before a key is set in it
        table, owner = data, kind
        for part in path[:-1]:
            if part not in table:
                table[part] = {}  # a new key of a table (an unknown top-level key: from_dict names it)
            if not isinstance(table[part], dict):
                raise ConfigError(f"--set {item!r}: {owner}.{part} is not a table")
            table, owner = table[part], f"{owner}.{part}"
        leaf = path[-1]
        table[leaf] = raw if isinstance(table.get(leaf), str) else parse_value(raw)
    build = getattr(type(cfg), "from_dict", None)
    try:
        return build(data, source="--set") if callable(build) else from_dict(type(cfg), data, source="--set")
    except ConfigError as exc:
        if str(exc).startswith("--set"):
            raise
        raise ConfigError(f"--set: {exc}") from exc


def _normalized(cfg: Any, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` as its config class writes it back (shorthands expanded), or unchanged if it does not build yet."""
    build = getattr(type(cfg), "from_dict", None)
    try:
        built = build(data, source="--set") if callable(build) else from_dict(type(cfg), data, source="--set")
    except ConfigError:
        return data
    return to_dict(built)


def load_config(path: str | Path, cls: Any) -> Any:
    """Read a config of class ``cls`` from a ``.json`` or ``.toml`` file.

    ``cls.from_dict(data, source=...)`` is used when the class has one, else :func:`from_dict`.

    Raises:
        ConfigError: Missing file, unknown suffix, malformed content or invalid values (naming the file).
    """
    path = Path(path)
    data = read_config_file(path, cls.__name__)
    build = getattr(cls, "from_dict", None)
    try:
        return build(data, source=str(path)) if callable(build) else from_dict(cls, data, source=str(path))
    except ConfigError as exc:
        if str(exc).startswith(str(path)):
            raise
        raise ConfigError(f"{path}: {exc}") from exc


def read_config_file(path: str | Path, kind: str = "config") -> dict[str, Any]:
    """The table of a ``.json`` or ``.toml`` config file, as written (not validated; ``kind`` names the class).

    Raises:
        ConfigError: Missing file, unknown suffix, malformed content or a top level that is not a table.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        elif path.suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            raise ConfigError(f"config file {path} must end in .json or .toml")
    except (json.JSONDecodeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{path}: cannot parse ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a table/object of {kind} keys")
    return data


def table_field(cfg: object, name: str, default: Any) -> None:
    """In ``__post_init__``: build table field ``name`` of ``default``'s class when it was given as a mapping.

    Keys the mapping lacks keep ``default``'s values; anything but a mapping or that class is a
    :class:`ConfigError` naming the field.

    Example:
        >>> from dataclasses import dataclass, field
        >>> @dataclass(frozen=True)
        ... class Inner:
        ...     a: int = 1
        ...     b: int = 2
        >>> @dataclass(frozen=True)
        ... class Outer:
        ...     inner: Inner = field(default_factory=Inner)
        ...     def __post_init__(self):
        ...         table_field(self, "inner", Inner(b=5))
        >>> Outer(inner={"a": 3}).inner
        Inner(a=3, b=5)
    """
    value, kind, owner = getattr(cfg, name), type(default), _owner(cfg)
    if isinstance(value, Mapping):
        table = {**to_dict(default), **value}  # a partial table keeps the owner's defaults
        try:
            value = from_dict(kind, table, source=f"{owner}.{name}")
        except ConfigError as exc:
            text = str(exc) if str(exc).startswith(owner) else f"{owner}.{name}: {exc}"
            raise ConfigError(text) from exc
        object.__setattr__(cfg, name, value)
    elif not isinstance(value, kind):
        raise ConfigError(f"{owner}.{name} must be a table of {kind.__name__} keys, got {value!r}")


def move_flat_keys(
    data: Mapping[str, Any], moves: Mapping[str, tuple[str, str]], *, source: str = "config", warn: bool = True
) -> dict[str, Any]:
    """Move an old config's flat keys into tables (``moves``: ``{old: (table, key)}``).

    One ``FutureWarning`` names every new key (none when ``warn`` is false: a saved config compared on resume).

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as seen:
        ...     warnings.simplefilter("always")
        ...     move_flat_keys({"lr": 0.1, "lora_r": 4, "steps": 3}, {"lr": ("optim", "lr"), "lora_r": ("lora", "r")})
        {'steps': 3, 'optim': {'lr': 0.1}, 'lora': {'r': 4}}
        >>> [str(w.message) for w in seen]
        ['config: flat keys moved into tables (write them this way): lr -> optim.lr, lora_r -> lora.r']
    """
    old = [k for k in data if k in moves]
    new = {k: v for k, v in data.items() if k not in moves}
    for key in old:
        table, option = moves[key]
        if not isinstance(new.get(table, {}), Mapping):
            raise ConfigError(f"{source}: {table} must be a table, got {new[table]!r}")
        new[table] = {**new.get(table, {}), option: data[key]}
    if old and warn:
        moved = ", ".join(f"{k} -> {'.'.join(moves[k])}" for k in old)
        warnings.warn(
            f"{source}: flat keys moved into tables (write them this way): {moved}", FutureWarning, stacklevel=3
        )
    return new


__all__ = [
    "apply_overrides",
    "check_bool",
    "check_choice",
    "check_float",
    "check_int",
    "check_str",
    "flat_dict",
    "from_dict",
    "load_config",
    "move_flat_keys",
    "parse_value",
    "read_config_file",
    "suggest",
    "table_field",
    "to_dict",
    "upgrade_tables",
]
