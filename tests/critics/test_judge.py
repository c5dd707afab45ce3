"""LLM-as-judge critic: prompts, strict score parsing, malformed replies, batching (tests/critics/test_judge.py)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from turnkit.agents.base import Context
from turnkit.agents.hf import HFPolicy
from turnkit.agents.scripted import ScriptedAgent
from turnkit.critics.base import Critic, score_all
from turnkit.critics.judge import JudgeConfig, JudgeCritic, JudgeParseError, parse_score, render_transcript
from turnkit.errors import ConfigError, CriticError
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from turnkit.types import AgentTurn, Message, Step, Task, Trajectory


def _traj(actions: Sequence[str] = ("let me think", "ANSWER: 4"), answer: str = "4") -> Trajectory:
    steps = tuple(Step(f"obs{h}", AgentTurn(a), 0.0, terminated=h == len(actions) - 1) for h, a in enumerate(actions))
    task = Task("t1", "What is 2+2?", privileged={"answer": answer})
    return Trajectory("demo", 0, steps, initial_observation="obs0", task=task)


class Recorder:
    """Replies with a function of the prompt and records every call."""

    def __init__(self, reply) -> None:
        self.reply = reply
        self.calls: list[list[Context]] = []

    def act(self, contexts: Sequence[Context]) -> list[AgentTurn]:
        self.calls.append(list(contexts))
        return [AgentTurn(self.reply(c)) for c in contexts]


# ----------------------------------------------------------------------------- parse_score


def test_parse_takes_the_last_tagged_score() -> None:
    assert parse_score("SCORE: 2 ... on reflection SCORE: 9") == 9.0


def test_parse_accepts_markdown_and_equals() -> None:
    assert parse_score("**Score:** 7.5") == 7.5
    assert parse_score("score = 3") == 3.0


def test_parse_rescales_a_fraction_to_the_scale() -> None:
    # 3/4 of the way from -1 to 1 is 0.5
    assert parse_score("SCORE: 3/4", low=-1.0, high=1.0) == pytest.approx(0.5)


def test_parse_accepts_a_bare_number_reply() -> None:
    assert parse_score("  6\n") == 6.0


def test_parse_rejects_text_without_a_score() -> None:
    with pytest.raises(JudgeParseError, match="no 'SCORE"):
        parse_score("The answer looks correct to me, 10 out of ten.")


def test_parse_rejects_out_of_range() -> None:
    with pytest.raises(JudgeParseError, match="outside"):
        parse_score("SCORE: 11")


def test_parse_rejects_zero_denominator() -> None:
    with pytest.raises(JudgeParseError, match="denominator"):
        parse_score("SCORE: 3/0")


def test_parse_error_is_a_critic_error() -> None:
    assert issubclass(JudgeParseError, CriticError)


# ----------------------------------------------------------------------------- config


def test_config_rejects_bad_scale() -> None:
    with pytest.raises(ConfigError, match="low < high"):
        JudgeConfig(low=5.0, high=5.0)


def test_config_rejects_unknown_template_field() -> None:
    with pytest.raises(ConfigError, match="unknown field"):
        JudgeConfig(template="{oops}")


def test_config_rejects_step_fields_for_trajectory_granularity() -> None:
    with pytest.raises(ConfigError, match="granularity='step'"):
        JudgeConfig(template="{action}")


def test_config_rejects_reference_field_without_key() -> None:
    with pytest.raises(ConfigError, match="reference_key"):
        JudgeConfig(template="{reference}")


def test_record_mode_needs_explicit_reward() -> None:
    with pytest.raises(ConfigError, match="malformed_reward"):
        JudgeConfig(on_malformed="record")


# ----------------------------------------------------------------------------- scoring


def test_trajectory_score_lands_on_last_step_normalised() -> None:
    result = JudgeCritic(ScriptedAgent(["SCORE: 7"])).score(_traj())
    assert result.step_rewards == (0.0, pytest.approx(0.7))
    assert result.metrics["judge_score"] == 7.0


def test_step_granularity_scores_every_step_in_its_own_context() -> None:
    # the judge gives 10 to the answer turn and 0 to the thinking turn, reading the action from the prompt
    judge = Recorder(lambda c: "SCORE: 10" if "Turn 2 of the assistant:\nANSWER: 4" in c.messages[0].content else "0")
    result = JudgeCritic(judge, JudgeConfig(granularity="step")).score(_traj())
    assert result.step_rewards == (0.0, 1.0)


def test_step_prompt_shows_only_the_past() -> None:
    critic = JudgeCritic(ScriptedAgent(["0"]), JudgeConfig(granularity="step"))
    first = critic.prompts(_traj(("SECRET-FUTURE-GUESS", "ANSWER: 4")))[0]
    # turn 1's own action appears as the action under review, but the transcript before it has only obs0
    transcript = first.split("Conversation so far:\n")[1].split("\n\nTurn 1")[0]
    assert transcript == "User: obs0"


def test_reference_shown_only_when_configured() -> None:
    plain = JudgeCritic(ScriptedAgent(["0"])).prompts(_traj(answer="REF-42"))[0]
    privileged = JudgeCritic(ScriptedAgent(["0"]), JudgeConfig(reference_key="answer")).prompts(_traj(answer="REF-42"))
    assert "REF-42" not in plain
    assert "REF-42" in privileged[0]


def test_judge_agent_never_gets_the_task_object() -> None:
    judge = Recorder(lambda c: "SCORE: 1")
    JudgeCritic(judge, JudgeConfig(reference_key="answer")).score(_traj())
    assert all(c.task is None for call in judge.calls for c in call)


def test_missing_reference_key_is_a_critic_error() -> None:
    critic = JudgeCritic(ScriptedAgent(["0"]), JudgeConfig(reference_key="tests"))
    with pytest.raises(CriticError, match="no privileged 'tests'"):
        critic.score(_traj())


def test_missing_task_with_reference_is_a_critic_error() -> None:
    bare = Trajectory("demo", 0, (Step("q", AgentTurn("a"), 0.0),))
    with pytest.raises(CriticError, match=r"needs Trajectory\.task"):
        JudgeCritic(ScriptedAgent(["0"]), JudgeConfig(reference_key="answer")).score(bare)


def test_malformed_reply_raises_naming_the_step() -> None:
    critic = JudgeCritic(ScriptedAgent(["great job!"]), JudgeConfig(granularity="step"))
    with pytest.raises(JudgeParseError, match=r"trajectory 0 step 0: .*2 of 2 replies malformed"):
        critic.score(_traj())


def test_malformed_reply_recorded_with_the_configured_reward() -> None:
    cfg = JudgeConfig(on_malformed="record", malformed_reward=-1.0)
    result = JudgeCritic(ScriptedAgent(["great job!"]), cfg).score(_traj())
    assert result.step_rewards == (0.0, -1.0)
    assert result.metrics["malformed"] == 1.0
    assert "judge_score" not in result.metrics


def test_retries_reask_only_malformed_prompts() -> None:
    judge = Recorder(lambda c: "SCORE: 4" if c.turn == 1 else "hmm")
    result = JudgeCritic(judge, JudgeConfig(retries=1)).score_batch([_traj(), _traj()])
    assert [r.step_rewards[-1] for r in result] == [pytest.approx(0.4)] * 2
    assert [len(call) for call in judge.calls] == [2, 2]


def test_batch_is_one_call_over_all_prompts() -> None:
    judge = Recorder(lambda c: "SCORE: 5")
    results = JudgeCritic(judge, JudgeConfig(granularity="step")).score_batch([_traj(), _traj(("ANSWER: 4",))])
    assert len(judge.calls) == 1 and len(judge.calls[0]) == 3
    assert [len(r.step_rewards) for r in results] == [2, 1]


def test_is_a_critic_and_passes_the_base_checks() -> None:
    critic = JudgeCritic(ScriptedAgent(["SCORE: 10"]))
    assert isinstance(critic, Critic)
    assert [r.step_rewards for r in score_all(critic, [_traj(), _traj()])] == [(0.0, 1.0), (0.0, 1.0)]


def test_render_transcript_keeps_the_tail() -> None:
    text = render_transcript([Message("user", "a" * 50), Message("assistant", "END")], max_chars=10)
    assert text.startswith("...") and text.endswith("END") and len(text) == 13


def test_real_tiny_model_judge_never_gives_a_silent_zero() -> None:
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64))
    judge = HFPolicy(model, tok, max_new_tokens=6, seed=0)
    cfg = JudgeConfig(granularity="step", on_malformed="record", malformed_reward=0.5)
    result = JudgeCritic(judge, cfg).score(_traj())
    parsed = 1 if "judge_score" in result.metrics else 0
    assert result.metrics["malformed"] + parsed >= 1
    # every malformed step carries the configured 0.5, not 0
    assert result.step_rewards.count(0.5) >= result.metrics["malformed"]
