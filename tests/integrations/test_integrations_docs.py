"""Every code block of docs/integrations.md runs, with small settings, against real servers on loopback.

Each fenced ``python`` or ``bash`` block is one test case. The blocks are run as written except for the
placeholders a reader fills in (``runs/tiny-model``, ``path/to/model``, ``http://127.0.0.1:8000``, output
folders) and the run lengths (``max_steps``), which :data:`SMALL` shortens. A new block without a runner fails
here, so the page cannot gain a snippet that is never run.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from turnkit.models.names import resolve_model
from turnkit.models.threads import torch_threads

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "integrations.md"
BLOCKS = re.findall(r"^```(python|bash)\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)
SMALL = {r"max_steps=\d+": "max_steps=2", r"10\*\*6 \+ 64": "10**6 + 8"}
"""Run lengths the tests shorten (pattern -> replacement)."""
pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:.*gradient_checkpointing.* is deprecated:FutureWarning"),
]


def block_id(block: tuple[str, str]) -> str:
    kind, code = block
    first = next(line for line in code.splitlines() if line.strip() and not line.startswith(("import", "from")))
    return f"{kind}:{first[:40]}"


@pytest.fixture(scope="module", autouse=True)
def offline_on_one_thread() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp, torch_threads(1):
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
        mp.setenv("TQDM_DISABLE", "1")
        yield


@pytest.fixture(scope="module")
def model_dir() -> str:
    """The embedded policy's folder, the start model the TRL section trains (built once, then cached)."""
    return str(resolve_model("tiny", progress=False))


@pytest.fixture(scope="module")
def math_server() -> Iterator[str]:
    """A turnkit OpenEnv server of MathEpisodes, for the blocks that talk to one on port 8000."""
    pytest.importorskip("openenv.core", reason="openenv-core is not installed (pip install 'turnkit[openenv]')")
    from turnkit.integrations.openenv import EnvServer

    with EnvServer("turnkit/MathEpisodes-v0") as server:
        yield server.url


def bash_argv(code: str) -> list[str]:
    """A bash block's one command as argv (continuation lines joined, comments dropped)."""
    lines = [re.sub(r"\s+#.*$", "", line).rstrip("\\").strip() for line in code.splitlines()]
    return shlex.split(" ".join(lines))


