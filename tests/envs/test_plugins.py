"""Env plugins: the ``turnkit.envs`` entry points, ``--import``, Gymnasium's ``module:env-id`` form, safe names.

The plugin package (tests/fixtures/turnkit_plugin_example) is installed with ``pip install -e`` into a
throwaway venv that sees this interpreter's packages, never into the interpreter running the tests. Every
``turnkit`` command runs in a subprocess with ``PYTHONPATH`` set to this checkout, so the turnkit under test
is the one imported.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium
import pytest

from turnkit.cli import main
from turnkit.envs.names import safe_name
from turnkit.envs.plugins import Plugin, PluginWarning, import_env_module, load_plugins
from turnkit.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "turnkit_plugin_example"
DOC = REPO / "docs" / "writing-an-env.md"
BUILTIN = ("turnkit/CollabCode-v0", "turnkit/MathEpisodes-v0", "turnkit/PhysicsPrediction-v0")


def turnkit_cli(
    python: Path | str, *args: str, cwd: Path, pythonpath: tuple[Path, ...] = (), flags: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m turnkit.cli ARGS`` with this checkout (and ``pythonpath``) on PYTHONPATH."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (REPO, *pythonpath))}
    return subprocess.run(
        [str(python), *flags, "-m", "turnkit.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def write_distribution(site_dir: Path, name: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """Write an installed distribution by hand: a ``.dist-info`` folder (what pip leaves) and its modules."""
    dist_info = site_dir / f"{name.replace('-', '_')}-0.1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    lines = [f"{key} = {value}" for key, value in entry_points.items()]
    (dist_info / "entry_points.txt").write_text("[turnkit.envs]\n" + "\n".join(lines) + "\n")
    for module, code in modules.items():
        (site_dir / f"{module}.py").write_text(code)


def doc_lines(kind: str) -> list[str]:
    """The lines of the ```KIND blocks of docs/writing-an-env.md."""
    blocks = re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    return [line for block in blocks for line in block.splitlines()]


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the example plugin installed (editable, from a copy: the checkout stays clean)."""
    root = tmp_path_factory.mktemp("plugin_venv")
    source = root / "turnkit_plugin_example"
    shutil.copytree(FIXTURE, source, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    if sys.prefix != sys.base_prefix:  # running in a venv: --system-site-packages sees the base, add ours
        purelib = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        parents = "; ".join(f"site.addsitedir({p!r})" for p in site.getsitepackages())
        (Path(purelib) / "_turnkit_test_parent.pth").write_text(f"import site; {parents}\n")
    install = [python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
    proc = subprocess.run([*install, "-e", source], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return python


@pytest.fixture(scope="module")
def anagram_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding docs/writing-an-env.md's ``anagram.py``: a plain module, not installed."""
    path = tmp_path_factory.mktemp("anagram")
    code = re.search(r"```python\n(# anagram\.py\n.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert code is not None
    (path / "anagram.py").write_text(code.group(1), encoding="utf-8")
    return path


# --- installed plugins -----------------------------------------------------------------------------------------


def test_installed_plugin_envs_are_listed_without_options(venv_python: Path, tmp_path: Path) -> None:
    proc = turnkit_cli(venv_python, "list", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    ids = [line.split()[0] for line in lines]
    assert set(BUILTIN) <= set(ids)
    # both entry-point forms: the module (example) and the function (example_more); built-ins come first
    assert ids[-2:] == ["example_plugin/Echo-v0", "example_plugin/EchoAgain-v0"]
    echo = lines[ids.index("example_plugin/Echo-v0")]
    assert echo.split(None, 1)[1] == "Reply with the word you are shown; one try.  [turnkit-plugin-example]"


def test_eval_and_play_run_a_plugin_env_without_options(venv_python: Path, tmp_path: Path) -> None:
    proc = turnkit_cli(
        venv_python, "eval", "example_plugin/Echo-v0", "--agent", "random", "--episodes", "2", "--quiet", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "runs" / "eval-example_plugin_Echo-v0-id-s0"
    assert f"-> runs/{out.name}" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 2 and summary["env_id"] == "example_plugin/Echo-v0"
    trajectories = (out / "trajectories.jsonl").read_text().splitlines()
    assert len(trajectories) == 2

    play = subprocess.run(
        [venv_python, "-m", "turnkit.cli", "play", "example_plugin/EchoAgain-v0", "--seed", "3"],
        input="cedar\n",
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert play.returncode == 0, play.stderr
    word = re.search(r"Reply with the word (\w+) and nothing else", play.stdout)
    assert word is not None
    assert ("success" if word.group(1) == "cedar" else "failure") in play.stdout.splitlines()[-1]


def test_without_the_plugin_installed_the_env_is_unknown(tmp_path: Path) -> None:
    """The control: the same command in this interpreter, where the plugin is not installed, fails."""
    proc = turnkit_cli(sys.executable, "eval", "example_plugin/Echo-v0", "--agent", "random", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("turnkit: error: ") and "example_plugin" in proc.stderr
    assert "example_plugin" not in turnkit_cli(sys.executable, "list", cwd=tmp_path).stdout


def test_broken_plugins_warn_and_the_rest_still_loads(venv_python: Path, tmp_path: Path) -> None:
    site_dir = tmp_path / "site"
    write_distribution(site_dir, "my-envs", {"my_envs": "my_envs.anagram"}, {})  # the package lacks the module
    (site_dir / "my_envs").mkdir()
    (site_dir / "my_envs" / "__init__.py").write_text("")
    half = (
        "import gymnasium\n\n"
        "def register():\n"
        "    gymnasium.register(id='broken/Half-v0', entry_point='broken_plugin:Nothing')\n"
        "    raise ValueError('no tasks configured')\n\n"
        "NUMBER = 3\n"
    )
    write_distribution(
        site_dir,
        "broken-plugin",
        {"raises": "broken_plugin:register", "not_callable": "broken_plugin:NUMBER"},
        {"broken_plugin": half},
    )
    proc = turnkit_cli(venv_python, "list", cwd=tmp_path, pythonpath=(site_dir,))
    assert proc.returncode == 0, proc.stderr
    ids = [line.split()[0] for line in proc.stdout.splitlines()]
    assert set(BUILTIN) | {"example_plugin/Echo-v0", "example_plugin/EchoAgain-v0"} <= set(ids)
    assert "broken/Half-v0" not in ids  # registered before the plugin failed: undone
    warnings_ = proc.stderr.splitlines()
    expected = (
        "turnkit: warning: skipped env plugin: entry point 'not_callable = broken_plugin:NUMBER' (group "
        "turnkit.envs) of distribution 'broken-plugin 0.1.0' failed: TypeError: broken_plugin:NUMBER is a int, "
        "not a module or a function",
        "turnkit: warning: skipped env plugin: entry point 'raises = broken_plugin:register' (group turnkit.envs) "
        f"of distribution 'broken-plugin 0.1.0' failed: ValueError: no tasks configured (at {site_dir}/"
        "broken_plugin.py:5)",
    )
    assert warnings_[:2] == list(expected)
    # the message docs/writing-an-env.md shows, word for word
    assert warnings_[2:] == [line for line in doc_lines("text") if line.startswith("turnkit: warning:")]


@pytest.mark.filterwarnings("ignore:.*Overriding environment turnkit/MathEpisodes-v0")  # gymnasium's, expected
def test_load_plugins_in_process_warns_once_and_undoes_a_failed_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = "turnkit.envs"  # the real group: importlib.metadata finds the .dist-info on sys.path
    write_distribution(
        tmp_path,
        "override-plugin",
        {"override": "tk_test_override:register"},
        {
            "tk_test_override": "import gymnasium\n\n"
            "def register():\n"
            "    gymnasium.register(id='turnkit/MathEpisodes-v0', entry_point='nowhere:Nothing')\n"
            "    raise RuntimeError('half done')\n"
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("turnkit.envs.plugins._loaded", {})
    original = gymnasium.spec("turnkit/MathEpisodes-v0")
    with pytest.warns(PluginWarning, match=r"'override = tk_test_override:register'.*RuntimeError: half done"):
        plugins = load_plugins(group=group)
    ours = [p for p in plugins if p.distribution == "override-plugin 0.1.0"]
    assert ours == [
        Plugin(
            "override-plugin 0.1.0",
            "override",
            "tk_test_override:register",
            error=f"RuntimeError: half done (at {tmp_path}/tk_test_override.py:5)",
        )
    ]
    assert gymnasium.spec("turnkit/MathEpisodes-v0") is original  # the overridden spec is restored
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_plugins(group=group) is plugins  # once per process: no second load, no second warning


# --- --import and the module:env-id form ----------------------------------------------------------------------


def test_import_option_registers_a_module_on_pythonpath(anagram_dir: Path, tmp_path: Path) -> None:
    proc = turnkit_cli(sys.executable, "--import", "anagram", "list", cwd=tmp_path, pythonpath=(anagram_dir,))
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.splitlines()[-1]
    assert re.split(r"\s{2,}", last) == [
        "my_envs/Anagram-v0",
        "Unscramble a hidden word in at most three guesses.",
        "[anagram]",
    ]
    # the line docs/writing-an-env.md shows for the installed version of the same module (column width aside)
    shown = [" ".join(line.split()) for line in doc_lines("text")]
    assert " ".join(last.replace("[anagram]", "[my-envs]").split()) in shown

    proc = turnkit_cli(
        sys.executable,
        *("--import", "anagram", "eval", "my_envs/Anagram-v0", "--agent", "scripted:apple", "--episodes", "4"),
        "--quiet",
        cwd=tmp_path,
        pythonpath=(anagram_dir,),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("my_envs/Anagram-v0 [id] agent=scripted:apple episodes=4: success ")
    assert (tmp_path / "runs" / "eval-my_envs_Anagram-v0-id-s0" / "summary.json").is_file()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="python -P (no script dir on sys.path) is 3.11+")
def test_import_option_finds_a_module_in_the_current_directory(anagram_dir: Path) -> None:
    """As the ``turnkit`` console script runs: without the current directory on sys.path (``python -P``)."""
    proc = turnkit_cli(sys.executable, "--import", "anagram", "list", cwd=anagram_dir, flags=("-P",))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("my_envs/Anagram-v0 ")


def test_import_option_failures_name_the_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))  # also restores sys.path, which --import may extend
    assert main(["--import", "anagrma", "list"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "turnkit: error: --import: cannot import env module 'anagrma': ModuleNotFoundError: No module named 'anagrma'\n"
    )
    assert err.rstrip() in doc_lines("text")  # as docs/writing-an-env.md shows it

    (tmp_path / "tk_test_raises.py").write_text("import gymnasium\n\nraise KeyError('difficulty')\n")
    assert main(["--import", "turnkit.envs.registration", "--import", "tk_test_raises", "list"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "turnkit: error: --import: cannot import env module 'tk_test_raises': KeyError: 'difficulty' "
        f"(at {tmp_path}/tk_test_raises.py:3)\n"
    )
    with pytest.raises(ConfigError, match="cannot import env module 'tk_test_raises'"):
        import_env_module("tk_test_raises")  # a failed import is not remembered as done


def test_module_env_id_form_works_and_names_folders_safely(anagram_dir: Path, tmp_path: Path) -> None:
    command = ("eval", "anagram:my_envs/Anagram-v0", "--agent", "random", "--episodes", "2", "--quiet")
    proc = turnkit_cli(sys.executable, *command, cwd=tmp_path, pythonpath=(anagram_dir,))
    assert proc.returncode == 0, proc.stderr
    folder = "runs/eval-anagram_my_envs_Anagram-v0-id-s0"
    assert (tmp_path / folder / "summary.json").is_file()
    assert os.listdir(tmp_path / "runs") == [Path(folder).name]
    assert f"`{folder}`" in DOC.read_text(encoding="utf-8")
    assert "turnkit eval anagram:my_envs/Anagram-v0 --agent random --episodes 10" in doc_lines("bash")

    proc = turnkit_cli(sys.executable, "eval", "anagrma:my_envs/Anagram-v0", "--agent", "random", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        "turnkit: error: env id 'anagrma:my_envs/Anagram-v0': cannot import env module 'anagrma': "
        "ModuleNotFoundError: No module named 'anagrma'\n"
    )


# --- safe names -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("turnkit/MathEpisodes-v0", "turnkit_MathEpisodes-v0"),  # unchanged from the names turnkit always used
        ("my_pkg.envs:Grid-v0", "my_pkg.envs_Grid-v0"),
        ("my_pkg.envs:ns/Grid-v0", "my_pkg.envs_ns_Grid-v0"),
        ("a/b", "a_b"),
        ("a\\b", "a_b"),
        ('x<y>z:"q"|w?*', "x_y_z__q__w__"),
        ("tab\there\nnul\x00", "tab_here_nul_"),
        ("Grid-v0.", "Grid-v0"),
        ("name. . ", "name"),
        ("..", "_"),
        ("", "_"),
        ("CON", "CON_"),
        ("con", "con_"),
        ("Com1", "Com1_"),
        ("LPT9.envs:X-v0", "LPT9_.envs_X-v0"),
        ("nul.txt", "nul_.txt"),
        ("CONSOLE", "CONSOLE"),
        ("COM10", "COM10"),
        ("émoji/Δ-v0", "émoji_Δ-v0"),
    ],
)
def test_safe_name(text: str, expected: str) -> None:
    assert safe_name(text) == expected


def test_safe_names_are_single_creatable_path_components(tmp_path: Path) -> None:
    nasty = ["my_pkg.envs:Grid-v0", "../../etc", "a/b\\c", " . ", 'w<i>n:d"o/w\\s|?*', "x\x1fy", "AUX.envs:A-v0"]
    for text in nasty:
        name = safe_name(text)
        assert not set('<>:"/\\|?*') & set(name) and name.strip(". ") and name[-1] not in ". "
        path = tmp_path / name
        path.mkdir()
        assert path.parent == tmp_path and path.name == name
