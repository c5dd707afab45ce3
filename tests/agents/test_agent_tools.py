"""Tools over the OpenAI protocol: OpenAIAgent sends tool schemas and reads tool calls, AgentServer parses its
model's calls like vLLM's hermes parser, and HFPolicy renders tools with a chat template that takes them.

Everything is real: loopback HTTP servers (AgentServer, and a small recording server with canned replies), the
math env with sandboxed python/submit tools, and a tiny model overfit locally to write one tool call.

Run: python -m pytest tests/agents/test_agent_tools.py -q
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import gymnasium
import pytest
import torch

import turnkit
from tests.agents.conftest import TEST_CONFIG, Reply, scripted_http
from turnkit.agents.base import Context
from turnkit.agents.hf import HFPolicy, chat_prompt_ids, template_takes_tools
from turnkit.agents.openai import OpenAIAgent
from turnkit.agents.scripted import ScriptedAgent
from turnkit.agents.serve import AgentServer
from turnkit.agents.tool_messages import messages_to_wire
from turnkit.envs.math.oracle import oracle_reply_for
from turnkit.errors import AgentError
from turnkit.models.bpe import CHATML_TEMPLATE, DEFAULT_CORPUS, build_bpe_tokenizer
from turnkit.models.tiny import build_tiny_model
from turnkit.tools import PYTHON_SPEC, SUBMIT_SPEC, format_tool_call
from turnkit.types import Message

TOOLS = (PYTHON_SPEC.openai_schema(), SUBMIT_SPEC.openai_schema())
PYTHON_ONLY = (PYTHON_SPEC.openai_schema(),)
CALL_TEXT = "Let me compute.\n" + format_tool_call("python", {"code": "6*7"})
QUESTION = (Message("user", "What is 6*7?"),)

# ChatML (turnkit.models.bpe) with a Qwen-style system block listing the tools when a request has them.
TOOLS_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nYou can call these tools:\n"
    "{% for tool in tools %}{{ tool['function'] | tojson }}\n{% endfor %}"
    'Call one as <tool_call>{"name": ..., "arguments": ...}</tool_call>.<|im_end|>\n{% endif %}' + CHATML_TEMPLATE
)

# ---------------------------------------------------------------- a recording server with canned replies


@contextmanager
def recording_server(respond: Callable[[dict], tuple[int, dict | str]]) -> Iterator[tuple[str, list[dict]]]:
    """A loopback HTTP server answering each POST with ``respond(body)``; yields its base URL and the bodies."""

    def reply(_index: int, body: dict, _headers: dict) -> Reply:
        status, payload = respond(body)
        return status, (payload if isinstance(payload, str) else json.dumps(payload)).encode()

    with scripted_http(reply) as served:
        yield served


def calls_reply(name: str | None, arguments: object, content: str | None = None) -> tuple[int, dict]:
    """A chat-completions reply with one tool call (``arguments`` sent as given when it is a string; no
    ``name`` field when ``name`` is ``None``)."""
    encoded = arguments if isinstance(arguments, str) else json.dumps(arguments)
    function = {"arguments": encoded} if name is None else {"name": name, "arguments": encoded}
    call = {"id": "call_x", "type": "function", "function": function}
    message = {"role": "assistant", "content": content, "tool_calls": [call]}
    return 200, {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}


def text_reply(text: str) -> tuple[int, dict]:
    return 200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}


def agent_for(url: str, **kwargs: object) -> OpenAIAgent:
    return OpenAIAgent(url, "turnkit", **{"retries": 0, "timeout": 30.0, "token_ids": False, **kwargs})


def assert_paired(messages: list[dict]) -> None:
    """Every tool call is answered by the next message, a tool message with its id, and every tool message
    answers one (what OpenAI's API requires of a conversation)."""
    ids = []
    for i, m in enumerate(messages):
        if m.get("tool_calls"):
            (call,) = m["tool_calls"]
            json.loads(call["function"]["arguments"])
            assert messages[i + 1] == {**messages[i + 1], "role": "tool", "tool_call_id": call["id"]}
            ids.append(call["id"])
        if m["role"] == "tool":
            assert messages[i - 1].get("tool_calls") and messages[i - 1]["tool_calls"][0]["id"] == m["tool_call_id"]
    assert len(ids) == len(set(ids))


# ---------------------------------------------------------------- OpenAIAgent: requests and replies


def test_a_context_with_tools_sends_them_and_reads_the_call_as_text_the_env_parses():
    with recording_server(lambda body: calls_reply("python", {"code": "6*7"}, "Let me compute.")) as (url, seen):
        turn = agent_for(url).act([Context(messages=QUESTION, episode_seed=0, tools=TOOLS)])[0]
    assert seen[0]["tools"] == [dict(t) for t in TOOLS] and seen[0]["parallel_tool_calls"] is False
    assert turn.text == CALL_TEXT and turn.finish_reason == "tool_calls"
    env = gymnasium.make("turnkit/MathEpisodes-v0", tools=["python"])
    env.reset(seed=0)
    obs, _, _, _, info = env.step(turn.text)
    env.close()
    assert (obs, info["tool"]["status"]) == ("42\n", "ok")


def test_a_context_without_tools_is_sent_as_before():
    messages = (*QUESTION, Message("assistant", "<python>6*7</python>"), Message("tool", "42\n"))
    with recording_server(lambda body: text_reply("ANSWER: 42")) as (url, seen):
        turn = agent_for(url).act([Context(messages=messages, episode_seed=0)])[0]
    assert "tools" not in seen[0] and "parallel_tool_calls" not in seen[0]
    assert seen[0]["messages"] == [{"role": m.role, "content": m.content} for m in messages]
    assert turn.text == "ANSWER: 42"


def test_history_calls_become_tool_calls_answered_by_their_tool_messages():
    messages = (
        *QUESTION,
        Message("assistant", "First <python>x = 6*7</python>"),  # a tag-form call
        Message("tool", ""),
        Message("assistant", format_tool_call("python", {"code": "x"})),  # a <tool_call> JSON call
        Message("tool", "42\n"),
        Message("assistant", "<python>oops"),  # a malformed call: answered as a user message
        Message("user", "Your tool call was not understood."),
        Message("tool", "a tool reply that answers no call"),
    )
    wire = messages_to_wire(messages, TOOLS)
    assert_paired(wire)
    assert wire[1] == {
        "role": "assistant",
        "content": "First",
        "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "python", "arguments": '{"code": "x = 6*7"}'}}
        ],
    }
    assert wire[3]["content"] is None and wire[3]["tool_calls"][0]["id"] == "call_1"
    assert wire[4] == {"role": "tool", "tool_call_id": "call_1", "content": "42\n"}
    assert wire[5:] == [
        {"role": "assistant", "content": "<python>oops"},
        {"role": "user", "content": "Your tool call was not understood."},
        {"role": "user", "content": "a tool reply that answers no call"},
    ]


