"""Thin command modules over the library. Each ``cli/<name>.py`` defines ``register(app)``."""
