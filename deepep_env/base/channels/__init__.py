"""Conda channels the tool reads from and publishes to.

``deepep_env.base.channels.auth`` is the one place credentials are looked up (environment, rattler's
auth file, keyring, netrc), turned into a ``rattler.Client`` for ``lock``/``install``, and
scrubbed from every message (:func:`~deepep_env.base.channels.auth.redact`).
"""
from deepep_env.base.channels.auth import (
    Credentials,
    authenticated_client,
    credentials_for,
    redact,
    redact_data,
)

__all__ = ["Credentials", "authenticated_client", "credentials_for", "redact", "redact_data"]
