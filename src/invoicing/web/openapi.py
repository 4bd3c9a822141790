"""The OpenAPI document of the app, built without a database or a chain."""

from __future__ import annotations

import json
import sys
from typing import Any

from invoicing.chain.chains import ChainRegistry
from invoicing.db import Database
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.web.app import create_app


def build_schema() -> dict[str, Any]:
    settings = Settings(environment="development", database_url="sqlite:///:memory:")
    services = Services(
        settings=settings, db=Database(settings.database_url), chains=ChainRegistry({})
    )
    schema: dict[str, Any] = create_app(services, run_workers_in_process=False).openapi()
    return schema


def main() -> None:
    sys.stdout.write(json.dumps(build_schema(), indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
