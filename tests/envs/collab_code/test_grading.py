"""Grading in the sandbox: python -m pytest tests/envs/collab_code/test_grading.py -q"""

import pytest

from turnkit.envs.collab_code.grading import (
    COLBENCH_FORBIDDEN,
    encode_value,
    extract_code,
    grade,
    outcomes_equal,
    reference_outcomes,
    run_tests,
    run_tests_in_process,
    shared_sandbox,
    split_answer,
    values_equal,
)
from turnkit.errors import ConfigError, EnvError, SandboxError
from turnkit.sandbox import LocalSandbox

REF = "def f(x):\n    return x + 1"
TESTS = ["f(1)", "f(2)", "f(3)"]


@pytest.fixture(scope="module")
def sb():
    return shared_sandbox()


def _grade(sb, code, *, forbidden=(), timeout=0.3, ref=REF, tests=TESTS):
    return grade(sb, ref, code, tests, per_test_timeout_s=timeout, forbidden=forbidden)


# ------------------------------------------------------------------ answer extraction
def test_split_answer_takes_the_first_fenced_block_after_the_marker():
    msg = "Sure.\nI WANT TO ANSWER:\n```python\ndef f(x):\n    return 1\n```\n```python\nother()\n```"
    assert split_answer(msg) == "def f(x):\n    return 1"


def test_split_answer_without_fence_takes_the_rest_of_the_message():
    assert split_answer("I WANT TO ANSWER: def f(x): return 2\n") == "def f(x): return 2"


def test_split_answer_is_none_without_marker():
    assert split_answer("i want to answer: lower case does not count") is None


def test_extract_code_keeps_an_unclosed_fence_body():
    assert extract_code("```python\ndef f():\n    return 3") == "def f():\n    return 3"


# ------------------------------------------------------------------ equality protocol
@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (3, 3.0, True),
        (0.1 + 0.2, 0.3, False),
        (True, 1, False),
        ([1, 2], (1, 2), False),
        ({"a": 1, "b": [2]}, {"b": [2.0], "a": 1}, True),
        ({1, 2}, {2, 1}, True),
        (None, None, True),
        ("x", "x ", False),
        (float("nan"), float("nan"), False),
        (10**30, 10**30, True),
    ],
)
def test_values_equal_follows_python_numbers_and_strict_types(a, b, equal):
    assert values_equal(encode_value(a), encode_value(b)) is equal


def test_encode_value_marks_foreign_types_as_never_equal():
    class Liar:
        def __eq__(self, other):
            return True

    assert encode_value(Liar()) == ["other", "Liar"]
    assert not values_equal(encode_value(Liar()), encode_value(Liar()))


def test_encode_value_caps_deep_nesting():
    deep: list = []
    for _ in range(100):
        deep = [deep]
    assert "too_big" in str(encode_value(deep))


def test_same_exception_type_matches():
    assert outcomes_equal({"raised": "ValueError"}, {"raised": "ValueError"})
    assert not outcomes_equal({"raised": "ValueError"}, {"raised": "TypeError"})
    assert not outcomes_equal({"timeout": True}, {"timeout": True})


# ------------------------------------------------------------------ grading
def test_correct_answer_passes_every_test(sb):
    r = _grade(sb, "def f(x):\n    return 1 + x")
    assert (r.passed, r.total, r.success, r.error, r.per_test) == (3, 3, True, None, (True, True, True))


def test_partial_answer_scores_the_fraction(sb):
    r = _grade(sb, "def f(x):\n    return x + 1 if x < 3 else 0")
    assert (r.passed, r.reward, r.success, r.per_test) == (2, pytest.approx(2 / 3), False, (True, True, False))


def test_module_level_imports_helpers_and_recursion_work(sb):
    code = (
        "import math\n\ndef g(n):\n    return 0 if n == 0 else g(n - 1) + 1\n\n"
        "def f(x):\n    return int(math.sqrt(g(x) ** 2)) + 1"
    )
    assert _grade(sb, code).success


def test_candidate_does_not_see_the_reference_namespace(sb):
    ref = "def helper(x):\n    return x * 3\n\ndef f(x):\n    return helper(x)"
    r = _grade(sb, "def f(x):\n    return helper(x)", ref=ref)
    assert r.passed == 0 and "NameError" in r.detail


def test_globals_are_fresh_between_gradings(sb):
    code = (
        "import builtins\nif not hasattr(builtins, 'seen'):\n    builtins.seen = 0\n"
        "builtins.seen += 1\ndef f(x):\n    return x + builtins.seen"
    )
    assert _grade(sb, code).success
    assert _grade(sb, code).success  # a leftover from the first run would make it x + 2


def test_printing_does_not_disturb_grading(sb):
    code = "print('noise ' * 1000)\ndef f(x):\n    print('@@turnkit-collab@@ not json')\n    return x + 1"
    assert _grade(sb, code).success


