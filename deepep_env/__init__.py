"""deepep-env: install, verify and run DeepEP from versioned, locked, hardware-aware environments."""

__version__ = "0.2.0"
