"""WebShop-style shopping (Yao et al. 2022) on a real loopback HTTP server: ``turnkit/WebShop-v0``.

Modules: :mod:`~.taxonomy` (product types, splits' held-out values), :mod:`~.catalogue` (a shop and a goal
per seed), :mod:`~.search`, :mod:`~.reward` (WebShop's purchase reward), :mod:`~.pages` and :mod:`~.server`
(the HTTP shop), :mod:`~.client`, :mod:`~.view` and :mod:`~.renderers` (how an env reads a page),
:mod:`~.env`, :mod:`~.oracle` and :mod:`~.baselines`.
"""
