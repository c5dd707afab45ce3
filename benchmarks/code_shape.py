"""The shape of the code a newcomer reads: lines per package and the files one GRPO step runs through.

A GRPO step is everything ``turnkit.train.loop`` runs from drawing the step's task seeds to logging its record
(rollouts, critics, advantages, the update), on the tiny model with one step and no evaluation, up to the
checkpoint.
"Files" are the ``turnkit/`` source files whose Python functions are called in that window, counted with
``sys.setprofile``. Set-up (building the model, the run folder) and the closing plots are outside the window.

Usage::

    python benchmarks/code_shape.py                    # this checkout
    python benchmarks/code_shape.py --critic oracle    # the step with a critic and its estimator
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "turnkit"


def line_counts() -> dict[str, int]:
    """Lines of ``turnkit/`` and of ``turnkit/train``."""

    def lines(folder: Path) -> int:
        return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in folder.rglob("*.py"))

    return {"turnkit": lines(PACKAGE), "turnkit/train": lines(PACKAGE / "train")}


@contextmanager
def step_window(files: set[str]) -> Iterator[None]:
    """Record the ``turnkit/`` files called from the first task-seed draw until the checkpoint or closing plots."""
    state = {"on": False}
    package = str(PACKAGE)

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        name, path = frame.f_code.co_name, frame.f_code.co_filename
        if name == "sample_task_seeds" and path.endswith("loop.py"):
            state["on"] = True
        elif name in ("save_checkpoint", "finish") and path.endswith(("loop.py", "run.py")):
            state["on"] = False
        if state["on"] and path.startswith(package):
            files.add(str(Path(path).relative_to(ROOT)))

    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)


def step_files(critic: str | None) -> list[str]:
    """The ``turnkit/`` files one GRPO step of the tiny model calls into."""
    from turnkit.train.config import TrainConfig
    from turnkit.train.loop import train

    with tempfile.TemporaryDirectory() as out:
        values: dict[str, Any] = {"steps": 1, "groups_per_step": 2, "out_dir": out, "eval": {"every": 0}}
        values["log"] = {"checkpoint_every": 1000, "rollouts_every": 0}
        if critic:
            values["critic"] = {critic: {"weight": 1.0}}
        cfg = TrainConfig.from_dict(values)
        files: set[str] = set()
        with step_window(files):
            train(cfg, progress=False)
    return sorted(files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--critic", default=None, help="a critic table to add, e.g. oracle")
    parser.add_argument("--list", action="store_true", help="print the files too")
    args = parser.parse_args()
    files = step_files(args.critic)
    outside_envs = [f for f in files if not f.startswith("turnkit/envs/")]
    result = {**line_counts(), "critic": args.critic, "files_in_one_grpo_step": len(files)}
    result["without_env_files"] = len(outside_envs)
    print(json.dumps(result))
    if args.list:
        print("\n".join(files))


if __name__ == "__main__":
    main()
