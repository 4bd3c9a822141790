"""Values of every JSON type and odd shape, for the tests that send them where something else
is expected."""

from __future__ import annotations

from typing import Any

ODD_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    2**300,
    1.5,
    float("1e308"),
    "",
    " ",
    "0x",
    "0x" + "g" * 40,
    "\u0000",
    "☃" * 50,
    "9" * 500,
    [],
    {},
    [1, {"a": None}],
    {"nested": {"deep": [[[]]]}},
]
