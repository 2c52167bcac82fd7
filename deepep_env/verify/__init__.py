"""Verified environments (issue 28): test records bound to the lock digest, and what they prove.

- :mod:`digest`: the identity a record is valid for (one function, used by every reader);
- :mod:`figures`: DeepEP's printed figures (GB/s, µs) as name → number;
- :mod:`fingerprint`: the host a record was made on, from the host probe;
- :mod:`records`: write and read ``verified/ENV/*.json``;
- :mod:`keys`: ed25519 signing keys and trust files (issue 54);
- :mod:`attest`: a record's in-toto Test Result statement in a DSSE envelope, signed and checked;
- :mod:`matrix`: env × platform × test, the plan's verdict, the records a lock change drops.
"""
