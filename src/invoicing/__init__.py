"""Self-hostable crypto invoicing for EVM chains."""

__version__ = "0.1.0"
