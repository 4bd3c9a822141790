"""Request authentication: API keys and EIP-191 request signatures."""
