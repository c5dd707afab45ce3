"""`PAVDidacticEnv`: find a planted run of tokens (the didactic task of PAV, arXiv 2410.08146, App. B)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from turnkit.envs.core import TextEnv, Transition
from turnkit.envs.pav_didactic.prover import SEQ_LEN, VOCAB_SIZE, check_target, transition_table
from turnkit.errors import ConfigError
from turnkit.types import Task

TARGET_LEN = 5
"""Default length of the planted run."""


def target_of(task: Task) -> tuple[int, ...]:
    """The planted run of a task (privileged ``"target"``, space-separated token ids).

    Example:
        >>> target_of(Task(task_id="t", prompt="", privileged={"target": "3 1 4"}))
        (3, 1, 4)
    """
    return tuple(int(t) for t in str(task.privileged["target"]).split())


def parse_tokens(action: str, vocab_size: int) -> list[int] | None:
    """Space-separated token ids in ``[0, vocab_size)``, or ``None`` if any word is not one.

    Example:
        >>> parse_tokens(" 3 14\\n2 ", 15), parse_tokens("3 x", 15), parse_tokens("15", 15)
        ([3, 14, 2], None, None)
    """
    out = []
    for word in action.split():
        if not (word.isascii() and word.isdigit()) or len(word) > 3 or int(word) >= vocab_size:
            return None
        out.append(int(word))
    return out


class PAVDidacticEnv(TextEnv):
    r"""Write a short token sequence that contains a hidden run of tokens.

    ## Description
    The didactic task of PAV (arXiv 2410.08146, App. B) as a text env. Each task plants a run ``y*`` of
    ``target_len`` tokens from ``0 .. V − 2``; the policy writes at most ``seq_len`` tokens (``V − 1`` is
    EOS) and succeeds iff ``y*`` appears contiguously. The prover policies, exact ``Q`` tables and Monte
    Carlo estimates of the paper live in :mod:`turnkit.envs.pav_didactic.prover`.

    ## Observation
    A ``str``. On ``reset``: the rules (no hint about ``y*``). After each turn: the sequence so far, e.g.
    ``"Sequence so far: 3 7 (2/10 tokens)."``; at the end ``"Found the hidden run ..."`` or ``"The sequence
    ended without the hidden run."``.

    ## Action
    A ``str``: one or more token ids separated by whitespace, e.g. ``"7"`` or ``"3 7 1"``. Tokens are
    appended in order until EOS, success or the length limit (later ones are ignored, counted in
    ``info["ignored_tokens"]``). A message with any word that is not a token id appends nothing and gets
    ``info["malformed"] = True``.

    ## Rewards
    ``1.0`` on the turn that completes ``y*``, else ``0.0``.

    ## Episode End
    Terminated when ``y*`` appears (``success = True``), at EOS or when ``seq_len`` tokens are written
    without it (``success = False``), or after too many invalid actions. Truncated only by the
    ``TimeLimit`` of ``gymnasium.make`` (20 turns for ``turnkit/PAVDidactic-v0``; malformed turns count).

    ## Info
    ``length`` (tokens written), ``malformed``, ``ignored_tokens``, ``success`` on terminal steps, plus the
    :class:`TextEnv` keys. Never ``y*`` or the match state: read those through :meth:`privileged`.

    ## Arguments
    * ``split``: ``"id"``, ``"ood"`` or ``"combo"`` (see Splits); ignored with ``target`` or ``tasks``.
    * ``target``: a fixed run (``"3 7 1 9 2"`` or ``(3, 7, 1, 9, 2)``): every episode plays it, as in the
      paper's single planted sequence.
    * ``vocab_size`` (15), ``seq_len`` (10), ``target_len`` (5).
    * ``tasks``, ``max_invalid_actions``, ``max_action_chars``, ``render_mode``: see :class:`TextEnv`.

    ## Splits
    * ``id``: ``target_len`` distinct tokens.
    * ``combo``: ``target_len`` tokens with at least one repeated token (held-out: self-overlapping runs,
      where the match automaton falls back to a partial match instead of 0).
    * ``ood``: ``target_len + 1`` distinct tokens (a longer run than in training).

    Example:
        >>> env = PAVDidacticEnv(target="3 1", seq_len=4)
        >>> obs, info = env.reset(seed=0)
        >>> env.step("3 3")[:3]
        ('Sequence so far: 3 3 (2/4 tokens).', 0.0, False)
        >>> obs, reward, terminated, truncated, info = env.step("1 9")
        >>> obs, reward, terminated, info["success"], info["ignored_tokens"]
        ('Found the hidden run: 3 3 1. Success.', 1.0, True, True, 1)
    """

    def __init__(
        self,
        *,
        split: str = "id",
        target: str | Sequence[int] | None = None,
        vocab_size: int = VOCAB_SIZE,
        seq_len: int = SEQ_LEN,
        target_len: int = TARGET_LEN,
        tasks: Sequence[Task] | None = None,
        max_invalid_actions: int = 3,
        max_action_chars: int = 4096,
        render_mode: str | None = None,
    ) -> None:
        for name, value in (("vocab_size", vocab_size), ("seq_len", seq_len), ("target_len", target_len)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ConfigError(f"{name} must be an int >= 1, got {value!r}")
        if vocab_size < 3:
            raise ConfigError(f"vocab_size must be >= 3 (two tokens and EOS), got {vocab_size}")
        if target is None and tasks is None and target_len + 1 > vocab_size - 1:
            raise ConfigError(f"target_len={target_len} needs more than {vocab_size - 1} non-EOS tokens")
        self.vocab_size, self.seq_len, self.target_len = int(vocab_size), int(seq_len), int(target_len)
        if target is not None:
            ids = target.split() if isinstance(target, str) else target
            fixed = check_target([int(t) for t in ids], self.vocab_size)
            tasks = [self._make_task(fixed, split="id")]
        super().__init__(
            split=split,
            tasks=tasks,
            max_invalid_actions=max_invalid_actions,
            max_action_chars=max_action_chars,
            render_mode=render_mode,
        )
        self._tokens: list[int] = []
        self._state = 0
        self._tables: dict[tuple[int, ...], np.ndarray] = {}

    # ------------------------------------------------------------------ TextEnv hooks
    def generate_task(self, rng: np.random.Generator) -> Task:
        """A planted run for ``self.split`` drawn from ``rng`` (see Splits)."""
        n_tokens = self.vocab_size - 1
        if self.split == "ood":
            run = rng.choice(n_tokens, size=self.target_len + 1, replace=False)
        elif self.split == "combo" and self.target_len >= 2:
            run = rng.choice(n_tokens, size=self.target_len, replace=False)
            i, j = rng.choice(self.target_len, size=2, replace=False)
            run[max(i, j)] = run[min(i, j)]  # one repeated token
        else:
            run = rng.choice(n_tokens, size=self.target_len, replace=False)
        return self._make_task(tuple(int(t) for t in run), split=self.split)

    def begin(self, task: Task) -> str:
        """Start an empty sequence; the first observation states the rules."""
        self._tokens = []
        self._state = 0
        return task.prompt

    def respond(self, action: str) -> Transition:
        """Append the action's tokens (see Action) and report the sequence."""
        tokens = parse_tokens(action, self.vocab_size)
        if tokens is None:
            eos = self.vocab_size - 1
            text = f"Not a token sequence: send token ids 0 to {eos} separated by spaces. {self._progress()}"
            return Transition(text, info={"malformed": True})
        table, m, eos = self._table(), len(target_of(self.task)), self.vocab_size - 1
        for used, t in enumerate(tokens, start=1):
            self._tokens.append(t)
            self._state = int(table[self._state, t])
            if self._state == m:
                seq = " ".join(map(str, self._tokens))
                return Transition(
                    f"Found the hidden run: {seq}. Success.", 1.0, True, self._end_info(len(tokens) - used, True)
                )
            if t == eos or len(self._tokens) >= self.seq_len:
                return Transition(
                    f"The sequence ended without the hidden run: {' '.join(map(str, self._tokens))}.",
                    terminated=True,
                    info=self._end_info(len(tokens) - used, False),
                )
        return Transition(self._progress(), info={"malformed": False, "ignored_tokens": 0})

    def get_state(self) -> dict[str, Any]:
        """The tokens written and the match state (O(seq_len), no replay)."""
        return {"tokens": self._tokens, "state": self._state}

    def set_state(self, state: dict[str, Any]) -> None:
        """Install a state from :meth:`get_state`."""
        self._tokens = [int(t) for t in state["tokens"]]
        self._state = int(state["state"])

    def extra_info(self) -> dict[str, Any]:
        """The number of tokens written so far, on every info dict."""
        return {"length": len(self._tokens)}

    # ------------------------------------------------------------------ internals
    def _make_task(self, run: tuple[int, ...], split: str) -> Task:
        eos = self.vocab_size - 1
        prompt = (
            f"Write a sequence of at most {self.seq_len} tokens. Tokens are the integers 0 to {eos - 1}; "
            f"{eos} ends the sequence. You succeed if the sequence contains a hidden run of {len(run)} "
            "consecutive tokens. Send one or more tokens separated by spaces."
        )
        return Task(
            task_id=f"pav-didactic-v{self.vocab_size}-l{self.seq_len}-" + "-".join(map(str, run)),
            prompt=prompt,
            privileged={"target": " ".join(map(str, run))},
            family="pav_didactic",
            split=split,
            difficulty=float(len(run)),
            metadata={"vocab_size": self.vocab_size, "seq_len": self.seq_len, "target_len": len(run)},
        )

    def _table(self) -> np.ndarray:
        run = target_of(self.task)
        if run not in self._tables:
            self._tables[run] = transition_table(run, self.vocab_size)
        return self._tables[run]

    def _progress(self) -> str:
        seq = " ".join(map(str, self._tokens)) or "(empty)"
        return f"Sequence so far: {seq} ({len(self._tokens)}/{self.seq_len} tokens)."

    def _end_info(self, ignored: int, success: bool) -> dict[str, Any]:
        return {"malformed": False, "ignored_tokens": ignored, "success": success}
