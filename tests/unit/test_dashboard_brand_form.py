"""The dashboard's brand form shows back what a stranger typed (a refused form is shown again
with its values): any text comes back as the same attribute value, never as markup, and only
the refused field is marked invalid and described by its error."""

from __future__ import annotations

from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st

from invoicing.brand.service import Brand
from invoicing.errors import InvalidRequest
from invoicing.web.dashboard.brand_page import FIELD_IDS, brand_form_html, preview_html
from invoicing.web.dashboard.session import Owner

OWNER = Owner("0x" + "ab" * 20, "0x" + "ab" * 20, "csrf-token", "session-id")


class Parts(HTMLParser):
    """Every element's attributes, and the text of the ``<text>`` of an SVG."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.svg_text: list[str] = []
        self._in_text = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        self._in_text = tag == "text"

    def handle_endtag(self, tag: str) -> None:
        self._in_text = False

    def handle_data(self, data: str) -> None:
        if self._in_text:
            self.svg_text.append(data)

    def by_id(self, element_id: str) -> dict[str, str | None]:
        (found,) = [attrs for _tag, attrs in self.elements if attrs.get("id") == element_id]
        return found


def parts(html: str) -> Parts:
    parser = Parts()
    parser.feed(html)
    parser.close()
    return parser


# What survives an HTML attribute as typed (a browser would also normalise \r and NUL).
TYPED = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\r\x00"))


@settings(max_examples=200, deadline=None)
@given(TYPED, TYPED, st.sampled_from([None, *FIELD_IDS]))
def test_typed_values_come_back_as_typed_and_only_the_refused_field_is_invalid(
    name: str, colour: str, refused: str | None
) -> None:
    error = None if refused is None else InvalidRequest("bad <b>", {"field": refused})

    found = parts(brand_form_html(OWNER, {"displayName": name, "accentColor": colour}, error))

    assert found.by_id("brand-name")["value"] == name
    assert found.by_id("brand-accent")["value"] == colour
    assert [tag for tag, _ in found.elements].count("script") == 0
    invalid = [attrs["id"] for _, attrs in found.elements if attrs.get("aria-invalid")]
    assert invalid == ([] if refused is None else [FIELD_IDS[refused]])
    for field, field_id in FIELD_IDS.items():
        described = (found.by_id(field_id)["aria-describedby"] or "").split()
        wanted = [f"{field_id}-hint"] + ([f"{field_id}-error"] if field == refused else [])
        assert described == wanted


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\r\x00"), min_size=1))
def test_the_preview_names_the_shop_in_text_never_in_markup(name: str) -> None:
    brand = Brand(display_name=name, accent_color="#1a6b3c", text_color="#ffffff")

    found = parts(preview_html(brand))

    shown = "".join(found.svg_text)
    assert shown == (name if len(name) <= 20 else name[:19] + "…")
    assert [tag for tag, _ in found.elements] == ["span", "svg", "rect", "text"]
    assert found.by_id("accent-preview")["class"] == "swatch"
