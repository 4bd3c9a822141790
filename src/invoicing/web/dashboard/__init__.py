"""The merchant dashboard (docs/dashboard.md): server-rendered pages under ``/dashboard``,
signed in with the owner's wallet (Sign-In with Ethereum) or a login link. Every action
calls the same domain code as the API."""
