"""Invoices: creation, lookup, listing, deletion and their state."""
