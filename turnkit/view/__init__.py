"""``turnkit view``: a local web page over run, eval and synth folders (runs, episodes, search trees).

One job per module: :mod:`~turnkit.view.folders` finds the folders and reads files without raising,
:mod:`~turnkit.view.index` pages a large ``trajectories.jsonl`` through a byte-offset index,
:mod:`~turnkit.view.runs` and :mod:`~turnkit.view.trees` shape what the Runs and Search views show,
:mod:`~turnkit.view.api` answers the JSON API and :mod:`~turnkit.view.server` serves it with the page
(``static/``: plain HTML, CSS and JavaScript; no CDN, works offline) on a loopback address.

Example:
    >>> from turnkit.view import make_server
    >>> import tempfile
    >>> server = make_server(tempfile.mkdtemp())  # a free port on 127.0.0.1; serve_forever() to answer
    >>> server.url.startswith("http://127.0.0.1:")
    True
    >>> server.server_close()
"""

from turnkit.view.api import ViewerApi
from turnkit.view.index import EpisodeIndex
from turnkit.view.server import ViewerServer, make_server

__all__ = ["EpisodeIndex", "ViewerApi", "ViewerServer", "make_server"]
