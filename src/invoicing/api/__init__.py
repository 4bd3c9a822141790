"""The HTTP layer: validates input, checks credentials, calls the domain, shapes responses."""
