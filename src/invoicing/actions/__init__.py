"""Owner actions, the use cases the API and the dashboard both offer, written once below the
web layer: issuing and ending keys and secrets, test pings and redeliveries (``keys``), and the
signed money actions' prepare steps (``signing``). The routes only authenticate, read their
input and shape the answer."""
