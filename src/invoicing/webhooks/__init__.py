"""Paid webhooks: a durable outbox and its delivery worker."""
