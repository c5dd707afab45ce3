"""Policies: the :class:`Agent` protocol and its backends (scripted, oracle, HF, vLLM, OpenAI-compatible)."""
