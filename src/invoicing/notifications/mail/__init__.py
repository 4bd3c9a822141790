"""Mail: the events an owner chose, mailed to the owner through an SMTP server.

Like webhooks, mail goes through an outbox written in the transaction of the move that
causes it (``queue.mail_rows``, called by ``notifications.record``), and a worker sends it
with leases and retries (``worker``); nothing is sent on a request's path.

- ``models``: an owner's mail settings and the mail outbox;
- ``choices``: reading and changing an owner's mail settings;
- ``queue``: the outbox rows of a transaction's events;
- ``texts``: subject and body in the payer page's eight languages (``locales/``);
- ``smtp``: the ``Mailer`` interface, its SMTP implementation and its fake;
- ``worker``: claims due messages, sends them, records the result.
"""
