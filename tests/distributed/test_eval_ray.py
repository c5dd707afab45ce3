"""``turnkit eval --ray``: the same episodes, files and summary as local evaluation."""

from __future__ import annotations

import json
from pathlib import Path

from turnkit.cli import main


def test_eval_on_ray_workers_writes_what_local_eval_writes(ray_cluster: object, tmp_path: Path) -> None:
    args = ["eval", "turnkit/MathEpisodes-v0", "--agent", "oracle", "--episodes", "10", "--seed", "5", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    on_ray = ["--ray", "local", "--ray-workers", "3", "--batch-size", "2"]
    assert main([*args, "--out", str(tmp_path / "ray"), *on_ray]) == 0
    local, ray = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("local", "ray"))
    assert {k: v for k, v in ray.items() if k != "wall_s"} == {k: v for k, v in local.items() if k != "wall_s"}
    lines = [(tmp_path / d / "trajectories.jsonl").read_text().splitlines() for d in ("local", "ray")]
    assert lines[0] == lines[1] and len(lines[0]) == 10
