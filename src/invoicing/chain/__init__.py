"""Everything that talks to an EVM chain: JSON-RPC, contracts, the dev node."""
