"""The fee routes' request counters are the general rate limiter's (``invoicing.ratelimit``)."""

from invoicing.ratelimit import RateLimitWindow

__all__ = ["RateLimitWindow"]
