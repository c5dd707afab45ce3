"""Every JSON result a study writes carries its machine record and wall time (issue #21), checked without running
the studies: statically (``ast``) for every script, and by calling the cheap writers.

The static rule (:func:`json_outputs`): a JSON output is a call of ``write_result`` (recorded by construction),
``json.dump(obj, f)``, ``x.write_text(...)``/``f.write(...)`` of a ``json.dumps(obj)`` (directly or through a
name bound to it), or a ``print`` of an *indented* ``json.dumps(obj)`` (a result printed for ``> file``). Not
results: one-line progress prints, and the echo of what a function also writes with ``write_result`` (``obj`` a
name, or an item of one, that goes into a ``write_result`` call of the same function). ``obj`` is recorded when it
is seen to hold both ``machine`` and ``wall_s``: a dict display with those keys (also through ``**`` spreads,
``|`` and names bound in the same function), a name given ``obj["machine"] = ...``, or a value read back from a
``write_result`` call.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

STUDIES = Path(__file__).resolve().parents[2] / "studies"
NOT_WRITERS = ("pav_didactic_plots",)
"""Study scripts that only read results (plots from a study's files) and write no JSON of their own."""
RECORDED = tuple(sorted(p.stem for p in STUDIES.glob("*.py") if p.stem not in NOT_WRITERS))
"""Every other study script: its result files must carry the record (issue #21, "Build" item 4). Taken from the
folder, so a new study is checked without being listed."""
KEYS = ("machine", "wall_s")
WRITERS = ("write_result",)


@dataclass(frozen=True)
class JsonOutput:
    """One place a script writes or prints a JSON result."""

    function: str
    line: int
    kind: str  # "write_result", "file" or "stdout"
    recorded: bool


def _name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _is_json(call: ast.AST, attr: str) -> bool:
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == attr
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "json"
    )


def _calls(node: ast.AST, names: tuple[str, ...]) -> bool:
    return any(isinstance(n, ast.Call) and _name(n) in names for n in ast.walk(node))


class _Scope:
    """What one function binds: values assigned to each name and the constant keys set by ``name["key"] = ...``."""

    def __init__(self, func: ast.AST) -> None:
        self.values: dict[str, list[ast.expr]] = {}
        self.items: dict[str, set[str]] = {}
        for node in ast.walk(func):
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            for target in targets:
                if isinstance(target, ast.Name):
                    self.values.setdefault(target.id, []).append(value)
                elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                    for t, v in zip(target.elts, value.elts, strict=False):
                        if isinstance(t, ast.Name):
                            self.values.setdefault(t.id, []).append(v)
                elif (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.value, ast.Name)
                    and isinstance(target.slice, ast.Constant)
                    and isinstance(target.slice.value, str)
                ):
                    self.items.setdefault(target.value.id, set()).add(target.slice.value)

    def holds(self, expr: ast.AST, key: str, seen: frozenset[str] = frozenset()) -> bool:
        """Whether ``expr`` is seen to be a dict holding ``key`` (see the module docstring)."""
        if isinstance(expr, ast.Dict):
            return any(
                (k is None and self.holds(v, key, seen)) or (isinstance(k, ast.Constant) and k.value == key)
                for k, v in zip(expr.keys, expr.values, strict=True)
            )
        if isinstance(expr, ast.Name):
            if expr.id in seen:
                return False
            seen = seen | {expr.id}
            return key in self.items.get(expr.id, set()) or any(
                self.holds(v, key, seen) for v in self.values.get(expr.id, [])
            )
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
            return self.holds(expr.left, key, seen) or self.holds(expr.right, key, seen)
        if isinstance(expr, ast.Call):  # a result read back from the file write_result wrote
            return _calls(expr, WRITERS)
        return False

    def names(self, exprs: list[ast.expr]) -> set[str]:
        """The names in ``exprs`` and, transitively, in the values bound to them."""
        found: set[str] = set()
        todo = [n.id for e in exprs for n in ast.walk(e) if isinstance(n, ast.Name)]
        while todo:
            name = todo.pop()
            if name not in found:
                found.add(name)
                todo += [n.id for v in self.values.get(name, []) for n in ast.walk(v) if isinstance(n, ast.Name)]
        return found

    def dumped(self, expr: ast.AST, seen: frozenset[str] = frozenset()) -> list[ast.Call]:
        """The ``json.dumps`` calls whose text ``expr`` is (or contains), through names bound in the function."""
        found = [n for n in ast.walk(expr) if _is_json(n, "dumps")]
        for n in ast.walk(expr):
            if isinstance(n, ast.Name) and n.id not in seen:
                for value in self.values.get(n.id, []):
                    found += self.dumped(value, seen | {n.id})
        return found


