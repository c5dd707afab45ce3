"""Import the package before pytest collects anything.

With ``--import-mode=importlib`` and ``--doctest-modules``, a module file collected before ``turnkit`` was
imported gets loaded as a second copy (its enums and classes then differ from the package's). Importing
the package here, before collection, makes every test and doctest share one copy.
"""

import turnkit  # noqa: F401
