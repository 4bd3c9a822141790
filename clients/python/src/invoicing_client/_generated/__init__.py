# Generated from openapi.json by `make sdk` (clients/sdkgen): do not edit.
"""What ``make sdk`` writes from openapi.json: the models and the routes."""