def _echo(obj: ast.expr, written: set[str]) -> bool:
    while isinstance(obj, (ast.Subscript, ast.Attribute)):
        obj = obj.value
    return isinstance(obj, ast.Name) and obj.id in written


def json_outputs(source: str) -> list[JsonOutput]:
    """Every JSON output of a module's functions (see the module docstring), and whether it carries the record."""
    outputs: list[JsonOutput] = []
    for func in ast.walk(ast.parse(source)):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        scope = _Scope(func)
        written = scope.names(
            [a for c in ast.walk(func) if isinstance(c, ast.Call) and _name(c) in WRITERS for a in c.args]
        )
        inner = {n for f in ast.walk(func) if f is not func and isinstance(f, ast.FunctionDef) for n in ast.walk(f)}
        for call in ast.walk(func):
            if not isinstance(call, ast.Call) or call in inner:
                continue
            name, objs, kind = _name(call), [], ""
            if name in WRITERS:
                outputs.append(JsonOutput(func.name, call.lineno, "write_result", True))
                continue
            if _is_json(call, "dump") and call.args:
                objs, kind = [call.args[0]], "file"
            elif name in ("write_text", "write") and isinstance(call.func, ast.Attribute) and call.args:
                objs, kind = [d.args[0] for d in scope.dumped(call.args[0]) if d.args], "file"
            elif name == "print" and call.args:
                indented = [d for d in scope.dumped(call.args[0]) if any(k.arg == "indent" for k in d.keywords)]
                objs, kind = [d.args[0] for d in indented if d.args and not _echo(d.args[0], written)], "stdout"
            for obj in objs:
                recorded = all(scope.holds(obj, key) for key in KEYS)
                outputs.append(JsonOutput(func.name, call.lineno, kind, recorded))
    return sorted(outputs, key=lambda o: o.line)


def unrecorded(source: str) -> list[str]:
    """``function:line (kind)`` of each JSON output without the record."""
    return [f"{o.function}:{o.line} ({o.kind})" for o in json_outputs(source) if not o.recorded]


# ------------------------------------------------------------------------------------------ the rule itself


def test_rule_flags_outputs_without_the_record():
    bad = """
import json
def to_file(path, result):
    path.write_text(json.dumps(result, indent=2) + "\\n")
def with_open(path, result):
    with open(path, "w") as f:
        json.dump(result, f)
def through_a_name(path, result):
    text = json.dumps({"x": 1, "wall_s": 2.0})
    print(text)
    path.write_text(text)
def to_stdout(rows):
    print(json.dumps(rows, indent=2))
def machine_only(path, result):
    result["machine"] = machine_record()
    path.write_text(json.dumps(result))
def not_the_written_one(path, result, rows, started):
    write_result(path, result, started=started)
    print(json.dumps(rows, indent=2))
def printed_when_not_written(path, result, started):
    if path:
        write_result(path, result, started=started)
    else:
        print(json.dumps({**result, "machine": machine_record()}, indent=2))
"""
    assert unrecorded(bad) == [
        "to_file:4 (file)",
        "with_open:7 (file)",
        "through_a_name:11 (file)",
        "to_stdout:13 (stdout)",
        "machine_only:16 (file)",
        "not_the_written_one:19 (stdout)",
        "printed_when_not_written:24 (stdout)",
    ]


def test_rule_accepts_recorded_outputs_and_ignores_progress():
    good = """
import json, time
def writer(path, result, started):
    path = write_result(path, result, started=started)
    print(path.read_text())
    print(json.dumps(result, indent=2))  # the echo of a file just written with its record
def echo_part(path, summary, started):
    record = {"summary": summary}
    write_result(path, record, started=started)
    print(json.dumps(summary["eval"], indent=1))
def printed(result, started):
    print(json.dumps({**result, "machine": machine_record(), "wall_s": time.time() - started}, indent=2))
def spread(result):
    record = {"rows": result, "machine": machine_record()}
    print(json.dumps({**record, "wall_s": 1.0}, indent=2))
def by_item(path, result):
    result["machine"] = machine_record()
    result["wall_s"] = 1.0
    text = json.dumps(result)
    path.write_text(text + "\\n")
def read_back(path, run, started):
    run = json.loads(write_result(path, run, started=started).read_text())
    path.with_suffix(".copy").write_text(json.dumps(run))
def progress(seed):
    print(json.dumps({"seed": seed, "t": 1.0}), flush=True)
"""
    outputs = json_outputs(good)
    assert unrecorded(good) == []
    assert [(o.function, o.kind) for o in outputs] == [
        ("writer", "write_result"),
        ("echo_part", "write_result"),
        ("printed", "stdout"),
        ("spread", "stdout"),
        ("by_item", "file"),
        ("read_back", "write_result"),
        ("read_back", "file"),
    ]


