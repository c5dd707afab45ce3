"""The env catalogue: one page per registered ``turnkit/`` env, with an example episode played at build time.

Each page shows the env's registry entry (class, time limit, observation and action spaces, splits), its
reward description and the rest of its structured docstring (the class docstring when it has ``## Rewards``
style sections, else its module's), and one episode that the env's oracle
(:class:`turnkit.agents.oracle.OracleAgent`) plays from seed :data:`SEED`, so a reader sees real observations
and actions. Episodes are played on every build: a page cannot show an episode the current code would not play.

Example:
    >>> "turnkit/MathEpisodes-v0" in env_ids()
    True
    >>> page_path("turnkit/MathEpisodes-v0")
    'reference/envs/MathEpisodes-v0.md'
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from typing import Any

import gymnasium
from gymnasium.envs.registration import load_env_creator

import turnkit
from turnkit.agents.oracle import OracleAgent

SEED = 0
"""The seed of every example episode."""
MAX_SHOWN_CHARS = 1500
"""Longest observation or action shown in full; longer ones are cut with a note of what was left out."""

_ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc|obj|const|py:\w+):`(~?)([^`]+)`")


def env_ids() -> list[str]:
    """The registered built-in envs (``turnkit/`` ids), sorted: what ``turnkit list`` shows first."""
    return sorted(i for i in gymnasium.registry if i.startswith("turnkit/"))


def page_path(env_id: str) -> str:
    """The catalogue page of ``env_id``, relative to the docs folder."""
    return f"reference/envs/{env_id.split('/', 1)[1]}.md"


def env_class(env_id: str) -> type:
    """The class (or creator) the registry entry points at."""
    entry_point = gymnasium.spec(env_id).entry_point
    return load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point


def plain_roles(text: str) -> str:
    """Sphinx roles (``:class:`~a.B```) as Markdown code spans (```B```), for docstrings shown as Markdown.

    Example:
        >>> plain_roles("see :class:`~turnkit.browser.Tab` and :func:`turnkit.collect`")
        'see `Tab` and `turnkit.collect`'
    """
    return _ROLE.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text)


def structured_doc(cls: type) -> str:
    """The env's Gymnasium-style docstring: the class's when it has ``## `` sections, else its module's."""
    for doc in (cls.__doc__, getattr(sys.modules.get(cls.__module__), "__doc__", None)):
        text = inspect.cleandoc(doc or "")
        if re.search(r"^## ", text, re.M):
            return text[re.search(r"^## ", text, re.M).start() :]
    return ""


def sections(doc: str) -> dict[str, str]:
    """``{heading: body}`` of a docstring's ``## `` sections, in order.

    Example:
        >>> sections("## Rewards\\n1 on success.\\n\\n## Splits\\nid only.")
        {'Rewards': '1 on success.', 'Splits': 'id only.'}
    """
    out: dict[str, str] = {}
    for chunk in re.split(r"^## ", doc, flags=re.M)[1:]:
        heading, _, body = chunk.partition("\n")
        out[heading.strip()] = body.strip()
    return out


