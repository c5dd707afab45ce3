"""Critics are found by importing their modules: built-ins, modules next to them, and installed entry points.

Every critic module here is a real file: a folder added to :mod:`turnkit.critics`' package path (what a second
install location of the package does), or an installed distribution written by hand on ``sys.path`` (what pip
leaves), so the registry meets them the way it meets a user's.
"""

from __future__ import annotations

import ast
import importlib
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

import turnkit.critics
from turnkit.critics import registry
from turnkit.critics.base import CriticContext
from turnkit.critics.registry import build_critics, built_in_critics, check_table, critic_module, installed_critics
from turnkit.errors import ConfigError
from turnkit.types import AgentTurn, Step, Trajectory

REPO = Path(__file__).resolve().parents[2]
CONTEXT = CriticContext(policy=None, start_policy=lambda: None, make_env=lambda: None)  # type: ignore[arg-type]

BONUS = """
from dataclasses import dataclass

from turnkit.critics.base import CriticResult


@dataclass(frozen=True)
class Config:
    bonus: float = 1.0


class Bonus:
    def __init__(self, bonus):
        self.bonus = bonus

    def score(self, trajectory):
        return CriticResult(tuple(self.bonus for _ in trajectory.steps))


def from_context(ctx, config):
    return Bonus(config.bonus)
"""

DECORATED = """
import functools

from tk_test_bonus_impl import Config, from_context as _build


def logged(build):
    @functools.wraps(build)
    def wrapper(ctx, config):
        return build(ctx, config)
    return wrapper


from_context = logged(_build)
"""

EPISODE = Trajectory("d", 0, (Step("q", AgentTurn("a"), 0.0), Step("q", AgentTurn("b"), 1.0, terminated=True)))


