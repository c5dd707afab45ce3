"""run_batch: one round trip, per-call results and alarms, on every backend and through run_python alike."""

from __future__ import annotations

import pytest

from turnkit.errors import ConfigError
from turnkit.sandbox import CallResult, run_batch
from turnkit.sandbox.batch import BATCH_MARK

from .conftest import BACKENDS, backend_params, make_sandbox

SETUP = "import math\nseen = []\ndef f(x):\n    seen.append(x)\n    return 12 // x\n"


@pytest.fixture(params=backend_params(BACKENDS), scope="module")
def sb(request):
    with make_sandbox(request.param) as sandbox:
        yield sandbox


class RunPythonOnly:
    """A Sandbox that is not a SandboxBase: run_batch must send the harness as a program."""

    def __init__(self, inner):
        self.inner = inner
        self.limits = inner.limits

    def run_python(self, code, *, timeout=None):
        return self.inner.run_python(code, timeout=timeout)


def test_each_call_gets_its_own_result_in_order(sb):
    batch = run_batch(sb, SETUP, ["f(4)", "f(0)", "f(5) + 0.5", "len(seen)", "undefined()", "(1, [True, None])"])
    assert batch.ok and batch.error is None, batch
    assert batch.calls == (
        CallResult("ok", value=["int", "3"]),
        CallResult("raised", error="ZeroDivisionError", message="integer division or modulo by zero"),
        CallResult("ok", value=["float", "2.5"]),
        CallResult("ok", value=["int", "3"]),  # calls share the set-up's namespace, in order
        CallResult("raised", error="NameError", message="name 'undefined' is not defined"),
        CallResult("ok", value=["tuple", [["int", "1"], ["list", [["bool", True], ["none"]]]]]),
    )


def test_a_slow_call_times_out_alone(sb):
    batch = run_batch(sb, "import time", ["time.sleep(10)", "2 * 21"], per_call_timeout_s=0.3)
    assert [c.status for c in batch.calls] == ["timeout", "ok"] and batch.calls[1].value == ["int", "42"]
    assert batch.error == "timeout" and "1 call(s)" in batch.detail and not batch.ok


def test_no_state_survives_from_one_batch_to_the_next(sb):
    run_batch(sb, "import json\njson.LEAK = 1\nkept = 1", ["kept"])
    batch = run_batch(sb, "import json", ["hasattr(json, 'LEAK')", "'kept' in globals()"])
    assert [c.value for c in batch.calls] == [["bool", False], ["bool", False]]


@pytest.mark.parametrize(
    ("setup", "error"),
    [
        ("def f(:\n    pass", "syntax_error"),
        ("raise RuntimeError('no')", "crash"),
        ("while True:\n    pass", "timeout"),
        ("import os\nos._exit(0)", "crash"),
    ],
)
def test_a_set_up_that_fails_fails_the_batch_with_a_cause(sb, setup, error):
    batch = run_batch(sb, setup, ["1"], per_call_timeout_s=0.5)
    assert (batch.calls, batch.error) == (None, error), batch
    assert batch.detail


def test_prints_are_discarded_and_cannot_forge_results(sb):
    forged = BATCH_MARK + '{"ok": ["int", "999"]}'
    batch = run_batch(sb, f"print({forged!r})\ndef f():\n    print({forged!r})\n    return 1", ["f()"])
    assert batch.calls == (CallResult("ok", value=["int", "1"]),)


def test_a_returned_value_over_the_output_cap_fails_the_batch(sb):
    batch = run_batch(sb, "", ["'x' * 10**6"])
    assert (batch.calls, batch.error) == (None, "output_limit")


def test_code_that_ignores_the_alarm_is_stopped_by_the_wall_timeout(sb):
    setup = "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ndef spin():\n    while True:\n        pass"
    batch = run_batch(sb, setup, ["spin()"], per_call_timeout_s=0.2)
    assert (batch.calls, batch.error) == (None, "timeout") and "whole batch" in batch.detail


def test_the_program_path_gives_the_native_results():
    with make_sandbox("local-persistent") as sandbox:
        calls = ["f(4)", "f(0)", "math.pi", "{1: {2}}"]
        native = run_batch(sandbox, SETUP, calls)
        shipped = run_batch(RunPythonOnly(sandbox), SETUP, calls)
    assert native.calls == shipped.calls and native.ok and shipped.ok


def test_bad_arguments_are_refused_before_anything_runs():
    with make_sandbox("local-persistent") as sandbox:
        with pytest.raises(ConfigError, match="sequence of expression strings"):
            run_batch(sandbox, "", "f(1)")
        with pytest.raises(ConfigError, match="positive number"):
            run_batch(sandbox, "", ["1"], per_call_timeout_s=0)
