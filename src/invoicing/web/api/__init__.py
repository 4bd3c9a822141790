"""The JSON API: validates input, checks credentials, calls the domain, shapes responses."""