def _fenced(text: str, lang: str = "text") -> str:
    """``text`` in a code fence longer than any backtick run inside it, cut at :data:`MAX_SHOWN_CHARS`."""
    if len(text) > MAX_SHOWN_CHARS:
        text = f"{text[:MAX_SHOWN_CHARS]}\n… ({len(text) - MAX_SHOWN_CHARS} more characters)"
    fence = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`+", text)), default=0))
    return f"{fence}{lang}\n{text}\n{fence}\n"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|")


def _short(value: Any) -> str:
    """A value as compact JSON (or ``repr``), cut to one line."""
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def example_episode(env_id: str) -> turnkit.Trajectory:
    """One episode of ``env_id`` played by the oracle from seed :data:`SEED`."""
    env = gymnasium.make(env_id)
    try:
        return turnkit.collect(env, OracleAgent(), seed=SEED)
    finally:
        env.close()


def render_episode(traj: turnkit.Trajectory) -> str:
    """An episode as Markdown: each turn's observation, the agent's action and the reward; then the end."""
    task = traj.task
    parts = [
        f"Played by `OracleAgent` with `seed={traj.seed}`"
        + (f" (task `{task.task_id}`, split `{task.split}`, difficulty {task.difficulty:g})" if task else "")
        + f": {len(traj.steps)} turn(s), return {sum(s.reward for s in traj.steps):.3g}, "
        f"success {traj.success}.\n"
    ]
    for n, step in enumerate(traj.steps, 1):
        parts += [
            f"**Turn {n}: observation**\n",
            _fenced(str(step.observation)),
            f"**Turn {n}: action** (reward {step.reward:.3g}"
            + (", terminated" if step.terminated else "")
            + (", truncated" if step.truncated else "")
            + ")\n",
            _fenced(step.action.text),
        ]
    parts += ["**Final observation**\n", _fenced(str(traj.final_observation))]
    info = traj.steps[-1].info if traj.steps else {}
    shown = {k: v for k, v in info.items() if not k.startswith("_")}
    if shown:
        rows = "\n".join(f"| `{k}` | `{_cell(_short(v))}` |" for k, v in shown.items())
        parts.append(f"Last step's `info`:\n\n| Key | Value |\n| --- | --- |\n{rows}\n")
    return "\n".join(parts)


def render_env(env_id: str, traj: turnkit.Trajectory | None = None) -> str:
    """The catalogue page of ``env_id`` (plays the example episode unless ``traj`` is given)."""
    cls = env_class(env_id)
    spec = gymnasium.spec(env_id)
    env = gymnasium.make(env_id)
    try:
        obs_space, act_space = env.observation_space, env.action_space
    finally:
        env.close()
    qualname = f"{cls.__module__}.{cls.__qualname__}"
    summary = inspect.cleandoc(cls.__doc__ or "").split("\n", 1)[0]
    doc = sections(plain_roles(structured_doc(cls)))
    splits = ", ".join(f"`{s}`" for s in getattr(cls, "splits", ()))
    parts = [
        f"# {env_id}\n",
        f"{plain_roles(summary)}\n",
        "| Field | Value |\n| --- | --- |\n"
        f"| Class | [`{qualname}`][{qualname}] |\n"
        f'| Make | `gymnasium.make("{env_id}")` |\n'
        f"| Time limit | {spec.max_episode_steps} turns (`TimeLimit` of `gymnasium.make`) |\n"
        f"| Observation space | `{obs_space}` |\n"
        f"| Action space | `{act_space}` |\n"
        f"| Splits | {splits or 'none'} |\n",
        "## Rewards\n",
        f"{doc.get('Rewards', 'The docstring has no Rewards section.')}\n",
        "## Example episode\n",
        render_episode(traj if traj is not None else example_episode(env_id)),
    ]
    rest = {k: v for k, v in doc.items() if k != "Rewards"}
    if rest:
        parts.append("## From the docstring\n")
        parts += [f"### {heading}\n\n{body}\n" for heading, body in rest.items()]
    return "\n".join(parts)


def render_index(ids: list[str]) -> str:
    """The catalogue's index: every env with its one-line description and a link to its page."""
    rows = []
    for env_id in ids:
        summary = plain_roles(inspect.cleandoc(env_class(env_id).__doc__ or "").split("\n", 1)[0])
        rows.append(f"| [`{env_id}`]({page_path(env_id).removeprefix('reference/envs/')}) | {summary} |")
    return (
        "# Env catalogue\n\n"
        "Every env registered under `turnkit/` (what `turnkit list` shows first), generated on each docs build "
        "from the Gymnasium registry and the env classes. Each page has the env's spaces, splits and rewards, "
        f"and one example episode played by the env's oracle from seed {SEED}. How-tos for each family are "
        "under *Env families*; writing your own env: [writing-an-env.md](../../writing-an-env.md).\n\n"
        "| Env | Description |\n| --- | --- |\n" + "\n".join(rows) + "\n"
    )
