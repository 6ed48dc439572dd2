"""The console's Models and experiment pages and their JSON (`registry.Registry`'s data): `/models`,
`/experiments`, `/experiments/{where}/{name}` (the runs side by side, their time series on one chart per
metric) and `/api/models`, `/api/experiments`, `/api/experiments/{where}/{name}`. An unknown place or a
name no experiment can have is a 404; a target that fails is the page's problem line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from vertexdist.console.registry import Registry


def registry_routes(registry: Registry, render: Callable[..., HTMLResponse]) -> list[Route]:
    async def models_page(request: Request) -> Response:
        data = await run_in_threadpool(registry.models)
        return render("models.html", **data)

    async def models_json(request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(registry.models))

    async def experiments_page(request: Request) -> Response:
        data = await run_in_threadpool(registry.experiments)
        return render("experiments.html", **data)

    async def experiments_json(request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(registry.experiments))

    async def _one(request: Request) -> dict[str, Any]:
        where, name = str(request.path_params["where"]), str(request.path_params["name"])
        data = await run_in_threadpool(registry.experiment, where, name)
        if data is None:
            raise HTTPException(404, "no such experiment")
        return data

    async def experiment_page(request: Request) -> Response:
        return render("experiment.html", data=await _one(request))

    async def experiment_json(request: Request) -> Response:
        return JSONResponse(await _one(request))

    return [
        Route("/models", models_page),
        Route("/api/models", models_json),
        Route("/experiments", experiments_page),
        Route("/api/experiments", experiments_json),
        Route("/experiments/{where}/{name}", experiment_page),
        Route("/api/experiments/{where}/{name}", experiment_json),
    ]
