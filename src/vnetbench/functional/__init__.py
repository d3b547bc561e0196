"""The user-facing functional matrix (``tox -e functional``, ``vnetbench functional``):
the seed's isolation, rate-limiting, fault-tolerance and migration tests as a pytest
suite (``tests/``), their verdicts and the matrix writers."""
