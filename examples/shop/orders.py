"""The shop's orders, in one SQLite file (``:memory:`` for a throwaway run).

An example's storage: one table, one connection behind a lock. A real shop keeps orders in
its own database; what matters here is that marking an order paid is idempotent, because
webhooks arrive at least once.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class Order:
    id: str
    product: str
    amount: str  # the price, a decimal string in ``currency``
    currency: str  # ISO 4217, "USD"
    # "pending" until the paid webhook is verified, then "paid" (the money waits in the
    # escrow), then "shipped" once its invoice is captured.
    status: str
    payment_address: str | None
    payment_url: str | None
    paid_at: int | None
    # What the invoice locked the price into at checkout: wei, as a decimal string.
    required_raw: str | None


class Orders:
    def __init__(self, path: str) -> None:
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._lock = threading.Lock()
        with self._lock, self._db:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, product TEXT NOT NULL,"
                " amount TEXT NOT NULL, currency TEXT NOT NULL, status TEXT NOT NULL,"
                " payment_address TEXT UNIQUE, payment_url TEXT, paid_at INTEGER,"
                " required_raw TEXT)"
            )

    def new(self, product: str, amount: str, currency: str) -> Order:
        order = Order(
            uuid.uuid4().hex, product, amount, currency, "pending", None, None, None, None
        )
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO orders (id, product, amount, currency, status) VALUES (?, ?, ?, ?, ?)",
                (order.id, product, amount, currency, order.status),
            )
        return order

    def attach_invoice(
        self, order_id: str, payment_address: str, payment_url: str, required_raw: int
    ) -> None:
        with self._lock, self._db:
            self._db.execute(
                "UPDATE orders SET payment_address = ?, payment_url = ?, required_raw = ?"
                " WHERE id = ?",
                (payment_address, payment_url, str(required_raw), order_id),
            )

    def get(self, order_id: str) -> Order | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM orders WHERE id = ?", (order_id,)).fetchone()
        return Order(*row) if row else None

    def by_payment_address(self, payment_address: str) -> Order | None:
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM orders WHERE payment_address = ?", (payment_address,)
            ).fetchone()
        return Order(*row) if row else None

    def mark_paid(self, order_id: str) -> bool:
        """Paid once; a repeated webhook changes nothing. True when this call marked it."""
        with self._lock, self._db:
            changed = self._db.execute(
                "UPDATE orders SET status = 'paid', paid_at = ?"
                " WHERE id = ? AND status = 'pending'",
                (int(time.time() * 1000), order_id),
            ).rowcount
        return changed == 1

    def mark_shipped(self, order_id: str) -> bool:
        """Shipped once, from paid. True when this call marked it."""
        with self._lock, self._db:
            changed = self._db.execute(
                "UPDATE orders SET status = 'shipped' WHERE id = ? AND status = 'paid'",
                (order_id,),
            ).rowcount
        return changed == 1

    def close(self) -> None:
        self._db.close()
