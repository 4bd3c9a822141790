"""Reading ``/metrics`` as Prometheus would."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample of an exposition, by (name, labels)."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def scrape(http: httpx.AsyncClient, headers: dict[str, str] | None = None) -> Samples:
    response = await http.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    return parse(response.text)


def value(samples: Samples, name: str, **labels: str | int) -> float:
    """A sample's value; 0 when the series does not exist (yet)."""
    key = (name, frozenset((k, str(v)) for k, v in labels.items()))
    return samples.get(key, 0.0)