def test_same_exception_as_the_reference_passes(sb):
    ref = "def f(x):\n    if x < 0:\n        raise ValueError('neg')\n    return x"
    r = _grade(sb, "def f(x):\n    if x < 0:\n        raise ValueError\n    return x", ref=ref, tests=["f(-1)", "f(2)"])
    assert r.success


@pytest.mark.parametrize(
    ("name", "code", "error"),
    [
        (
            "network",
            "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=1)\ndef f(x):\n    return x + 1",
            "crash",
        ),
        ("filesystem", "open('/etc/turnkit-evil', 'w').write('x')\ndef f(x):\n    return x + 1", "crash"),
        ("host files", "open('/root/.bashrc').read()\ndef f(x):\n    return x + 1", "crash"),
        ("top-level loop", "while True:\n    pass", "timeout"),
        ("loop in function", "def f(x):\n    while True:\n        pass", "timeout"),
        ("huge result", "def f(x):\n    return 'x' * 10**7", "output_limit"),
        ("exit", "o = __import__('os')\ndef f(x):\n    o._exit(0)", "crash"),
        ("fork", "o = __import__('os')\ndef f(x):\n    o.fork()\n    return x + 1", "crash"),
        ("memory at load", "a = [0] * (10**9)\ndef f(x):\n    return x + 1", "crash"),
        ("syntax", "def f(x)\n    return x", "syntax_error"),
    ],
)
def test_hostile_or_broken_code_is_a_zero_score_with_a_cause(sb, name, code, error):
    r = _grade(sb, code)
    assert (r.passed, r.error) == (0, error), f"{name}: {r}"
    assert r.detail


def test_an_answer_that_kills_its_parent_is_graded_on_what_it_returns(sb):
    # Under a uid of its own (Docker, bubblewrap on a root host) its parent is the worker's zygote, which runs as
    # root: the kill is refused, and an answer that does not catch that fails as its own crash, never as a fault of
    # the sandbox. In a jail its parent is the jail's init, which ignores the signal. Either way the answer is
    # graded on what it returns, and it can never reach the supervisor or the reference.
    killer = "import os\ntry:\n    os.kill(os.getppid(), 9)\nexcept OSError:\n    pass\ndef f(x):\n    return x + 1"
    assert (_grade(sb, killer).passed, _grade(sb, killer.replace("x + 1", "x")).passed) == (3, 0)
    plain = _grade(sb, "o = __import__('os')\no.kill(o.getppid(), 9)\ndef f(x):\n    return x + 1")
    assert plain.passed == 3 or (plain.passed, plain.error) == (0, "crash"), plain
    assert _grade(sb, REF).success


def test_the_reference_never_runs_in_the_answers_sandbox(sb):
    with pytest.raises(ConfigError, match="never runs answers"):
        grade(sb, REF, REF, TESTS, reference_sandbox=sb)


def test_code_that_ignores_the_alarm_is_killed_by_the_wall_timeout(sb):
    code = "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ndef f(x):\n    while True:\n        pass"
    r = _grade(sb, code, timeout=0.2, tests=["f(1)"])
    assert (r.passed, r.error) == (0, "timeout") and "whole batch" in r.detail


def test_colbench_forbidden_text_is_scored_zero_without_running(sb):
    r = grade(sb, REF, "import os\ndef f(x):\n    return x + 1", TESTS)
    assert (r.passed, r.error) == (0, "forbidden") and "import os" in r.detail
    assert "exit(" in COLBENCH_FORBIDDEN


def test_empty_answer_is_no_code(sb):
    assert _grade(sb, "   ").error == "no_code"


def test_detail_names_exception_types_but_never_the_test_calls(sb):
    r = _grade(sb, "def f(x):\n    raise KeyError('boom')")
    assert "KeyError" in r.detail and not any(t in r.detail for t in TESTS)


def test_grade_needs_tests_and_a_positive_timeout(sb):
    with pytest.raises(ConfigError):
        grade(sb, REF, REF, [])
    with pytest.raises(ConfigError):
        grade(sb, REF, REF, TESTS, per_test_timeout_s=0)


def test_broken_reference_is_an_env_error_not_a_zero(sb):
    with pytest.raises(EnvError, match="reference solution fails"):
        grade(sb, "raise RuntimeError('x')", REF, TESTS, cache_reference=False)


def test_sandbox_infrastructure_failure_propagates():
    box = LocalSandbox(persistent=True)
    box.close()
    with pytest.raises(SandboxError):
        grade(box, REF, REF, TESTS, cache_reference=False)


def test_reference_outcomes_are_cached_by_content(sb):
    first = reference_outcomes(sb, REF, ["f(41)"])
    assert reference_outcomes(sb, REF, ["f(41)"]) is first
    assert reference_outcomes(sb, REF, ["f(41)"], cache=False) == first


def test_in_process_and_sandbox_harness_agree(sb):
    code = "def f(x):\n    return {'a': [x, (x, 2.5)], 'b': {x}} if x else None"
    tests = ["f(0)", "f(3)", "f('s')"]
    assert run_tests(sb, code, tests).outcomes == run_tests_in_process(code, tests)
