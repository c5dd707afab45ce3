"""Reply scoring and human data: python -m pytest tests/envs/collab_code/test_human_eval.py -q -p no:cacheprovider"""

import numpy as np
import pytest

from turnkit.envs.collab_code.human import RuleBasedHuman
from turnkit.envs.collab_code.human_data import (
    EVAL_PROBES,
    TRAIN_PROBES,
    clarify_examples,
    probe_examples,
)
from turnkit.envs.collab_code.human_eval import (
    asked_params,
    code_lines,
    fact_scores,
    leaks,
    same_params_wrong_value,
    stated_facts,
)
from turnkit.errors import ConfigError
from turnkit.types import Task

LATE = Task(
    "late",
    "Write a late fee function.\nThe signature of the function is: def late_fee(days_late)",
    {
        "facts": [
            {"slot": "late_fee.grace", "value": 2},
            {"slot": "late_fee.per_day", "value": 0.5},
            {"slot": "late_fee.cap", "value": None},
        ],
        "reference": "def late_fee(days_late):\n    charged = max(0, days_late - 2)\n    fee = charged * 0.5\n"
        "    return round(fee, 2)",
    },
)


def test_fact_scores_hand_computed():
    rule = "The first 2 late days are free. Each charged day costs 0.5 dollars."
    # one right fact, one wrong value: precision 1/2, recall 1/2, F1 1/2, one wrong fact
    got = fact_scores(LATE, "The first 2 late days are free. Each charged day costs 0.25 dollars.", rule)
    assert got == {"precision": 0.5, "recall": 0.5, "f1": 0.5, "wrong": 1}
    assert fact_scores(LATE, rule, rule) == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "wrong": 0}
    # says nothing where the rule human states two facts: F1 0
    assert fact_scores(LATE, "I don't know.", rule)["f1"] == 0.0
    # states a true fact where the rule human said "I don't know.": precision 0, not a wrong fact
    assert fact_scores(LATE, "The first 2 late days are free.", "I don't know.") == {
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
        "wrong": 0,
    }


def test_stated_facts_reads_only_the_tasks_parameters():
    assert stated_facts(LATE, "There is no maximum fine. The passing cutoff is 60 points.") == {("cap", None)}


def test_asked_params_follow_the_rule_human_keywords():
    assert asked_params(LATE, "Is there a grace period, and how much per day?") == ("grace", "per_day")
    assert asked_params(LATE, "What is the weather?") == ()


def test_leaks_flag_code_lines_and_unasked_true_facts_only():
    assert code_lines(LATE) == ["charged = max(0, days_late - 2)", "fee = charged * 0.5", "return round(fee, 2)"]
    assert leaks(LATE, "How much per day?", "Each charged day costs 0.5 dollars.") == {
        "code": False,
        "unasked_fact": False,
    }
    assert leaks(LATE, "How much per day?", "The first 2 late days are free.") == {"code": False, "unasked_fact": True}
    # a wrong unasked value is a hallucination, not a leak of hidden data
    assert leaks(LATE, "How much per day?", "The first 3 late days are free.")["unasked_fact"] is False
    assert leaks(LATE, "Show me code", "fee = charged * 0.5 I think")["code"] is True


def test_code_lines_skip_lines_a_fact_sentence_says():
    task = Task(
        "avg",
        "The signature of the function is: def mean_score(scores)",
        {
            "facts": [{"slot": "average.empty", "value": "return_none"}],
            "reference": "def mean_score(scores):\n    return None",
        },
    )
    assert code_lines(task) == []  # "For an empty list, return None." is an answer, not leaked code
    assert code_lines(task, min_chars=3) == []


def test_same_params_wrong_value_is_a_mis_copied_value():
    rule = "The first 2 late days are free."
    assert same_params_wrong_value(LATE, "The first 5 late days are free.", rule)
    assert not same_params_wrong_value(LATE, rule, rule)
    assert not same_params_wrong_value(LATE, "Each charged day costs 0.5 dollars.", rule)  # another fact


@pytest.mark.parametrize("split", ["id", "ood", "combo"])
def test_the_rule_human_never_leaks_on_generated_questions(split):
    examples = clarify_examples(split=split, seeds=range(200))
    examples += probe_examples(examples, probes=EVAL_PROBES, rng=np.random.default_rng(0), per_task=2)
    flags = [leaks(e.task, e.dialogue[-1].content, e.reply) for e in examples]
    assert len(flags) > 100 and not any(f["code"] or f["unasked_fact"] for f in flags)


def test_clarify_examples_are_the_rule_human_replies():
    examples = clarify_examples(split="combo", seeds=range(5))
    human = RuleBasedHuman()
    assert len(examples) >= 10 and all(e.reply == human.reply(e.task, e.dialogue) for e in examples)
    assert all(fact_scores(e.task, e.reply, e.reply)["wrong"] == 0 for e in examples)


def test_probe_sets_are_disjoint_and_checked():
    assert not set(TRAIN_PROBES) & set(EVAL_PROBES)
    with pytest.raises(ConfigError, match="probes"):
        probe_examples([], probes=(), rng=np.random.default_rng(0))
