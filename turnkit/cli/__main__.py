"""``python -m turnkit.cli ...``: the same as the ``turnkit`` command."""

import sys

from turnkit.cli import main

sys.exit(main())
