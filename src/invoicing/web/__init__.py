"""Every HTTP surface of the service, on top of the domain; nothing below imports it.

- ``app.py`` assembles one FastAPI app from the surfaces (and the worker-only health app);
  ``errors.py``, ``cors.py``, ``observability.py`` and ``health.py`` serve them all.
- ``routedocs.py``: how a route documents itself in ``openapi.json`` (``openapi.py`` prints it).
- ``context.py``: what a request carries (the app's ``Services``, the client's address).
- ``api/``: the JSON API (``/integration/*``, ``/fees/*``), its input models and its response
  models, the one wire shape of each resource.
- ``page/``: the hosted payment page (``/pay/*``).

A new surface (a dashboard) is one more sub-package beside ``api/`` and ``page/``, with its
router included in ``app.py``.
"""