def test_a_call_nobody_answered_stays_text():
    wire = messages_to_wire((*QUESTION, Message("assistant", "<python>1</python>"), Message("user", "hm")), TOOLS)
    assert wire[1] == {"role": "assistant", "content": "<python>1</python>"}


@pytest.mark.parametrize(
    ("name", "arguments", "feedback"),
    [
        ("python", '{"code": "6*', "not valid JSON"),  # broken arguments JSON: kept raw, the env says why
        (None, '{"code": "1"}', 'a "name" string'),  # no name
        ("", '{"code": "1"}', "There is no tool named ''"),  # an empty name
        ("python", "[1, 2]", "arguments must be a JSON object"),  # valid JSON, not an object
        ("shell", '{"command": "ls"}', "There is no tool named 'shell'"),  # a tool the env does not offer
    ],
)
def test_malformed_server_tool_calls_become_feedback_from_the_env(name, arguments, feedback):
    with recording_server(lambda body: calls_reply(name, arguments)) as (url, _):
        turn = agent_for(url).act([Context(messages=QUESTION, episode_seed=0, tools=TOOLS)])[0]
    assert turn.text.startswith("<tool_call>") and turn.finish_reason == "tool_calls"
    env = gymnasium.make("turnkit/MathEpisodes-v0", tools=["python", "submit"])
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(turn.text)
    env.close()
    assert feedback in obs and info["invalid_action"] == "bad_tool_call" and (reward, terminated) == (0.0, False)