@pytest.fixture
def critic_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder on ``sys.path`` whose modules are also critics of :mod:`turnkit.critics` (its package path)."""
    (tmp_path / "tk_test_bonus_impl.py").write_text(BONUS)
    monkeypatch.syspath_prepend(str(tmp_path))
    folder = tmp_path / "critics"
    folder.mkdir()
    monkeypatch.setattr(turnkit.critics, "__path__", [*turnkit.critics.__path__, str(folder)])
    yield folder
    for name in [m for m in sys.modules if m.startswith(("turnkit.critics.tk_", "tk_test_"))]:
        del sys.modules[name]


def rewards(name: str, options: dict) -> list[tuple[float, ...]]:
    critics = build_critics({name: {"weight": 1.0, **options}}, CONTEXT)
    assert critics is not None
    return critics.rewards([EPISODE])[0]


def test_every_listed_built_in_is_a_critic_module() -> None:
    names = built_in_critics()
    assert {"afd", "iqlearn", "judge", "length", "mrt", "oracle", "pav", "prime", "sweet"} <= set(names)
    for name in names:
        module = critic_module(name)
        assert module.__name__ == f"turnkit.critics.{name}" and callable(module.from_context)
    for helper in registry._HELPERS:
        with pytest.raises(ConfigError, match=rf"'{helper}' is not a critic \(turnkit\.critics\.{helper} is code"):
            check_table({helper: 1.0})


def test_a_module_without_config_and_from_context_says_so(critic_folder: Path) -> None:
    (critic_folder / "tk_plain.py").write_text("VALUE = 1\n")
    with pytest.raises(ConfigError, match=r"module turnkit\.critics\.tk_plain defines no Config dataclass"):
        check_table({"tk_plain": 1.0})


def test_a_decorated_and_re_exported_factory_is_found(critic_folder: Path) -> None:
    (critic_folder / "tk_decorated.py").write_text(DECORATED)
    assert "tk_decorated" in built_in_critics()
    assert check_table({"tk_decorated": {"bonus": 0.5}}) == {"tk_decorated": {"weight": 1.0, "bonus": 0.5}}
    assert rewards("tk_decorated", {"bonus": 0.5}) == [(0.5, 1.5)]


def test_a_compiled_only_module_is_found(critic_folder: Path) -> None:
    source = critic_folder / "tk_compiled.py"
    source.write_text("from tk_test_bonus_impl import Config, from_context\n")
    py_compile.compile(str(source), cfile=str(critic_folder / "tk_compiled.pyc"), doraise=True)
    source.unlink()
    assert rewards("tk_compiled", {"bonus": 2.0}) == [(2.0, 3.0)]


def test_an_installed_critic_is_found_by_its_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dist_info = tmp_path / "tk_bonus_critic-0.1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: tk-bonus-critic\nVersion: 0.1.0\n")
    (dist_info / "entry_points.txt").write_text("[turnkit.critics]\ntk_bonus = tk_test_bonus_impl\n")
    (tmp_path / "tk_test_bonus_impl.py").write_text(BONUS)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert installed_critics() == {"tk_bonus": "tk_test_bonus_impl"}
        assert rewards("tk_bonus", {"bonus": -1.0}) == [(-1.0, 0.0)]
        with pytest.raises(ConfigError, match=r"unknown critic 'tk_bonuz' \(did you mean 'tk_bonus'\?\)"):
            check_table({"tk_bonuz": 1.0})
    finally:
        sys.modules.pop("tk_test_bonus_impl", None)


@pytest.mark.parametrize(("name", "close"), [("mtr", "mrt"), ("primes", "prime"), ("lenght", "length")])
def test_an_unknown_name_suggests_the_closest_critic(name: str, close: str) -> None:
    with pytest.raises(ConfigError, match=rf"unknown critic '{name}' \(did you mean '{close}'\?\); use one of \["):
        check_table({name: 1.0})


def test_a_critic_whose_own_import_fails_says_what_is_missing(critic_folder: Path) -> None:
    (critic_folder / "tk_broken.py").write_text("import tk_no_such_dependency\n")
    with pytest.raises(ConfigError, match=r"turnkit\.critics\.tk_broken cannot import 'tk_no_such_dependency'"):
        check_table({"tk_broken": 1.0})


def test_validating_a_config_loads_neither_torch_nor_the_model_code() -> None:
    """``TrainConfig.from_dict`` checks every built-in critic's table in a process that never imports torch."""
    code = (
        "import sys; from turnkit.train.config import TrainConfig; "
        "from turnkit.critics.registry import built_in_critics; "
        "names = built_in_critics(); "
        "TrainConfig.from_dict({'critic': {n: {'weight': 0.5} for n in names}}); "
        "TrainConfig.from_dict({'critic': {'prime': {'beta': 0.1}, 'sweet': {'steps': 2}, 'mrt': {'samples': 2}, "
        "'afd': {'model': 'runs/afd/rm/sft'}, 'iqlearn': {'model': 'runs/iqlearn'}, 'judge': {'url': 'http://x'}}}); "
        "print(names); print(sorted(m for m in ('torch', 'transformers', 'peft', 'turnkit.agents.hf') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    names, loaded = out.stdout.strip().splitlines()
    assert {"afd", "iqlearn", "judge", "length", "mrt", "oracle", "pav", "prime", "sweet"} <= set(
        ast.literal_eval(names)
    )
    assert loaded == "[]"


@pytest.mark.parametrize("name", ["afd", "iqlearn", "prime", "sweet"])
def test_a_critic_package_re_exports_its_model_code(name: str) -> None:
    """``from turnkit.critics.<name> import X`` works for every public name of its ``model`` module."""
    package = critic_module(name)
    model = importlib.import_module(f"{package.__name__}.model")
    assert sorted(package._MODEL) == sorted(model.__all__)
    assert all(getattr(package, n) is getattr(model, n) for n in model.__all__)
    assert set(model.__all__) <= set(dir(package))
    with pytest.raises(AttributeError, match=f"module 'turnkit.critics.{name}' has no attribute 'no_such_name'"):
        package.no_such_name  # noqa: B018
