"""The web console: the built single-page app (``dist/``, package data) and its resources."""