def test_a_reply_with_tool_calls_that_are_not_a_list_is_feedback_too():
    reply = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": "python"}}]}
    with recording_server(lambda body: (200, reply)) as (url, _):
        turn = agent_for(url).act([Context(messages=QUESTION, episode_seed=0, tools=TOOLS)])[0]
    env = gymnasium.make("turnkit/MathEpisodes-v0", tools=["python"])
    env.reset(seed=0)
    obs, _, _, _, info = env.step(turn.text)
    env.close()
    assert "not understood" in obs and "tool" not in info


def test_a_server_that_refuses_tools_gets_text_from_then_on():
    refusal = '{"error": {"message": "\\"auto\\" tool choice requires --enable-auto-tool-choice and '
    refusal += '--tool-call-parser to be set"}}'
    messages = (*QUESTION, Message("assistant", "<python>6*7</python>"), Message("tool", "42\n"))
    ctx = Context(messages=messages, episode_seed=0, tools=TOOLS)
    with recording_server(lambda body: (400, refusal) if "tools" in body else text_reply("ANSWER: 42")) as (url, seen):
        agent = agent_for(url)
        assert agent.act([ctx])[0].text == "ANSWER: 42"
        assert agent.act([ctx])[0].text == "ANSWER: 42"
        with pytest.raises(AgentError, match="tool choice requires"):
            agent_for(url, send_tools=True).act([ctx])
    assert ["tools" in body for body in seen] == [True, False, False, True]
    assert seen[1]["messages"][1:] == [
        {"role": "assistant", "content": "<python>6*7</python>"},
        {"role": "user", "content": "42\n"},
    ]


def test_math_episode_with_python_then_submit_through_the_openai_agent():
    env = gymnasium.make("turnkit/MathEpisodes-v0", tools=["python", "submit"])
    env.reset(seed=5)
    answer = oracle_reply_for(env.unwrapped.task).removeprefix("ANSWER: ")

    def script(body: dict) -> tuple[int, dict]:
        done = sum(m["role"] == "tool" for m in body["messages"])
        if done == 0:
            return calls_reply("python", {"code": f"answer = {answer!r}"}, "I will store it.")
        if done == 1:
            return calls_reply("python", {"code": "print(answer)"})
        return calls_reply("submit", {"answer": answer}, "Submitting.")

    with recording_server(script) as (url, seen):
        traj = turnkit.collect(env, agent_for(url), seed=5)
    env.close()
    assert traj.success and traj.error is None and len(traj.steps) == 3
    assert [m.role for m in traj.messages()] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert traj.steps[2].observation == f"{answer}\n"  # the second call read the first call's variable
    assert traj.steps[2].action.text == "Submitting.\n" + format_tool_call("submit", {"answer": answer})
    for body in seen:
        assert [t["function"]["name"] for t in body["tools"]] == ["python", "submit"]
        assert body["parallel_tool_calls"] is False
        assert_paired(body["messages"])
    assert seen[2]["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": f"{answer}\n"}


# ---------------------------------------------------------------- AgentServer: tools in, tool calls out


