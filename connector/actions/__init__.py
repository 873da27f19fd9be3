"""The §2.7 device actions: each one a function of (workspace, payload) to an ``ActionResult``."""
