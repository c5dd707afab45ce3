"""The examples in the study scripts' docstrings run (the suite's doctest collection covers turnkit/ and docs/
only; the studies' verdict and summary helpers, e.g. ``check_lines``, are pure functions with examples)."""

from __future__ import annotations

import doctest
import importlib.util
import sys
from pathlib import Path

import pytest

STUDIES = Path(__file__).resolve().parents[1] / "studies"
WITH_EXAMPLES = sorted(p for p in STUDIES.glob("*.py") if ">>>" in p.read_text(encoding="utf-8"))


def test_some_studies_have_examples():
    assert len(WITH_EXAMPLES) >= 4, [p.name for p in WITH_EXAMPLES]


@pytest.mark.parametrize("path", WITH_EXAMPLES, ids=lambda p: p.stem)
def test_study_examples_pass(path, monkeypatch):
    monkeypatch.syspath_prepend(str(STUDIES))  # studies import each other by module name
    spec = importlib.util.spec_from_file_location(f"_study_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, result