@pytest.fixture(scope="module")
def model_server(model_dir) -> Iterator[tuple[str, str]]:
    """The page's ``turnkit serve ...`` block, run as written on a free port: its API root and served model name.

    The model server of the vf-eval block (whose ``--model`` must be the name it serves). ``model_dir`` first:
    the embedded policy is built once, here, not by the server.
    """
    [argv] = [a for kind, code in BLOCKS if kind == "bash" and (a := bash_argv(code))[:2] == ["turnkit", "serve"]]
    argv[argv.index("--port") + 1] = "0"
    as_in_a_terminal = (  # Ctrl-C stops it even when this test runs with SIGINT ignored (a background job)
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from turnkit.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", as_in_a_terminal, *argv[1:], "--threads", "1"],
        env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        seen = ""
        while not (match := re.search(r"at (http://127\.0\.0\.1:\d+/v1) as model '([^']+)'", seen)):
            line = proc.stdout.readline()  # warnings may come first
            assert line, seen
            seen += line
        yield match.group(1), match.group(2)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0 and "Traceback" not in rest, rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def fill(code: str, **values: str) -> str:
    """``code`` with its placeholders replaced and its run lengths shortened."""
    for placeholder, value in values.items():
        code = code.replace(placeholder, value)
    for pattern, small in SMALL.items():
        code = re.sub(pattern, small, code)
    return code


def run_python(code: str, cwd: Path) -> dict[str, Any]:
    scope: dict[str, Any] = {"__name__": "__docs__"}
    before = Path.cwd()
    os.chdir(cwd)
    try:
        exec(compile(code, str(DOC), "exec"), scope)
    finally:
        os.chdir(before)
    return scope


def check_grpo(scope: dict[str, Any]) -> None:
    """The TRL example trained from the embedded policy, logging every step's reward, with a learning signal."""
    trainer, rollout = scope["trainer"], scope["rollout"]
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert trainer.state.global_step == 2 and [h["step"] for h in logs] == [1, 2]  # logging_steps=1
    assert all(math.isfinite(h["loss"]) and 0 <= h["reward"] <= 1 for h in logs)
    assert all(key in h for h in logs for key in ("reward_std", "env/success", "env/turns"))
    assert any(h["frac_reward_zero_std"] < 1 for h in logs)  # some group had a reward spread: a gradient
    # the last rollout call was the final evaluation, on the held-out seeds, with multi-turn episodes
    assert {e.trajectory.seed for e in rollout.last_episodes} <= set(range(10**6, 10**6 + 8))
    assert max(len(e.trajectory.steps) for e in rollout.last_episodes) >= 2
    rollout.close()


@pytest.mark.parametrize("block", BLOCKS, ids=[block_id(b) for b in BLOCKS])
def test_docs_block_runs(block, request, tmp_path):
    kind, code = block
    if kind == "python":
        run_python_block(code, request, tmp_path)
    else:
        run_bash_block(code, request, tmp_path)


def run_python_block(code: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    values: dict[str, str] = {"runs/trl-grpo": str(tmp_path / "trl-grpo")}
    if "runs/tiny-model" in code or "path/to/model" in code:
        model = request.getfixturevalue("model_dir")
        values |= {"runs/tiny-model": model, "path/to/model": model}
    if "127.0.0.1:8000" in code:
        values["http://127.0.0.1:8000"] = request.getfixturevalue("math_server")
    if "GRPOTrainer(" in code:
        pytest.importorskip("trl")
    if "verifiers" in code:
        pytest.importorskip("verifiers.v1", reason="verifiers is not installed (pip install 'turnkit[verifiers]')")
    if "openenv" in code:
        pytest.importorskip("openenv.core", reason="openenv-core is not installed (pip install 'turnkit[openenv]')")
    scope = run_python(fill(code, **values), tmp_path)
    if "GRPOTrainer(" in code:
        check_grpo(scope)


def run_bash_block(code: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    argv = bash_argv(code)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # a fresh process: this checkout's turnkit and turnkit_verifiers
    if argv[:2] == ["turnkit", "serve-env"]:
        pytest.importorskip("openenv.core", reason="openenv-core is not installed (pip install 'turnkit[openenv]')")
        serve_env(argv, env)
    elif argv[:2] == ["turnkit", "serve"]:  # the model server of the vf-eval block: it starts, names its model
        url, model = request.getfixturevalue("model_server")
        assert url.endswith("/v1") and model == argv[2]
    elif argv == ["python", "-m", "turnkit.integrations.verifiers"]:
        pytest.importorskip("verifiers.v1", reason="verifiers is not installed (pip install 'turnkit[verifiers]')")
        done = subprocess.run([sys.executable, *argv[1:]], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0 and "ready to run offline" in done.stdout, done.stdout + done.stderr
    elif argv[0] == "vf-eval":
        pytest.importorskip("verifiers.v1", reason="verifiers is not installed (pip install 'turnkit[verifiers]')")
        url, model = request.getfixturevalue("model_server")
        assert argv[argv.index("--model") + 1] == model  # the name the server serves
        argv = [a.replace("http://127.0.0.1:8000/v1", url) for a in argv] + ["--output-dir", str(tmp_path / "vf")]
        done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        [traces] = list((tmp_path / "vf").glob("*/traces.jsonl"))
        rows = [json.loads(line) for line in traces.read_text().splitlines()]
        assert rows and all(row["ok"] for row in rows), rows[:1]
        seeds = sorted(trace["task"]["data"]["seed"] for row in rows for trace in row["traces"])
        assert seeds == list(range(len(seeds))) and len(seeds) == int(argv[argv.index("--env.taskset.num-seeds") + 1])
    else:
        pytest.fail(f"docs/integrations.md has a bash block this test cannot run: {code!r}")


def serve_env(argv: list[str], env: dict[str, str]) -> None:
    """``turnkit serve-env``: on port 0, it prints its URL, serves the env with its kwargs, and Ctrl-C stops it
    cleanly."""
    argv = [sys.executable, "-m", "turnkit.cli", *argv[1:]]
    argv[argv.index("--port") + 1] = "0"
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        seen = ""
        while not (match := re.search(r"over OpenEnv at (http://127\.0\.0\.1:\d+)", seen)):
            line = proc.stdout.readline()  # warnings may come first; the URL line comes once the port is bound
            assert line, seen
            seen += line
        with urllib.request.urlopen(match.group(1) + "/turnkit/spec", timeout=30) as reply:
            spec = json.load(reply)
        assert spec["env_id"] == argv[4] and spec["split"] == "ood"
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode in (0, 130) and "Traceback" not in rest, rest  # 130: the shell's code for Ctrl-C
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
