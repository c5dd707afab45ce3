"""MiniWoB++ web tasks in turnkit's headless Chromium (``turnkit/MiniWoB-v0``); see :mod:`.env`."""
