"""Build code of the reference site (``make docs``; see docs/release.md, "The reference site").

The pages under ``reference/`` are generated on every build from the code, never committed:

* :mod:`.cli_reference`: the ``turnkit`` command's sub-commands and options, from ``turnkit.cli.build_parser()``;
* :mod:`.env_catalogue`: one page per registered ``turnkit/`` env, with an oracle episode played at build time;
* :mod:`.api_reference`: the public modules, their mkdocstrings pages and the missing-docstring check.

:mod:`.hooks` hands them to MkDocs; :mod:`.build` is what ``make docs`` runs; :mod:`.screenshot` photographs
the built site with turnkit's own Chromium. Nothing here imports MkDocs at module level, so the test suite
(which imports every ``.py`` under ``docs/`` for its doctests) needs no docs packages.
"""
