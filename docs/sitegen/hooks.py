"""MkDocs hooks (``hooks:`` in mkdocs.yml): the generated reference pages and the repository files docs link to.

* ``on_config``: expands the nav's generated sections (every env page, every API package page) and appends
  any top-level ``docs/*.md`` page the nav does not name yet to the how-tos (a new how-to is never left out).
* ``on_files``: adds the generated pages (:mod:`.cli_reference`, :mod:`.env_catalogue`, :mod:`.api_reference`)
  as in-memory files (nothing is written under ``docs/``, so the test suite's ``*.md`` doctests never see
  them), plus the repository files that how-tos link to outside ``docs/`` (``../BENCHMARKS.md``, a study's
  script or plot) under ``repo/``, so the site has no dead links and MkDocs checks those links and anchors too.
* ``on_page_markdown``: points those outside links at their ``repo/`` copies.
* ``on_page_content``: turns Sphinx roles in docstrings (``:class:`~turnkit.browser.Tab```) into
  cross-references (links where the target is in the API reference, plain code otherwise).

MkDocs is imported inside the hooks only, so importing this module (the test suite's doctest collection does)
needs no docs packages.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # MkDocs loads this file by path; the generators import as docs.sitegen.*
    sys.path.insert(0, str(ROOT))

from docs.sitegen import api_reference, cli_reference, env_catalogue  # noqa: E402

DOCS = ROOT / "docs"
REPO_PREFIX = "repo"
"""Site folder of the repository files that pages link to outside ``docs/``."""

_LINK = re.compile(r"(\]\()([^)\s]+)(\))")
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
_ROLE_HTML = re.compile(
    r":(?:mod|class|func|meth|attr|data|exc|obj|const):<code>(~?)([\w.]+)</code>"  # :class:`~a.B`
    r"|:(?:mod|class|func|meth|attr|data|exc|obj|const):<code>([^<&]+?) &lt;([\w.]+)&gt;</code>"  # :meth:`t <a.b>`
)

_origins: dict[str, Path] = {}
"""src_uri of every page -> the file it came from (for resolving its relative links)."""
_generated: dict[str, str] = {}


def _outside_target(origin: Path, target: str) -> Path | None:
    """The repository file or folder that a relative link of ``origin`` names, when it is outside ``docs/``."""
    if re.match(r"^[a-zA-Z][\w+.-]*:", target) or target.startswith(("#", "/")):
        return None
    path = target.split("#", 1)[0]
    if not path:
        return None
    resolved = (origin.parent / path).resolve()
    if resolved == DOCS or DOCS in resolved.parents or ROOT not in resolved.parents or not resolved.exists():
        return None
    return resolved


def _links(text: str) -> list[str]:
    """The link targets of Markdown ``text`` outside code."""
    return [m.group(2) for m in _LINK.finditer(_CODE.sub("", text))]


def _bundled_uri(path: Path) -> str:
    """The site path of a bundled repository file (a folder gets a generated listing page)."""
    rel = path.relative_to(ROOT).as_posix()
    return f"{REPO_PREFIX}/{rel}/index.md" if path.is_dir() else f"{REPO_PREFIX}/{rel}"


def _folder_listing(path: Path) -> str:
    """A page listing a repository folder that a how-to links to (a study's results folder)."""
    rel = path.relative_to(ROOT).as_posix()
    rows = [
        f"| `{p.relative_to(path).as_posix()}` | {p.stat().st_size:,} bytes |"
        for p in sorted(path.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    ]
    return (
        f"# `{rel}/`\n\nThis folder is in the repository (not copied into the site); its files:\n\n"
        "| File | Size |\n| --- | --- |\n" + "\n".join(rows) + "\n"
    )


def generated_pages() -> dict[str, str]:
    """``{src_uri: markdown}`` of every generated reference page (plays one oracle episode per env)."""
    from turnkit.cli import build_parser

    pages = {"reference/cli.md": cli_reference.render(build_parser())}
    ids = env_catalogue.env_ids()
    pages["reference/envs/index.md"] = env_catalogue.render_index(ids)
    for env_id in ids:
        pages[env_catalogue.page_path(env_id)] = env_catalogue.render_env(env_id)
    pkgs = api_reference.packages(api_reference.public_modules())
    pages["reference/api/index.md"] = api_reference.render_index(pkgs)
    for pkg, mods in pkgs.items():
        pages[api_reference.page_path(pkg)] = api_reference.render_package(pkg, mods)
    return pages


def _nav_pages(nav: Any) -> set[str]:
    """Every page path the nav names."""
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, dict):
        return set().union(*(_nav_pages(v) for v in nav.values()))
    if isinstance(nav, list):
        return set().union(set(), *(_nav_pages(v) for v in nav))
    return set()


def _expand(nav: Any, expansions: dict[str, list[Any]]) -> Any:
    """``nav`` with each page named in ``expansions`` replaced by its list (the index first)."""
    if isinstance(nav, list):
        out: list[Any] = []
        for item in nav:  # a bare folder entry in a list becomes its pages, spliced in
            out += (
                expansions[item]
                if isinstance(item, str) and item.endswith("/") and item in expansions
                else [_expand(item, expansions)]
            )
        return out
    if isinstance(nav, dict):
        return {
            k: (expansions[v] if isinstance(v, str) and v in expansions else _expand(v, expansions))
            for k, v in nav.items()
        }
    return nav


def _readme_first(path: str) -> tuple[bool, str]:
    """Sort key: a folder's README.md or index.md first, then by name."""
    return (Path(path).stem.lower() not in ("readme", "index"), path)


def on_config(config: Any) -> Any:
    """Expand the generated nav sections; add new top-level how-tos the nav does not name yet."""
    ids = env_catalogue.env_ids()
    pkgs = api_reference.packages(api_reference.public_modules())
    folders = {item for item in _nav_pages(config["nav"]) if item.endswith("/")}
    expansions: dict[str, list[Any]] = {
        folder: sorted((p.relative_to(DOCS).as_posix() for p in (DOCS / folder).glob("*.md")), key=_readme_first)
        for folder in folders
    }
    expansions |= {
        "reference/envs/index.md": ["reference/envs/index.md"] + [{i: env_catalogue.page_path(i)} for i in ids],
        "reference/api/index.md": ["reference/api/index.md"] + [{p: api_reference.page_path(p)} for p in pkgs],
    }
    nav = _expand(config["nav"], expansions)
    named = _nav_pages(nav)
    new = sorted(p.name for p in DOCS.glob("*.md") if p.name not in named)
    for section in nav:
        if isinstance(section, dict) and "How-tos" in section:
            section["How-tos"] = list(section["How-tos"]) + new
    config["nav"] = nav
    return config


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages and the repository files the docs link to."""
    from mkdocs.structure.files import File

    _origins.clear()
    for f in files:
        _origins[f.src_uri] = Path(f.abs_src_path) if f.abs_src_path else DOCS / f.src_uri
    _generated.clear()
    _generated.update(generated_pages())
    for uri, text in _generated.items():
        files.append(File.generated(config, uri, content=text))
        _origins[uri] = DOCS / uri
    # the repository files linked from pages outside docs/, and from those (BENCHMARKS.md links on)
    todo = [(uri, origin) for uri, origin in _origins.items() if uri.endswith(".md") and uri not in _generated]
    seen: set[Path] = set()
    while todo:
        _, origin = todo.pop()
        for target in _links(origin.read_text(encoding="utf-8")):
            path = _outside_target(origin, target)
            if path is None or path in seen:
                continue
            seen.add(path)
            uri = _bundled_uri(path)
            if path.is_dir():
                files.append(File.generated(config, uri, content=_folder_listing(path)))
            else:
                files.append(File.generated(config, uri, abs_src_path=str(path)))
                if path.suffix == ".md":
                    todo.append((uri, path))
            _origins[uri] = path
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Point links to repository files outside ``docs/`` at their ``repo/`` copies.

    A bundled page's links into ``docs/`` (``BENCHMARKS.md`` linking ``docs/training.md``) point at the pages.
    """
    origin = _origins.get(page.file.src_uri)
    if origin is None:
        return markdown
    here = os.path.dirname(page.file.src_uri)

    def fix(match: re.Match[str]) -> str:
        target = match.group(2)
        anchor = "#" + target.split("#", 1)[1] if "#" in target else ""
        path = _outside_target(origin, target)
        if path is not None:
            new = _bundled_uri(path)
        elif page.file.src_uri.startswith(REPO_PREFIX + "/") and not re.match(r"^[a-zA-Z][\w+.-]*:|#", target):
            resolved = (origin.parent / target.split("#", 1)[0]).resolve()
            if DOCS not in resolved.parents:
                return match.group(0)
            new = resolved.relative_to(DOCS).as_posix()
        else:
            return match.group(0)
        return f"{match.group(1)}{os.path.relpath(new, here or '.')}{anchor}{match.group(3)}"

    # rewrite outside code only: split on code, fix the prose parts
    out, last = [], 0
    for code in _CODE.finditer(markdown):
        out.append(_LINK.sub(fix, markdown[last : code.start()]))
        out.append(code.group(0))
        last = code.end()
    out.append(_LINK.sub(fix, markdown[last:]))
    return "".join(out)


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Sphinx roles left in rendered docstrings become optional cross-references (dotted names only)."""

    def ref(match: re.Match[str]) -> str:
        if match.group(4):  # an explicit title
            title, name = match.group(3), match.group(4)
        else:
            name = match.group(2)
            title = name.rsplit(".", 1)[-1] if match.group(1) else name
        if "." not in name:  # a bare name (:attr:`splits`) would match headings of unrelated pages
            return f"<code>{title}</code>"
        return f'<autoref identifier="{name}" optional><code>{title}</code></autoref>'

    return _ROLE_HTML.sub(ref, html)