def post(server: AgentServer, body: object) -> tuple[int, dict]:
    request = urllib.request.Request(server.base_url + "/chat/completions", data=json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_served_agents_call_to_an_offered_tool_comes_back_as_tool_calls():
    replies = {"2+2?": "Adding.\n<submit>4</submit>", "ls?": "<shell>ls</shell>", "bad?": "<tool_call>{</tool_call>"}
    with AgentServer(ScriptedAgent(lambda ctx: replies[ctx.messages[-1].content])) as server:
        status, reply = post(server, {"messages": [{"role": "user", "content": "2+2?"}], "tools": list(TOOLS)})
        assert status == 200 and reply["choices"][0]["finish_reason"] == "tool_calls"
        message = reply["choices"][0]["message"]
        assert message["content"] == "Adding." and message["tool_calls"][0]["type"] == "function"
        assert message["tool_calls"][0]["function"] == {"name": "submit", "arguments": '{"answer": "4"}'}
        for question in ("ls?", "bad?"):  # a tool not offered, a malformed call: plain content
            _, reply = post(server, {"messages": [{"role": "user", "content": question}], "tools": list(TOOLS)})
            assert reply["choices"][0]["message"] == {"role": "assistant", "content": replies[question]}
        body = {"messages": [{"role": "user", "content": "2+2?"}], "tools": list(TOOLS), "tool_choice": "none"}
        assert "tool_calls" not in post(server, body)[1]["choices"][0]["message"]
        _, reply = post(server, {"messages": [{"role": "user", "content": "2+2?"}]})  # no tools: text
        assert reply["choices"][0]["message"]["content"] == replies["2+2?"]
        turn = agent_for(server.base_url).act([Context(messages=(Message("user", "2+2?"),), tools=TOOLS)])[0]
    assert turn.text == "Adding.\n" + format_tool_call("submit", {"answer": "4"})
    assert turn.finish_reason == "tool_calls"


def test_a_conversation_reads_the_same_on_both_sides_of_the_wire():
    messages = (
        Message("system", "Be brief."),
        *QUESTION,
        Message("assistant", CALL_TEXT),
        Message("tool", "42\n"),
        Message("assistant", format_tool_call("python", {"code": "print('é')"})),
        Message("tool", "é\n"),
    )
    seen: list[Context] = []

    def record(ctx: Context) -> str:
        seen.append(ctx)
        return "ANSWER: 42"

    with AgentServer(ScriptedAgent(record)) as server:
        agent_for(server.base_url).act([Context(messages=messages, episode_seed=0, tools=TOOLS)])
    assert seen[0].messages == messages and seen[0].tools == TOOLS


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tools": "python"}, "tools must be a list"),
        ({"tools": ["python"]}, 'tools[0] must be an object with "type": "function"'),
        ({"tools": [{"type": "function"}]}, "tools[0].function must be an object"),
        ({"tools": [{"type": "function", "function": {"name": ""}}]}, "tools[0].function.name must be a non-empty"),
        ({"tools": [*TOOLS, PYTHON_SPEC.openai_schema()]}, "tools[2]: two tools are named 'python'"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]}, "parameters must be"),
        ({"tools": list(TOOLS), "tool_choice": "required"}, 'tool_choice must be "auto" or "none"'),
        (
            {"messages": [{"role": "assistant", "content": None, "tool_calls": [{"function": {"arguments": "{}"}}]}]},
            "messages[0].tool_calls[0] needs a function with a name",
        ),
        (
            {"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}]},
            "messages[0].tool_calls[0].function.arguments is not valid JSON",
        ),
        ({"messages": [{"role": "tool", "content": None}]}, "messages[0].content must be a string"),
    ],
)
def test_bad_tool_payloads_get_400_with_the_reason(change, message):
    with AgentServer(ScriptedAgent(["x"])) as server:
        status, reply = post(server, {"messages": [{"role": "user", "content": "hi"}], **change})
    assert status == 400 and message in reply["error"]["message"]


# ---------------------------------------------------------------- HFPolicy: tools in the chat template


@pytest.fixture(scope="module")
def tools_tokenizer():
    """The ChatML BPE tokenizer with TOOLS_TEMPLATE (its merges know the call text and the python schema)."""
    schema = json.dumps(PYTHON_ONLY[0]["function"])
    tok = build_bpe_tokenizer((*DEFAULT_CORPUS, *[CALL_TEXT, schema] * 2), vocab_size=1024)
    tok.chat_template = TOOLS_TEMPLATE
    return tok


