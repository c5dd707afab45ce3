"""The machine record of result files: what it holds, and that the float path it reports is the one in use."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from studies.common.provenance import LOCK_FILE, machine_record, write_result

ROOT = Path(__file__).resolve().parents[2]
"""The repository root (the subprocess imports ``studies.common`` from there)."""


def test_record_fields(tmp_path):
    record = machine_record(command=["python", "studies/s.py", "--out", "a b"])
    assert record["command"] == "python studies/s.py --out 'a b'"
    for key in ("cpu_model", "cpu_count", "threads", "float_path", "torch", "transformers", "python"):
        assert record[key], key
    if LOCK_FILE.is_file():
        assert record["lock_sha256"] == hashlib.sha256(LOCK_FILE.read_bytes()).hexdigest()[:16]


def test_float_path_follows_aten_cpu_capability(tmp_path):
    code = "import json; from studies.common.provenance import machine_record; print(json.dumps(machine_record(['x'])))"
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", "TURNKIT_CACHE": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    record = json.loads(out.strip().splitlines()[-1])
    assert record["float_path"] == "DEFAULT"
    assert record["aten_cpu_capability"] == "default"
    assert record["turnkit_cache"] == str(tmp_path)  # which cached SFT start the run loaded


def test_write_result_adds_machine_and_wall_time(tmp_path):
    path = write_result(tmp_path / "sub" / "r.json", {"x": 1, "wall_s": -5}, started=time.time() - 2.0, command=["c"])
    data = json.loads(path.read_text())
    assert data["x"] == 1
    assert data["machine"]["command"] == "c"
    assert 2.0 <= data["wall_s"] < 60


def test_write_result_with_a_given_record(tmp_path):
    record = {**machine_record(command=["c"]), "bwrap": "0.8"}
    data = json.loads(write_result(tmp_path / "r.json", {"x": 2}, started=time.time(), record=record).read_text())
    assert data["machine"]["bwrap"] == "0.8" and data["machine"]["command"] == "c"
