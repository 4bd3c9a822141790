"""``RequestRoute`` calls a request-only handler directly and leaves every other handler to
FastAPI: what a route answers, the errors its app's handlers write and the dependencies it
declares are the same either way."""

from __future__ import annotations

import httpx
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.responses import Response

from invoicing.web.api import invoices
from invoicing.web.requestroute import RequestRoute, takes_request_only


class Refused(Exception):
    pass


def app_with(router: APIRouter) -> httpx.AsyncClient:
    app = FastAPI()

    @app.exception_handler(Refused)
    async def _refused(_request: Request, exc: Refused) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=409)

    app.include_router(router)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


async def test_a_request_only_handler_answers_and_its_errors_reach_the_apps_handlers() -> None:
    router = APIRouter(route_class=RequestRoute)

    @router.post("/echo", status_code=201)
    async def echo(request: Request) -> Response:
        body = await request.body()
        if body == b"no":
            raise Refused("refused")
        return JSONResponse({"got": body.decode(), "q": request.query_params.get("q")}, 201)

    client = app_with(router)

    assert (await client.post("/echo?q=1", content=b"yes")).json() == {"got": "yes", "q": "1"}
    refused = await client.post("/echo", content=b"no")
    assert (refused.status_code, refused.json()) == (409, {"error": "refused"})
    assert (await client.get("/echo")).status_code == 405


async def test_handlers_with_parameters_or_dependencies_are_left_to_fastapi() -> None:
    seen: list[str] = []

    def dependency(request: Request) -> None:
        seen.append(request.url.path)

    router = APIRouter(route_class=RequestRoute)

    @router.get("/depends", dependencies=[Depends(dependency)])
    async def with_dependency(request: Request) -> Response:
        return JSONResponse({"ok": True})

    @router.get("/query")
    async def with_query(request: Request, q: int) -> Response:
        return JSONResponse({"q": q})

    client = app_with(router)

    assert (await client.get("/depends")).json() == {"ok": True}
    assert seen == ["/depends"]
    assert (await client.get("/query?q=7")).json() == {"q": 7}
    assert (await client.get("/query?q=x")).status_code == 422  # FastAPI's validation, as before


def test_the_invoice_routes_are_called_directly() -> None:
    routes = [route for route in invoices.router.routes if isinstance(route, RequestRoute)]

    assert len(routes) == len(invoices.router.routes) == 4
    assert all(takes_request_only(route.dependant) for route in routes)
