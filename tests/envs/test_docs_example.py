"""docs/writing-an-env.md stays true: its files run, and the output it shows is what they print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "writing-an-env.md"
LEAKY_TASK_ID = 'task_id=f"anagram-{word}",'


def python_files(markdown: str) -> dict[str, str]:
    """The ```python blocks whose first line is ``# <name>.py``, by file name."""
    blocks = re.findall(r"```python\n(.*?)```", markdown, flags=re.DOTALL)
    files = {}
    for block in blocks:
        header = re.match(r"# (\w+\.py)\n", block)
        if header:
            files[header.group(1)] = block
    return files


def text_blocks(markdown: str) -> list[str]:
    return re.findall(r"```text\n(.*?)```", markdown, flags=re.DOTALL)


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def workdir(doc: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("doc_example")
    for name, code in python_files(doc).items():
        (path / name).write_text(code, encoding="utf-8")
    return path


def run(workdir: Path, script: str) -> str:
    proc = subprocess.run([sys.executable, script], cwd=workdir, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_doc_has_the_example_files(doc: str) -> None:
    assert set(python_files(doc)) == {"anagram.py", "check_anagram.py", "fixed_tasks.py"}


def test_env_is_under_50_lines(doc: str) -> None:
    assert len(python_files(doc)["anagram.py"].splitlines()) <= 50


def test_checked_env_prints_the_documented_report(doc: str, workdir: Path) -> None:
    out = run(workdir, "check_anagram.py")
    shown = next(block for block in text_blocks(doc) if block.startswith("check_env("))
    status_and_name = [line.split()[:2] for line in shown.splitlines()[1:]]
    actual = [line.split()[:2] for line in out.splitlines()[1:10]]
    assert out.startswith("check_env(my_envs/Anagram-v0): OK: 9 passed in ")
    assert actual == status_and_name
    conversation = next(block for block in text_blocks(doc) if block.startswith("     user:"))
    assert out.endswith(conversation)


def test_documented_failure_message_is_what_the_checker_says(doc: str, workdir: Path) -> None:
    code = python_files(doc)["anagram.py"]
    original = re.search(r"task_id=f\"anagram-\{self.split\}-\{rng.integers\(10\*\*9\)\}\",", code)
    assert original is not None
    (workdir / "leaky.py").write_text(
        code.replace(original.group(0), LEAKY_TASK_ID).replace("anagram:AnagramEnv", "leaky:AnagramEnv"),
        encoding="utf-8",
    )
    (workdir / "check_leaky.py").write_text(
        "import gymnasium, leaky, turnkit\n"
        "try:\n"
        "    turnkit.check_env(gymnasium.make('my_envs/Anagram-v0'), cross_process=False)\n"
        "except turnkit.errors.ContractError as exc:\n"
        "    print(exc)\n",
        encoding="utf-8",
    )
    shown = next(block for block in text_blocks(doc) if "fails check" in block)
    assert run(workdir, "check_leaky.py") == shown


def test_fixed_task_snippet_runs(workdir: Path) -> None:
    assert run(workdir, "fixed_tasks.py").splitlines() == ["Unscramble 'tca'.", "(1.0, True)"]
