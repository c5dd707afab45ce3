"""Procedural collaborative-coding tasks: a vague request, a hidden reference and ten hidden test calls.

A task is drawn from the episode RNG only: a family (see :mod:`turnkit.envs.collab_code.families`), a
function name, a request phrasing, the hidden parameter values of the split, and ten test calls.

Splits:

* ``id``: every parameter from its in-distribution values; the family's held-out ``combo`` pairs never occur.
* ``ood``: at least one parameter (one chosen uniformly among those that have out-of-distribution values,
  each other such parameter with probability 1/4) takes a value never seen in ``id`` (cutoffs 35/40/80+,
  discounts of 30-50 %, yards and millimetres, lower-case names, reverse-alphabetical ties, a top-1 or
  top-10 board, 5-7 grace days, ...). ``metadata["ood_params"]`` names them.
* ``combo``: every value is an ``id`` value, but the family's ``combo`` pair takes a held-out combination
  (e.g. an exclusive pass cutoff with ``True``/``False`` labels): each value was seen in ``id``, never together.

Verification at generation (in-process: the reference is our own code, never the agent's): the reference
runs every test without error (a ``ValueError`` only where the hidden parameters ask for one), and for every
parameter that differs from its default, the reference with that one parameter set to its default gives a
different outcome on at least one test. So each non-default hidden parameter matters, and a policy that does
not ask about it loses at least one test. Tests are redrawn until this holds.

Example:
    >>> import numpy as np
    >>> task = generate(np.random.default_rng(3), split="ood")
    >>> task.family, task.split, task.metadata["kind"], len(task.privileged["tests"])
    ('collab_code', 'ood', 'late_fee', 10)
    >>> print(task.prompt)
    Can you write a function that computes the fine for a library book returned late?
    The signature of the function is: def late_fee(days_late)
    >>> task.metadata["ood_params"], task.privileged["facts"][0]
    (('grace',), {'slot': 'late_fee.grace', 'value': 5})
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from turnkit.envs.collab_code.families import FAMILIES, Family
from turnkit.envs.collab_code.grading import outcomes_equal, run_tests_in_process
from turnkit.errors import ConfigError, EnvError
from turnkit.types import Task

SPLITS = ("id", "ood", "combo")
"""The generator's splits."""
FAMILY = "collab_code"
"""``Task.family`` of every collaborative-coding task."""
NUM_TESTS = 10
"""Hidden test calls per generated task (as in ColBench)."""
_MAX_DRAWS = 50


def check_kinds(kinds: Iterable[str] | None) -> tuple[str, ...]:
    """Validate family names (``None``: all of them, in a fixed order).

    Example:
        >>> check_kinds(["grade", "price"])
        ('grade', 'price')
    """
    names = tuple(FAMILIES) if kinds is None else tuple(kinds)
    unknown = [k for k in names if k not in FAMILIES]
    if not names or unknown:
        raise ConfigError(f"kinds must be a non-empty subset of {list(FAMILIES)}, got {list(names)}")
    return names


