"""Web task families: a WebShop-style shop on a loopback HTTP server, and MiniWoB++ pages in Chromium."""