# ------------------------------------------------------------------------------------------ the studies


@pytest.mark.parametrize("study", RECORDED)
def test_every_json_a_study_writes_carries_the_record(study):
    source = (STUDIES / f"{study}.py").read_text(encoding="utf-8")
    outputs = json_outputs(source)
    assert outputs, f"{study}.py: no JSON output found (the rule would check nothing)"
    assert unrecorded(source) == [], f"{study}.py writes JSON without machine/wall_s"
    assert "common.provenance" in source


def _load(study: str) -> ModuleType:
    """Import ``studies/<study>.py`` as the scripts import each other (by module name, studies/ on sys.path)."""
    if study in sys.modules:
        return sys.modules[study]
    sys.path.insert(0, str(STUDIES))
    try:
        spec = importlib.util.spec_from_file_location(study, STUDIES / f"{study}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[study] = module
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(study, None)
        raise
    finally:
        sys.path.remove(str(STUDIES))
    return module


def _assert_record(data: dict) -> None:
    machine = data["machine"]
    for key in ("cpu_model", "threads", "float_path", "torch", "command"):
        assert machine[key] is not None, key
    assert data["wall_s"] >= 0


def test_collab_code_asking_prints_rows_with_the_record(capsys):
    assert _load("collab_code_asking").main(["--tasks", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    _assert_record(data)
    assert [(r["split"], r["agent"]) for r in data["rows"]][:2] == [("id", "clarifying"), ("id", "answer-at-once")]


def test_math_tools_record_is_machine_record_plus_its_own_fields(tmp_path):
    math_tools = _load("math_tools")
    record = math_tools.machine()
    for key in ("cpu_model", "float_path", "lock_sha256", "command", "sandbox", "load_average_at_start", "versions"):
        assert key in record, key
    written = math_tools.write_recorded(tmp_path / "r.json", {"summary": 1}, record, started=0.0)
    data = json.loads((tmp_path / "r.json").read_text())
    assert data == written
    _assert_record(data)
    assert data["summary"] == 1
    assert data["machine"]["sandbox"] == record["sandbox"]


def test_mcts_dpo_merge_reads_files_without_a_record(tmp_path, capsys):
    committed = STUDIES / "results" / "mcts_dpo" / "quickstart-dist.json"
    old = json.loads(committed.read_text())
    assert "machine" not in old
    part = shutil.copy(committed, tmp_path / "part.json")
    assert _load("mcts_dpo").main(["--merge", str(part), "--name", "merged", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "merged.json").read_text())
    assert json.loads(capsys.readouterr().out) == data
    _assert_record(data)
    assert data["machine_per_part"] == [None]
    assert {k: data["summary"][k] for k in old["summary"]} == old["summary"]  # the numbers are untouched
    assert data["summary"]["format"]["mcts_dpo"]["seeds"] == len(old["runs"])  # and format losses are counted


# The suite's doctest collection covers turnkit/ and docs/ only; the studies' verdict and summary helpers (the
# ``--check`` lines, collapse counts) are pure functions whose docstring examples are run here.
WITH_EXAMPLES = sorted(p.stem for p in STUDIES.glob("*.py") if ">>>" in p.read_text(encoding="utf-8"))


def test_some_studies_have_examples():
    assert len(WITH_EXAMPLES) >= 4, WITH_EXAMPLES


@pytest.mark.parametrize("study", WITH_EXAMPLES)
def test_study_examples_pass(study):
    import doctest

    result = doctest.testmod(_load(study), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, result


COMMON = sorted(p.stem for p in (STUDIES / "common").glob("*.py") if p.stem != "__init__")
"""The studies' shared helpers (``studies/common/``): the suite's doctest collection does not reach them."""


@pytest.mark.parametrize("module", COMMON)
def test_common_examples_pass(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"studies.common.{module}"), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, result


def _recorded(data: object) -> bool:
    return isinstance(data, dict) and ("machine" in data or "machine_per_part" in data)


def test_results_without_a_record_are_the_ones_the_index_lists():
    """No fabricated records: a result made before the record existed stays as it was, listed in the index."""
    section = (STUDIES / "README.md").read_text(encoding="utf-8").split("## Results without a machine record", 1)[1]
    listed = set(re.findall(r"^\| `(results/[^`]*)/` \|", section, re.MULTILINE))
    unrecorded = {
        str(p.parent.relative_to(STUDIES))
        for p in (STUDIES / "results").rglob("*.json")
        if not _recorded(json.loads(p.read_text(encoding="utf-8")))
    }
    assert unrecorded == listed
