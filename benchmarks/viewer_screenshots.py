"""Take the screenshots of docs/viewer.md with turnkit's own Chromium: one PNG per view of `turnkit view`.

    python benchmarks/viewer_screenshots.py                      # small folders written by turnkit's writers
    python benchmarks/viewer_screenshots.py --root runs          # your own folders (give --runs/--episodes/...)

Writes docs/img/viewer-runs.png, viewer-episodes.png, viewer-search.png and viewer-broken.png (palette PNGs,
well under 300 KB each).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.view import builders
from tests.view.conftest import forward, visit
from turnkit.browser import Tab
from turnkit.view import make_server


def demo_root(base: Path) -> Path:
    """The folders the docs show: two runs, an eval with privileged data, a synth folder, a damaged run."""
    builders.write_run(base / "train", steps=40)
    builders.write_run(base / "train-lr", steps=30)
    builders.write_privileged_eval(base / "eval", n=40)
    builders.write_synth(base / "synth", seeds=(0, 1, 2))
    builders.write_broken(base / "damaged")
    return base


def save(pixels: np.ndarray, path: Path) -> int:
    """Write a screenshot as a 128-colour palette PNG; returns its size in bytes."""
    image = Image.fromarray(np.asarray(pixels)).quantize(colors=128, method=Image.Quantize.MEDIANCUT)
    image.save(path, optimize=True)
    return path.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, help="folder to show (default: demo folders in a temp dir)")
    parser.add_argument("--out", type=Path, default=Path("docs/img"))
    parser.add_argument("--runs", default="runs?id=train&vs=train-lr", help="fragment of the Runs picture")
    parser.add_argument("--episodes", default="episodes?id=eval&sort=return&order=desc&ep=3&priv=1")
    parser.add_argument("--search", default="search?id=synth&tree=iter_000/seed_1&node=3")
    parser.add_argument("--broken", default="episodes?id=damaged/bad-eval&ep=0")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.root or demo_root(Path(tmp))
        server = make_server(root, port=0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        args.out.mkdir(parents=True, exist_ok=True)
        try:
            with Tab(forward, viewport=(1280, 860), timeout_s=15.0) as tab:
                for name in ("runs", "episodes", "search", "broken"):
                    visit(tab, server, getattr(args, name))
                    path = args.out / f"viewer-{name}.png"
                    print(f"{path}: {save(tab.screenshot(), path) / 1024:.0f} KB")
        finally:
            server.shutdown()
            server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
