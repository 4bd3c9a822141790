"""The payment monitor: reads escrow balances and moves invoices pending → paid / expired."""
