"""Adapters between turnkit and other training and serving stacks.

Each module wraps one outside library and imports it only when used:

* :mod:`turnkit.integrations.trl`: TRL's ``GRPOTrainer`` trains on any registered turnkit env (multi-turn,
  token-exact, through its ``rollout_func`` hook); ``turnkit synth`` datasets train with ``DPOTrainer``.
* :mod:`turnkit.integrations.openenv`: serve any registered env as an OpenEnv server
  (``turnkit serve-env ENV_ID``), or wrap a remote OpenEnv env as a :class:`turnkit.TextEnv`.
* :mod:`turnkit.integrations.verifiers`: any registered env as a verifiers (prime-rl, Environments Hub)
  environment, ``load_environment(env_id, seeds=..., **env_kwargs)``; taskset id ``turnkit-verifiers``.
  :mod:`turnkit.integrations.verifiers_chat` locks verifiers' chat program once (``python -m
  turnkit.integrations.verifiers``), so its episodes run with no network afterwards.

See ``docs/integrations.md``.
"""
