"""``/api/meta-models`` (admin): meta-model CRUD and validation (console contract §6.3).

A write runs the program's reference checks and the name check in its own transaction, then
announces ``CATALOG`` so every node's gateway sees the new program.  ``validate`` runs every
check and stores nothing.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import ApiError, json_route, make_app, read_object
from console.services.catalog import tx as catalog_tx
from console.services.catalog.meta_model_inputs import (
    MetaModelInput,
    meta_model_view,
    plan_of,
    program_problem,
    read_meta_model,
)
from console.validation import Body
from gateway.store import meta_models as store


class MetaModelRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    async def _write(self, fn: Any, *args: Any) -> dict[str, Any]:
        try:
            return await catalog_tx.write(self.ctx, fn, *args)
        except store.ProgramRefused as refused:
            raise program_problem(refused.problems[0], refused.problems) from None

    @staticmethod
    def _answer(row: dict[str, Any], given: MetaModelInput) -> dict[str, Any]:
        return {"meta_model": meta_model_view(row), "plan": plan_of(given)}

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> list[dict[str, Any]]:
        await self.ctx.sessions.admin(request)
        rows = await self.ctx.db.transaction(store.list_meta_models)
        return [meta_model_view(row) for row in rows]

    @app.route("/", methods=["POST"])
    @json_route
    async def create(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        given = read_meta_model(Body(read_object(request)), creating=True)
        row = await self._write(store.create_meta_model, given.values, given.problems,
                                given.referenced, self.ctx.now())
        return self._answer(row, given)

    @app.route("/validate", methods=["POST"])
    @json_route
    async def validate(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        try:
            given = read_meta_model(Body(read_object(request)), creating=True, validating=True)
            await catalog_tx.run(self.ctx, store.validate_program, given.problems,
                                 given.referenced)
        except store.ProgramRefused as refused:
            raise program_problem(refused.problems[0], refused.problems) from None
        except ApiError as refused:
            refused.extra.setdefault("valid", False)
            refused.extra.setdefault("errors", [refused.message])
            raise
        return {"plan": plan_of(given), "valid": True, "errors": []}

    @app.route("/<int:item_id>", methods=["GET"])
    @json_route
    async def show(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        row = await catalog_tx.run(self.ctx, store.get_meta_model, item_id)
        return {"meta_model": meta_model_view(row), "plan": plan_of(row)}

    @app.route("/<int:item_id>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        given = read_meta_model(Body(read_object(request)), creating=False)
        row = await self._write(store.update_meta_model, item_id, given.values, given.problems,
                                given.referenced, self.ctx.now())
        return self._answer(row, given)

    @app.route("/<int:item_id>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, item_id: int) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        await catalog_tx.write(self.ctx, store.delete_meta_model, item_id)
        return {"message": "Meta model deleted"}
