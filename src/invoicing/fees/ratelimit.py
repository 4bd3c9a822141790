"""The fee routes count requests with the general rate limiter (``invoicing.ratelimit``)."""

from invoicing.ratelimit import WINDOW_MS, hit

__all__ = ["WINDOW_MS", "hit"]
