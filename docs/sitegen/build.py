"""``make docs``: check the docstrings, run the examples, build the site into ``site/`` strictly, check it is offline.

Usage (from anywhere; paths are the repository's)::

    python3 docs/sitegen/build.py             # everything
    DOCS_DOCTESTS=0 python3 docs/sitegen/build.py   # skip the examples (the test suite has just run them)

Steps, each printing its wall time, the first failure ending the build with exit status 1:

1. **docstrings**: :func:`docs.sitegen.api_reference.missing_docstrings` over the public modules;
2. **examples**: pytest runs the doctests of the public modules' files and of every ``docs/**/*.md`` page (the
   suite's ``conftest.py`` and options apply), in a subprocess started first and running alongside step 3;
3. **site**: ``mkdocs build --strict`` (a broken link, anchor or cross-reference, or a griffe docstring warning,
   fails it);
4. **offline**: :func:`external_assets` finds no script, stylesheet, image, font or CSS ``url()`` from the network
   in ``site/``.

Example:
    >>> import tempfile, pathlib
    >>> site = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (site / "index.html").write_text('<a href="https://x.org/">ok</a><script src="https://cdn.x/y.js">')
    >>> external_assets(site)
    ['index.html: https://cdn.x/y.js']
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from docs.sitegen import api_reference  # noqa: E402

SITE = ROOT / "site"

# Tags that load something (a plain <a href> is a link the reader follows, not an asset).
_ASSET_TAGS = re.compile(
    r"<(?:script|img|source|iframe|embed|video|audio)\b[^>]*?\bsrc\s*=\s*[\"']?(https?:)?//([^\"'\s>]+)"
    r"|<link\b[^>]*?\bhref\s*=\s*[\"']?(https?:)?//([^\"'\s>]+)",
    re.I,
)
_CSS_URLS = re.compile(r"(?:url\(\s*[\"']?|@import\s+[\"'])(https?:)?//([^\"')\s]+)", re.I)


def external_assets(site: Path = SITE) -> list[str]:
    """``"file: url"`` for every asset of the built site that would be fetched from the network.

    Looks at ``src`` of scripts, images, media and frames and ``href`` of ``<link>`` (stylesheets, icons,
    preloads, fonts) in every HTML file, and at ``url(...)``/``@import`` in every HTML and CSS file.
    """
    found = []
    for path in sorted(site.rglob("*")):
        if path.suffix not in (".html", ".css"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        hits = [f"{m[0] or ''}//{m[1]}" for m in _CSS_URLS.findall(text)]
        if path.suffix == ".html":
            for m in _ASSET_TAGS.findall(text):
                scheme, host = (m[0], m[1]) if m[1] else (m[2], m[3])
                hits.append(f"{scheme}//{host}")
        found += [f"{path.relative_to(site).as_posix()}: {hit}" for hit in hits]
    return found


def doctest_targets() -> list[str]:
    """The files whose examples must run: the public modules' sources and the docs pages."""
    modules = [api_reference.module_file(m).relative_to(ROOT).as_posix() for m in api_reference.public_modules()]
    pages = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))
    return modules + pages


def _without_info(log: str) -> str:
    r"""MkDocs' output without its ``INFO`` messages (and their indented continuation lines).

    Example:
        >>> _without_info("INFO - pages not in nav:\n  - a.md\nWARNING - broken link\n  detail\nAborted")
        'WARNING - broken link\n  detail\nAborted'
    """
    kept, skipping = [], False
    for line in log.splitlines():
        if line.startswith("INFO"):
            skipping = True
        elif not line[:1].isspace():
            skipping = False
        if not skipping:
            kept.append(line)
    return "\n".join(kept)


def _step(name: str, start: float, ok: bool, detail: str = "") -> None:
    """Print one step's outcome and wall time."""
    print(f"docs: {name:<11} {'ok' if ok else 'FAILED'} ({time.monotonic() - start:.1f} s){detail}", flush=True)


def main() -> int:
    """Run the steps; 0 when all pass."""
    total = time.monotonic()
    start = time.monotonic()
    problems = api_reference.missing_docstrings(api_reference.public_modules())
    _step("docstrings", start, not problems, f": {len(problems)} public object(s) without one" if problems else "")
    if problems:
        print("\n".join(f"  {p}" for p in problems))
        return 1

    doctests = None
    if os.environ.get("DOCS_DOCTESTS", "1") != "0":
        doctest_start = time.monotonic()
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--no-header", *doctest_targets()]
        doctests = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    start = time.monotonic()
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--clean", "--site-dir", str(SITE)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    _step("site", start, build.returncode == 0)
    if build.returncode != 0:
        print(_without_info(build.stdout))

    failed = build.returncode != 0
    if build.returncode == 0:
        start = time.monotonic()
        remote = external_assets(SITE)
        _step("offline", start, not remote, f": {len(remote)} asset(s) from the network" if remote else "")
        if remote:
            print("\n".join(f"  {r}" for r in remote[:20]))
        failed |= bool(remote)

    if doctests is not None:
        out, _ = doctests.communicate()
        ok = doctests.returncode == 0
        summary = out.strip().splitlines()[-1] if out.strip() else ""
        _step("examples", doctest_start, ok, f": {summary}")
        if not ok:
            print(out[-6000:])
        failed |= not ok
    else:
        print("docs: examples    skipped (DOCS_DOCTESTS=0)")

    print(f"docs: {'FAILED' if failed else 'built'} {SITE.relative_to(ROOT)}/ in {time.monotonic() - total:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
