"""Shared fixtures for the agent backend tests: a tiny random-weight model (hidden 64, 2 layers)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

from turnkit.agents.base import Context
from turnkit.agents.hf import HFPolicy
from turnkit.models.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from turnkit.types import Message

TEST_CONFIG = TinyModelConfig(hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128)


@pytest.fixture(scope="session")
def tokenizer() -> PreTrainedTokenizerFast:
    return build_tiny_tokenizer()


@pytest.fixture(scope="session")
def model(tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    return build_tiny_model(tokenizer, TEST_CONFIG, seed=0)


@pytest.fixture
def policy(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast) -> HFPolicy:
    return HFPolicy(model, tokenizer, max_new_tokens=24)


def make_context(text: str, *, seed: int | None = 0, turn: int = 0) -> Context:
    return Context(messages=(Message("user", text),), episode_seed=seed, turn=turn)


# ---------------------------------------------------------------- test-only HTTP server

Reply = tuple[int, bytes]


@contextmanager
def scripted_http(respond: Callable[[int, dict, dict], Reply]) -> Iterator[tuple[str, list[dict]]]:
    """A loopback server answering POSTs with ``respond(request_index, body, headers)``; yields the base URL
    and the list of received request bodies (with headers under ``"_headers"``, the path under ``"_path"``)."""
    received: list[dict] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                index = len(received)
                received.append({**body, "_headers": dict(self.headers), "_path": self.path})
            status, data = respond(index, body, dict(self.headers))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            return None

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", received
    finally:
        httpd.shutdown()
        httpd.server_close()
