"""Photograph the built site with turnkit's own Chromium: ``docs/img/site-index.png`` and ``site-api.png``.

Run after ``make docs``::

    python3 docs/sitegen/screenshot.py            # [--site site] [--out docs/img]

The pages are loaded in a :class:`turnkit.browser.Tab` whose resolver serves the files of ``site/`` at
``http://site.invalid/`` (no HTTP server, nothing from the network). A request for anything that is not in the
site is blocked, and the script fails when one was made: the picture also shows the site needs no network.

Example:
    >>> import tempfile, pathlib
    >>> site = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (site / "index.html").write_text("<p>hi</p>")
    >>> resolve = site_resolver(site)
    >>> resolve(TabRequest("GET", f"{ORIGIN}/", {}, None)).content_type
    'text/html'
    >>> resolve(TabRequest("GET", "https://fonts.example/a.css", {}, None)) is None
    True
"""

from __future__ import annotations

import argparse
import io
import mimetypes
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from turnkit.browser import Tab, TabRequest, TabResponse  # noqa: E402
from turnkit.browser.tab import Resolver  # noqa: E402

ORIGIN = "http://site.invalid"
"""Where the tab sees the site (``.invalid`` never resolves, so nothing can reach a real host)."""
SHOTS = {"site-index.png": "", "site-api.png": "reference/api/turnkit/"}
"""Picture name -> page (path in the site)."""
VIEWPORT = (1280, 800)
MAX_BYTES = 300_000


def site_resolver(site: Path) -> Resolver:
    """A resolver that serves the files under ``site`` at :data:`ORIGIN` and blocks everything else."""
    site = site.resolve()

    def resolve(req: TabRequest) -> TabResponse | None:
        parts = urlsplit(req.url)
        if f"{parts.scheme}://{parts.netloc}" != ORIGIN:
            return None
        path = (site / unquote(parts.path).lstrip("/")).resolve()
        if path.is_dir():
            path = path / "index.html"
        if site not in path.parents or not path.is_file():
            return TabResponse(status=404, body=b"not found", content_type="text/plain")
        content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return TabResponse(body=path.read_bytes(), content_type=content_type)

    return resolve


def save_png(pixels: object, out: Path) -> int:
    """Save an RGB array as a PNG (palette-quantised when that is needed to stay under :data:`MAX_BYTES`)."""
    from PIL import Image

    image = Image.fromarray(pixels)  # type: ignore[arg-type]
    for candidate in (image, image.quantize(colors=256, method=Image.Quantize.MEDIANCUT)):
        buf = io.BytesIO()
        candidate.save(buf, format="PNG", optimize=True)
        if buf.tell() <= MAX_BYTES:
            break
    out.write_bytes(buf.getvalue())
    return buf.tell()


def main(argv: list[str] | None = None) -> int:
    """Take the pictures; 1 when the site is missing, a page asked for anything outside it, or a file is too big."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--site", type=Path, default=ROOT / "site", help="the built site (default: site/)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img", help="where the pictures go")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        print(f"screenshot: no {args.site}/index.html; run `make docs` first", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    failed = False
    with Tab(site_resolver(args.site), viewport=VIEWPORT, timeout_s=20.0) as tab:
        for name, page in SHOTS.items():
            tab.goto(f"{ORIGIN}/{page}")
            size = save_png(tab.screenshot(), args.out / name)
            print(f"screenshot: {args.out / name} ({size:,} bytes) of /{page}")
            failed |= size > MAX_BYTES
        if tab.requests_blocked:
            print(f"screenshot: {tab.requests_blocked} request(s) for something outside the site", file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
