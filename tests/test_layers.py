"""The package's import layers (pyproject.toml's import-linter contracts) hold, and a wrong arrow breaks them."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import grimp
import pytest
from importlinter.configuration import configure
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.layers import LayersContract

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest brings tomli on 3.10
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
CONFIG = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]
CONTRACTS = {c["id"]: c for c in CONFIG["contracts"]}
configure()  # import-linter's own settings (timer, printer), as `lint-imports` sets them
KINDS = {"layers": LayersContract, "acyclic_siblings": AcyclicSiblingsContract}


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(CONFIG["root_package"], include_external_packages=False)


def check(contract_id: str, graph: grimp.ImportGraph) -> bool:
    options = {k: v for k, v in CONTRACTS[contract_id].items() if k not in ("id", "name", "type")}
    options = {k: [v] if isinstance(v, str) else v for k, v in options.items()}
    contract = KINDS[CONTRACTS[contract_id]["type"]](
        name=CONTRACTS[contract_id]["name"], session_options=dict(CONFIG), contract_options=options
    )
    return contract.check(graph, verbose=False).kept


@pytest.mark.parametrize("contract_id", sorted(CONTRACTS))
def test_the_package_keeps_its_contracts(contract_id: str, graph: grimp.ImportGraph) -> None:
    assert check(contract_id, graph), f"`lint-imports --contract {contract_id}` shows the offending imports"


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("turnkit.envs.core", "turnkit.rollout.collect"),  # an env reaching up into rollout
        ("turnkit.envs.collab_code.env", "turnkit.models.tiny_human"),  # ... or into the trained models
        ("turnkit.learners.dpo", "turnkit.train.dpo"),  # a loss kernel importing its loop
        ("turnkit.models.embedded", "turnkit.train.loop"),
        ("turnkit.search.mcts", "turnkit.critics.prime"),
    ],
)
def test_an_upward_import_breaks_the_layers(importer: str, imported: str, graph: grimp.ImportGraph) -> None:
    wrong = copy.deepcopy(graph)
    wrong.add_import(importer=importer, imported=imported)
    assert not check("layers", wrong)


def test_an_import_circle_breaks_the_acyclic_contract(graph: grimp.ImportGraph) -> None:
    wrong = copy.deepcopy(graph)
    # cli.synth imports cli.envs (for parse_env_kwargs); the way back would close a circle
    wrong.add_import(importer="turnkit.cli.envs", imported="turnkit.cli.synth")
    assert not check("acyclic", wrong)
