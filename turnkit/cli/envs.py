"""``turnkit list | play | eval | bench``: the commands that look at envs and agents without training.

Every ``turnkit`` command sees the built-in envs, the envs of installed plugins (the ``turnkit.envs``
entry-point group, see :mod:`turnkit.envs.plugins`) and those of ``--import MODULE``; Gymnasium's
``module:env-id`` form (``turnkit eval my_pkg.envs:MyEnv-v0``) imports the module itself.

Tools are env arguments like any other: ``turnkit play turnkit/CollabCode-v0 --env-kwarg 'tools=["python"]'``
gives the player a python session, and ``turnkit play`` shows each tool call and its reply readably
(:func:`show_action`, :func:`show_observation`).

Example:
    >>> parse_env_kwargs(["difficulty=2"])
    {'difficulty': 2}
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium
from gymnasium.envs.registration import load_env_creator

import turnkit
from turnkit.cli.agents import add_sampling_args
from turnkit.envs.names import safe_name
from turnkit.envs.plugins import env_origins, import_env_module, load_plugins, plugin_failure
from turnkit.errors import ConfigError
from turnkit.tools import ToolCall, parse_tool_call


def load_env_modules(imports: Sequence[str], env_id: str | None = None) -> None:
    """Register the envs of installed plugins and of ``--import`` modules; ``main`` runs it before a command.

    A plugin that fails is skipped with a warning on stderr (see :mod:`turnkit.envs.plugins`); a module named
    by ``--import``, or by an env id of Gymnasium's ``module:env-id`` form, that fails to import is an error
    naming the module, since the user asked for it. For those modules the current directory is appended to
    ``sys.path`` (last, so installed packages win; only then, so a stray ``wandb/`` folder cannot pose as a
    package otherwise): ``python -m`` puts it there, the ``turnkit`` console script does not, and
    ``turnkit --import anagram ...`` next to ``anagram.py`` should work either way.

    Args:
        imports: Module names from ``--import``, imported in order after the plugins.
        env_id: The command's env id, if it has one; its ``module`` part is imported here when it has one.

    Raises:
        ConfigError: A module cannot be imported.

    Example:
        >>> load_env_modules(["turnkit.envs.registration"], env_id="turnkit.envs.registration:Foo-v0")
        >>> load_env_modules([], env_id="xyz:Foo-v0")
        Traceback (most recent call last):
        ...
        turnkit.errors.ConfigError: env id 'xyz:Foo-v0': cannot import env module 'xyz': ModuleNotFoundError: ...
    """
    for plugin in load_plugins(warn=False):
        if plugin.error is not None:
            print(f"turnkit: warning: {plugin_failure(plugin)}", file=sys.stderr)
    modules = [(module, "--import") for module in imports]
    if env_id is not None and ":" in env_id:
        modules.append((env_id.partition(":")[0], f"env id {env_id!r}"))
    if modules and not {"", os.getcwd()} & set(sys.path):
        sys.path.append(os.getcwd())
    for module, source in modules:
        try:
            import_env_module(module)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from exc


def _listed_ids() -> tuple[list[str], dict[str, str]]:
    """The built-in ``turnkit/`` ids, then the plugin and ``--import`` ids; and where the latter came from."""
    origins = env_origins()
    builtin = sorted(i for i in gymnasium.registry if i.startswith("turnkit/") and i not in origins)
    return builtin + sorted(origins), origins


def _describe(env_id: str) -> str:
    """The first line of the env class's docstring, else of its module's."""
    entry_point = gymnasium.spec(env_id).entry_point
    if entry_point is None:
        return ""
    try:
        creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    except Exception as exc:  # a plugin's broken env must not break `turnkit list`
        return f"(cannot import {entry_point}: {type(exc).__name__}: {exc})"
    module = sys.modules.get(getattr(creator, "__module__", None) or "")
    doc = (getattr(creator, "__doc__", None) or getattr(module, "__doc__", None) or "").strip().splitlines()
    return doc[0] if doc else ""


def parse_env_kwargs(pairs: Sequence[str]) -> dict[str, Any]:
    """Parse ``--env-kwarg KEY=VALUE`` pairs; values are JSON when they parse, else strings.

    Example:
        >>> parse_env_kwargs(["difficulty=3", "kinds=[\\"word\\"]", "split=ood"])
        {'difficulty': 3, 'kinds': ['word'], 'split': 'ood'}
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--env-kwarg expects KEY=VALUE, got {pair!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw  # a bare string
    return out


def cmd_list(args: argparse.Namespace) -> int:
    """Print the built-in, plugin and ``--import`` env ids with one-line descriptions (and their origin)."""
    ids, origins = _listed_ids()
    width = max(len(i) for i in ids)
    for env_id in ids:
        notes = [_describe(env_id), f"[{origins[env_id]}]" if env_id in origins else ""]
        print(f"{env_id:<{width}}  {'  '.join(n for n in notes if n)}".rstrip())
    return 0


def tag_tools(env: gymnasium.Env) -> dict[str, str]:
    """The tag-form tools of an env (name -> primary argument), for :func:`show_action`; empty without tools.

    Example:
        >>> env = gymnasium.make("turnkit/CollabCode-v0", tools=["python", "submit"])
        >>> tag_tools(env), tag_tools(gymnasium.make("turnkit/CollabCode-v0"))
        ({'python': 'code', 'submit': 'answer'}, {})
        >>> env.close()
    """
    toolbox = getattr(env.unwrapped, "toolbox", None)
    if toolbox is None:
        return {}
    return {spec.name: spec.primary for spec in toolbox.specs if spec.primary}


def show_action(text: str, tags: Mapping[str, str] | None = None) -> str | None:
    r"""How a message that calls a tool is shown: ``[tool call] NAME:`` and the call's input indented.

    The input is the call's only argument when it has one (the code, the command, the answer), else the
    arguments as JSON. Text around the call is left out (the player typed it; a transcript shows it).

    Args:
        text: The agent's message.
        tags: Tool name -> primary argument, for the ``<name>...</name>`` form (see :func:`tag_tools`).

    Returns:
        The rendering, or ``None`` when the message calls no tool (or starts a call it does not finish).

    Example:
        >>> print(show_action("Let me try it. <python>def f(x):\n    return 2 * x\nf(21)</python>", {"python": "code"}))
        [tool call] python:
            def f(x):
                return 2 * x
            f(21)
        >>> print(show_action('<tool_call>{"name": "shell", "arguments": {"command": "ls"}}</tool_call>'))
        [tool call] shell:
            ls
        >>> show_action("I WANT TO ANSWER: def f(): pass", {"python": "code"}) is None
        True
    """
    call = parse_tool_call(text, tags or {})
    if not isinstance(call, ToolCall):
        return None
    args = call.arguments
    if isinstance(args, Mapping) and len(args) == 1 and isinstance(next(iter(args.values())), str):
        body = next(iter(args.values()))
    else:
        body = json.dumps(args, ensure_ascii=False, indent=2)
    return f"[tool call] {call.name}:\n{_indented(body)}"


def show_observation(observation: str, info: Mapping[str, Any]) -> str:
    r"""How an env message is shown: ``[env] TEXT``, or for a tool's reply ``[tool NAME · STATUS]`` and the output.

    Example:
        >>> print(show_observation("42\n", {"tool": {"name": "python", "status": "ok", "truncated": False}}))
        [tool python · ok]
            42
        >>> print(show_observation("Hi.", {"turn": 1}))
        [env] Hi.
    """
    tool = info.get("tool")
    if not isinstance(tool, Mapping):
        return f"[env] {observation}"
    status = str(tool.get("status", "?")) + (", output cut" if tool.get("truncated") else "")
    return f"[tool {tool.get('name', '?')} · {status}]\n{_indented(observation.rstrip(chr(10)) or '(no output)')}"


def _indented(text: str) -> str:
    return textwrap.indent(text, "    ")  # blank lines stay blank


def cmd_play(args: argparse.Namespace) -> int:
    """Let a person play an env in the terminal; tool calls and their replies are shown as such."""
    env = gymnasium.make(args.env_id, split=args.split, **parse_env_kwargs(args.env_kwarg))
    try:
        return _play(env, args)
    finally:
        env.close()  # a tool session's sandbox must not outlive the game


def _play(env: gymnasium.Env, args: argparse.Namespace) -> int:
    obs, info = env.reset(seed=args.seed)
    tags = tag_tools(env)
    print(f"== {args.env_id} [{args.split}] seed={args.seed} (end a line with '\\' to continue it; Ctrl-D quits)")
    total = 0.0
    while True:
        print(f"\n{show_observation(obs, info)}")
        lines: list[str] = []
        try:
            while True:
                line = input("> " if not lines else ". ")
                if line.endswith("\\"):
                    lines.append(line[:-1])
                    continue
                lines.append(line)
                break
        except EOFError:
            print("\nbye")
            return 0
        action = "\n".join(lines)
        obs, reward, terminated, truncated, info = env.step(action)
        call = show_action(action, tags) if "tool" in info else None
        if call is not None:
            print(call)
        total += float(reward)
        extra = f" invalid={info['invalid_action']}" if "invalid_action" in info else ""
        print(f"[reward {reward:+.3f}, total {total:+.3f}]{extra}")
        if terminated or truncated:
            print(f"\n{show_observation(obs, info)}")
            result = "success" if info.get("success") else "failure"
            print(f"== episode over ({'truncated' if truncated else 'terminated'}): {result}, return {total:.3f}")
            return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """Evaluate an agent and write trajectories + a summary."""
    from turnkit.cli.agents import make_agent, sampling_changes
    from turnkit.models.threads import torch_threads
    from turnkit.rollout.evaluate import evaluate

    out_dir = args.out or f"runs/{safe_name(f'eval-{args.env_id}-{args.split}-s{args.seed}')}"
    common = {
        "episodes": args.episodes,
        "seed": args.seed,
        "split": args.split,
        "batch_size": args.batch_size,
        "env_kwargs": parse_env_kwargs(args.env_kwarg),
        "out_dir": out_dir,
        "progress": not args.quiet,
    }
    sampling = sampling_changes(args)
    if args.ray is not None:  # the same episodes on Ray env workers (docs/scaling.md)
        from turnkit.cli.agents import AgentSpec
        from turnkit.distributed import RayConfig
        from turnkit.distributed.evaluate import evaluate_on_ray

        ray = RayConfig(address=args.ray, workers=args.ray_workers)
        summary = evaluate_on_ray(args.env_id, AgentSpec(args.agent, args.seed, sampling), ray=ray, **common)
    else:
        with torch_threads(args.threads):
            agent = make_agent(args.agent, seed=args.seed, sampling=sampling, progress=not args.quiet)
            summary = evaluate(args.env_id, agent, **common)
    lo, hi = summary.success_ci95
    print(
        f"{args.env_id} [{args.split}] agent={args.agent} episodes={summary.episodes}: "
        f"success {summary.success_rate:.3f} (95% CI {lo:.3f}-{hi:.3f}), mean reward {summary.mean_reward:.3f}, "
        f"errors {summary.errors or 0}, {summary.wall_s:.1f}s -> {out_dir}"
    )
    return 0


def _benchmarks_dir() -> Path:
    for base in (Path.cwd(), Path(turnkit.__file__).resolve().parent.parent):
        if (base / "benchmarks").is_dir():
            return base / "benchmarks"
    raise ConfigError("no benchmarks/ directory found: run `turnkit bench` from a turnkit source checkout")


def cmd_bench(args: argparse.Namespace) -> int:
    """Run ``benchmarks/bench_NAME.py``'s ``main(argv)``."""
    bench_dir = _benchmarks_dir()
    available = sorted(p.stem.removeprefix("bench_") for p in bench_dir.glob("bench_*.py"))
    if args.name not in available:
        raise ConfigError(f"unknown benchmark {args.name!r}; available: {', '.join(available)}")
    path = bench_dir / f"bench_{args.name}.py"
    spec = importlib.util.spec_from_file_location(f"turnkit_bench_{args.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return int(module.main(args.bench_args) or 0)


def add_commands(sub: Any) -> None:
    """Add ``list``, ``play``, ``eval`` and ``bench`` to the ``turnkit`` sub-command parser."""
    sub.add_parser("list", help="list the built-in, plugin and --import envs").set_defaults(func=cmd_list)

    def env_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("env_id", help="a registered env id, e.g. turnkit/MathEpisodes-v0")
        p.add_argument("--split", default="id", help="task split (id, ood, combo, ...)")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--env-kwarg", action="append", default=[], metavar="KEY=VALUE", help="extra env argument")

    play = sub.add_parser("play", help="play an env yourself in the terminal")
    env_args(play)
    play.set_defaults(func=cmd_play)

    ev = sub.add_parser("eval", help="evaluate an agent on seeded episodes")
    env_args(ev)
    ev.add_argument(
        "--agent",
        default="oracle",
        help="oracle | random | scripted:TEXT | hf:PATH | tiny | smollm2 | smollm2-bf16 | openai:URL#MODEL",
    )
    ev.add_argument("--episodes", type=int, default=100)
    ev.add_argument("--batch-size", type=int, default=16)
    ev.add_argument("--out", default=None, help="output directory (default runs/eval-...)")
    ev.add_argument("--quiet", action="store_true", help="no progress bar")
    ev.add_argument(
        "--ray", default=None, metavar="ADDRESS",
        help="play on Ray env workers: local (a cluster in this process), auto, or host:6379 (docs/scaling.md)",
    )  # fmt: skip
    ev.add_argument("--ray-workers", type=int, default=2, help="env workers with --ray (default 2)")
    add_sampling_args(ev)
    ev.set_defaults(func=cmd_eval)

    bench = sub.add_parser("bench", help="run a benchmark from benchmarks/ (e.g. envs, sandbox)")
    bench.add_argument("name")
    bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    bench.set_defaults(func=cmd_bench)
