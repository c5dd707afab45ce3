"""The API reference: which modules are public, their mkdocstrings pages, and the missing-docstring check.

A module is public when no part of its dotted name starts with ``_`` (``turnkit.sandbox._bwrap`` is not;
``__init__`` modules are their package). Its public names are its ``__all__`` when it defines one, else every
top-level function and class it defines whose name does not start with ``_``. The reference has one page per
package, listing the package's own public modules, each rendered by mkdocstrings from its docstrings.

:func:`missing_docstrings` is the check ``make docs`` runs: a public module, a public function or class, or a
public method of a public class without a docstring is listed, since mkdocstrings would silently leave it out
of the reference. It reads the source with :mod:`ast` (no import), so it sees exactly what is written:
a dataclass without a docstring has none, although Python gives it a generated ``__doc__``.

Example:
    >>> mods = public_modules()
    >>> "turnkit.envs.core" in mods, "turnkit.sandbox._bwrap" in mods
    (True, False)
    >>> missing_docstrings(["turnkit.types"])
    []
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository root."""
PACKAGE = "turnkit"


def module_file(module: str, root: Path = ROOT) -> Path:
    """The source file of a dotted module name under ``root`` (``pkg/__init__.py`` for a package)."""
    path = root.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def public_modules(package: str = PACKAGE, root: Path = ROOT) -> list[str]:
    """Every public module of ``package`` under ``root``, sorted (packages before their modules)."""
    out = []
    for path in sorted(root.joinpath(package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts[-1] == "__main__" or any(p.startswith("_") for p in parts):
            continue
        out.append(".".join(parts))
    return sorted(out)


def _all_names(tree: ast.Module) -> list[str] | None:
    """The module's literal ``__all__``, or ``None`` when it has none."""
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
            return list(ast.literal_eval(node.value))
    return None


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _is_overload(node: ast.AST) -> bool:
    """``@overload`` / ``@typing.overload`` stubs carry no docstring of their own."""
    return any(
        (isinstance(d, ast.Name) and d.id == "overload") or (isinstance(d, ast.Attribute) and d.attr == "overload")
        for d in getattr(node, "decorator_list", ())
    )


def _is_setter(node: ast.AST) -> bool:
    """``@x.setter`` / ``@x.deleter``: documented by the property's getter."""
    return any(
        isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter") for d in getattr(node, "decorator_list", ())
    )


def missing_docstrings(modules: list[str], root: Path = ROOT) -> list[str]:
    """``"file:line: dotted.name"`` for every public object of ``modules`` that has no docstring.

    Checked: the module itself; its public names (``__all__`` when defined, else its public top-level
    functions and classes) that it defines itself (names it re-exports are checked where they are defined);
    and the public methods of those classes (dunder methods and ``@overload`` stubs excepted).
    """
    problems = []
    for module in modules:
        path = module_file(module, root)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        rel = path.relative_to(root)
        if ast.get_docstring(tree) is None:
            problems.append(f"{rel}:1: {module} (module)")
        exported = _all_names(tree)
        defs = {n.name: n for n in tree.body if isinstance(n, _DEFS) and not _is_overload(n)}
        names = exported if exported is not None else [n for n in defs if not n.startswith("_")]
        for name in names:
            node = defs.get(name)
            if node is None:
                continue  # a re-export, an assignment or a constant: documented where it is defined
            if ast.get_docstring(node) is None:
                problems.append(f"{rel}:{node.lineno}: {module}.{name}")
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if (
                        isinstance(member, _DEFS)
                        and not member.name.startswith("_")
                        and not _is_overload(member)
                        and not _is_setter(member)
                        and ast.get_docstring(member) is None
                    ):
                        problems.append(f"{rel}:{member.lineno}: {module}.{name}.{member.name}")
    return problems


def page_path(package: str) -> str:
    """The API page of a package, relative to the docs folder."""
    return f"reference/api/{package}.md"


def packages(modules: list[str], root: Path = ROOT) -> dict[str, list[str]]:
    """``{package: [its public modules, the package itself first]}``; a module belongs to its parent package."""
    out: dict[str, list[str]] = defaultdict(list)
    for module in modules:
        is_package = module_file(module, root).name == "__init__.py"
        out[module if is_package else module.rsplit(".", 1)[0]].append(module)
    return {pkg: sorted(mods, key=lambda m: (m != pkg, m)) for pkg, mods in sorted(out.items())}


def render_package(package: str, modules: list[str]) -> str:
    """The API page of ``package``: one mkdocstrings block per module (options: ``mkdocs.yml``)."""
    return "\n".join([f"# `{package}`\n", *(f"::: {module}\n" for module in modules)])


def render_index(pkgs: dict[str, list[str]]) -> str:
    """The API reference's index: every package, its modules and each module's first docstring line."""
    lines = [
        "# API reference\n",
        "Generated from the docstrings on every docs build (mkdocstrings). Public means: no part of the dotted "
        "name starts with `_`; a module's `__all__`, where it defines one, lists its public names. The build "
        "fails when a public module, class, function or method has no docstring.\n",
        "| Package | Modules |\n| --- | --- |",
    ]
    for pkg, mods in pkgs.items():
        names = ", ".join(f"`{m.rsplit('.', 1)[-1]}`" for m in mods if m != pkg) or "-"
        lines.append(f"| [`{pkg}`]({page_path(pkg).removeprefix('reference/api/')}) | {names} |")
    return "\n".join(lines) + "\n"
