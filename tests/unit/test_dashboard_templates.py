"""The dashboard's HTML lives in templates (``page/templates/dashboard``): no module of
``web/dashboard`` holds markup in a string, so every value reaches a page through the
template environment's autoescape."""

from __future__ import annotations

import ast
import re
from pathlib import Path

DASHBOARD = Path(__file__).resolve().parents[2] / "src" / "invoicing" / "web" / "dashboard"
TAG = re.compile(
    r"</?(a|br|button|code|dd|details|div|dl|dt|fieldset|figure|form|h[1-6]|header|img|input"
    r"|label|li|line|main|meta|nav|ol|option|p|rect|section|select|span|strong|svg|table|tbody"
    r"|td|text|textarea|th|thead|tr|ul)[\s>/]",
    re.IGNORECASE,
)


def markup_in(source: str) -> list[str]:
    """The string literals of ``source`` (f-strings' parts too) that hold an HTML tag."""
    return [
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and TAG.search(node.value)
    ]


def test_no_dashboard_module_builds_html() -> None:
    found = {
        path.name: markup_in(path.read_text())
        for path in sorted(DASHBOARD.glob("*.py"))
        if markup_in(path.read_text())
    }
    assert found == {}


def test_the_check_sees_markup_in_an_f_string() -> None:
    planted = "def row(x: str) -> str:\n    return f'<td class=\"num\">{x}</td>'\n"

    assert markup_in(planted) == ['<td class="num">', "</td>"]
    assert markup_in('"""A docstring naming ``payment_address`` and a <when> placeholder."""') == []
