"""Integration tests run against a real anvil node with the dev contracts deployed.

The session fixtures they use (``anvil``, ``evm``, ``dev``, ``factory``) live in
``tests/conftest.py`` so that the acceptance tests share the same node. Tests share the
chain, so each one works with fresh owners (random keys) and fresh escrow salts instead of
resetting state.
"""
