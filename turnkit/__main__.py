"""``python -m turnkit ...``: the same as the ``turnkit`` command (for an environment without its script on PATH)."""

import sys

from turnkit.cli import main

sys.exit(main())