def _pick(rng: np.random.Generator, values: Sequence[Any]) -> Any:
    return values[int(rng.integers(len(values)))]


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def sample_params(rng: np.random.Generator, family: Family, split: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Draw hidden parameter values for ``split``; returns the values and the names drawn out of distribution.

    Example:
        >>> import numpy as np
        >>> from turnkit.envs.collab_code.families import FAMILIES
        >>> params, ood = sample_params(np.random.default_rng(0), FAMILIES["grade"], "combo")
        >>> (params["inclusive"], params["labels"]), ood
        ((False, 'true_false'), ())
    """
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; choose one of {list(SPLITS)}")
    a, b = family.combo
    held = {(x, y) for x, y in family.held_out}
    if split == "combo":
        pair = _pick(rng, family.held_out)
        params = {p.name: _pick(rng, p.id_values) for p in family.params}
        params[a], params[b] = pair
        return params, ()
    forced = _pick(rng, [p.name for p in family.params if p.ood_values]) if split == "ood" else None
    for _ in range(_MAX_DRAWS):
        params, ood = {}, []
        for p in family.params:
            if p.ood_values and (p.name == forced or (forced is not None and rng.random() < 0.25)):
                params[p.name] = _pick(rng, p.ood_values)
                ood.append(p.name)
            else:
                params[p.name] = _pick(rng, p.id_values)
        if (params[a], params[b]) not in held:
            return params, tuple(ood)
    raise EnvError(f"family {family.name!r}: could not draw a non-held-out combination")  # pragma: no cover


def verify(family: Family, fn: str, params: Mapping[str, Any], tests: Sequence[str]) -> str | None:
    """Why these tests are unfit for the reference (``None`` when they are fit; see the module docstring).

    Example:
        >>> from turnkit.envs.collab_code.families import FAMILIES
        >>> fam = FAMILIES["grade"]
        >>> params = {"cutoff": 60, "inclusive": False, "labels": "pass_fail"}
        >>> verify(fam, "f", params, ["f(60)", "f(59)"]) is None
        True
        >>> verify(fam, "f", params, ["f(0)"])
        'the tests do not tell cutoff=60 from the default 50'
    """
    ref = run_tests_in_process(family.render(fn, params), tests)
    bad = [t for t, o in zip(tests, ref, strict=True) if "ok" not in o and o.get("raised") != "ValueError"]
    if bad:
        return f"the reference fails on {bad[0]}: {ref[tests.index(bad[0])]}"
    for p in family.params:
        if _same(params[p.name], p.default):
            continue
        alt = run_tests_in_process(family.render(fn, {**params, p.name: p.default}), tests)
        if all(outcomes_equal(r, x) for r, x in zip(ref, alt, strict=True)):
            return f"the tests do not tell {p.name}={params[p.name]!r} from the default {p.default!r}"
    return None


def task_prompt(request: str, fn: str, args: str) -> str:
    """The public prompt: the request and the signature line (ColBench's format).

    Example:
        >>> task_prompt("Sum two numbers.", "add", "a, b")
        'Sum two numbers.\\nThe signature of the function is: def add(a, b)'
    """
    return f"{request}\nThe signature of the function is: def {fn}({args})"


def generate(rng: np.random.Generator, *, split: str = "id", kinds: Iterable[str] | None = None) -> Task:
    """Draw one task of ``split`` from the families in ``kinds`` (default all), using only ``rng``."""
    names = check_kinds(kinds)
    family = FAMILIES[_pick(rng, names)]
    params, ood = sample_params(rng, family, split)
    fn = _pick(rng, family.fn_names)
    request = _pick(rng, family.requests)
    for _ in range(_MAX_DRAWS):
        tests = family.make_tests(rng, fn, params)
        reason = verify(family, fn, params, tests)
        if reason is None:
            break
    else:  # a generator bug: the test drawer cannot probe these parameters
        raise EnvError(f"family {family.name!r} with {params}: {reason}")
    return build_task(family, fn, request, params, tests, split=split, ood_params=ood)


def build_task(
    family: Family,
    fn: str,
    request: str,
    params: Mapping[str, Any],
    tests: Sequence[str],
    *,
    split: str = "id",
    ood_params: Sequence[str] = (),
) -> Task:
    """Assemble the :class:`~turnkit.types.Task` of one drawn task.

    ``privileged`` holds ``reference`` (code), ``tests`` (call expressions) and ``facts`` (one
    ``{"slot": "<family>.<param>", "value": v}`` per hidden parameter: what the simulated human knows).
    ``metadata`` holds public labels only: ``kind``, ``function``, ``hidden_params`` (names, not values),
    ``ood_params`` and ``combo_pair``. The difficulty is the number of hidden parameters.

    Example:
        >>> from turnkit.envs.collab_code.families import FAMILIES
        >>> fam = FAMILIES["grade"]
        >>> params = {"cutoff": 60, "inclusive": True, "labels": "pass_fail"}
        >>> task = build_task(fam, "exam_result", fam.requests[0], params, ["exam_result(60)"])
        >>> task.privileged["facts"][0], task.difficulty
        ({'slot': 'grade.cutoff', 'value': 60}, 3.0)
    """
    code = family.render(fn, params)
    digest = hashlib.sha1(json.dumps([code, list(tests)]).encode()).hexdigest()[:10]
    facts = tuple({"slot": f"{family.name}.{p.name}", "value": params[p.name]} for p in family.params)
    return Task(
        task_id=f"{FAMILY}-{split}-{family.name}-{digest}",
        prompt=task_prompt(request, fn, family.args),
        privileged={"reference": code, "tests": tuple(tests), "facts": facts},
        family=FAMILY,
        split=split,
        difficulty=float(len(family.params)),
        metadata={
            "kind": family.name,
            "function": fn,
            "hidden_params": tuple(p.name for p in family.params),
            "ood_params": tuple(ood_params),
            "combo_pair": family.combo,
        },
    )