@pytest.fixture(scope="module")
def caller(tools_tokenizer):
    """A tiny model overfit (Adam, ~1-2 s) to answer QUESTION with tools offered by CALL_TEXT, greedy."""
    torch.manual_seed(0)
    model = build_tiny_model(tools_tokenizer, TEST_CONFIG, seed=0)
    prompt = chat_prompt_ids(tools_tokenizer, QUESTION, PYTHON_ONLY)
    completion = tools_tokenizer(CALL_TEXT, add_special_tokens=False)["input_ids"] + [tools_tokenizer.eos_token_id]
    ids = torch.tensor([prompt + completion])
    labels = torch.tensor([[-100] * len(prompt) + completion])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(80):
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return HFPolicy(model, tools_tokenizer, temperature=0.0, max_new_tokens=48)


def test_chat_prompts_render_tools_only_with_a_template_that_takes_them(tools_tokenizer, tokenizer):
    assert template_takes_tools(tools_tokenizer) and not template_takes_tools(tokenizer)
    with_tools = tools_tokenizer.decode(chat_prompt_ids(tools_tokenizer, QUESTION, TOOLS))
    assert with_tools.startswith("<|im_start|>system\nYou can call these tools:\n{")
    assert PYTHON_SPEC.description in with_tools and SUBMIT_SPEC.description in with_tools
    assert with_tools.endswith("<|im_start|>user\nWhat is 6*7?<|im_end|>\n<|im_start|>assistant\n")
    assert "system" not in tools_tokenizer.decode(chat_prompt_ids(tools_tokenizer, QUESTION))  # no tools: as before
    chatml = build_bpe_tokenizer()  # the plain ChatML template takes no tools
    assert chat_prompt_ids(chatml, QUESTION, TOOLS) == chat_prompt_ids(chatml, QUESTION)
    assert chat_prompt_ids(tokenizer, QUESTION, TOOLS) == chat_prompt_ids(tokenizer, QUESTION)


def test_hf_policy_prompts_with_the_contexts_tools_unless_given_exact_ids(caller, tools_tokenizer):
    turn = caller.act([Context(messages=QUESTION, episode_seed=0, tools=PYTHON_ONLY)])[0]
    assert turn.prompt_token_ids == tuple(chat_prompt_ids(tools_tokenizer, QUESTION, PYTHON_ONLY))
    assert turn.text == CALL_TEXT and turn.finish_reason == "stop"  # the fixture learnt its call
    exact = tuple(chat_prompt_ids(tools_tokenizer, QUESTION))
    ctx = Context(messages=QUESTION, episode_seed=0, tools=PYTHON_ONLY, prompt_token_ids=exact)
    assert caller.act([ctx])[0].prompt_token_ids == exact


def test_a_served_hf_policy_renders_the_tools_and_returns_its_call_as_tool_calls(caller, tools_tokenizer):
    body = {"messages": [{"role": "user", "content": QUESTION[0].content}], "tools": list(PYTHON_ONLY)}
    with AgentServer(caller) as server:
        status, reply = post(server, {**body, "return_token_ids": True, "seed": 1})
        agent = agent_for(server.base_url, token_ids=True, temperature=0.0)
        turn = agent.act([Context(messages=QUESTION, tools=PYTHON_ONLY)])[0]
    assert status == 200 and reply["prompt_token_ids"] == chat_prompt_ids(tools_tokenizer, QUESTION, PYTHON_ONLY)
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] == "Let me compute."
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "python", "arguments": '{"code": "6*7"}'}
    assert tools_tokenizer.decode(choice["token_ids"], skip_special_tokens=True) == CALL_TEXT
    assert turn.text == CALL_TEXT and turn.finish_reason == "tool_calls"  # the model's own text, back again
    assert tools_tokenizer.decode(list(turn.token_ids), skip_special_tokens=True) == CALL_TEXT
