"""Reading a meta-model body (console contract §6.3, D9): both spellings, the program, prices.

The checks that need no database run here, in the contract's order: name, billing mode,
prices, DSL present, parse, then the program's own checks; the reference checks need the
catalog and run in the write's transaction (``gateway.store.meta_models``).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from console.http import ApiError, bad_request
from console.user_view import timestamp
from console.validation import MISSING, Body
from gateway.billing.money import format_nanos, to_nanos
from gateway.metamodels.checks import ModelKind, problems
from gateway.metamodels.evaluate import referenced_models
from gateway.metamodels.lexer import DslError
from gateway.metamodels.parser import parse
from gateway.metamodels.plan_reader import PlanError, from_plan
from gateway.metamodels.program import Program, render, to_plan

NAME_MAX = 100
DESCRIPTION_MAX = 2000
DSL_MAX = 64 * 1024
BILLING_MODES = ("actual", "meta")
PRICE_FIELDS = ("input_price", "output_price", "cached_input_price")
#: the name ``validate`` checks against when the body names none
PLACEHOLDER_NAME = "__meta_model_validation__"


@dataclass(frozen=True)
class MetaModelInput:
    values: dict[str, Any]
    program: Program

    @property
    def referenced(self) -> list[str]:
        return referenced_models(self.program)

    def problems(self, lookup: Any) -> list[str]:
        """Every problem of the program once ``lookup`` (name -> kind) is known."""
        kinds: dict[str, ModelKind] = {}

        def kind(name: str) -> ModelKind:
            if name not in kinds:
                kinds[name] = lookup(name)
            return kinds[name]

        return problems(self.program, name=self.values["model_name"], lookup=kind)


def program_problem(message: str, all_problems: list[str] | None = None) -> ApiError:
    """A refused program: the first problem as ``error``, all of them in ``errors``."""
    return ApiError(400, message, field="dsl",
                    extra={"valid": False, "errors": all_problems or [message]})


def _source(body: Body) -> str | Program | None:
    """The program as given: source text, or a plan object already read."""
    raw = body.data.get("dsl")
    if raw is None:
        raw = body.data.get("definition")
    if raw is None:
        return None
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict):
        for key in ("dsl", "source"):
            if isinstance(raw.get(key), str):
                return str(raw[key])
        if "root" in raw:
            try:
                return from_plan(raw)
            except PlanError as exc:
                raise program_problem(str(exc)) from None
    raise bad_request("definition must be DSL source text or a plan object", field="definition")


def _price(body: Body, name: str) -> Decimal:
    value = body.decimal(name, allow_negative=True)
    return Decimal(0) if value is MISSING else value


def read_meta_model(body: Body, *, creating: bool, validating: bool = False) -> MetaModelInput:
    model_name = body.string("model_name", max_length=NAME_MAX)
    label = body.string("name", max_length=NAME_MAX)
    model_name = model_name or label or (PLACEHOLDER_NAME if validating else "")
    if not model_name:
        raise bad_request("Meta model name is required", field="model_name")
    billing_mode = body.string("billing_mode")
    billing_mode = billing_mode or "actual"
    if billing_mode not in BILLING_MODES:
        raise bad_request("Invalid billing mode", field="billing_mode")
    prices = {name: _price(body, name) for name in PRICE_FIELDS}
    if any(price < 0 for price in prices.values()):
        raise bad_request("Prices must not be negative",
                          field=next(n for n, p in prices.items() if p < 0))
    if billing_mode == "actual":
        prices = dict.fromkeys(PRICE_FIELDS, Decimal(0))
    given = _source(body)
    if given is None or (isinstance(given, str) and not given.strip()):
        raise bad_request("DSL is required", field="dsl")
    if isinstance(given, str):
        if len(given) > DSL_MAX:
            raise bad_request(f"DSL must be at most {DSL_MAX} characters", field="dsl")
        try:
            program = parse(given)
        except DslError as exc:
            raise program_problem(str(exc)) from None
        source = given
    else:
        program, source = given, render(given)
    values: dict[str, Any] = {
        "model_name": model_name, "name": label or model_name,
        "description": body.string("description", max_length=DESCRIPTION_MAX) or "",
        "dsl": source, "billing_mode": billing_mode,
        "provider": body.string("provider", max_length=NAME_MAX) or "meta",
        "provider_name": body.string("provider_name", max_length=NAME_MAX) or "Meta Module",
        "provider_icon_url": body.string("provider_icon_url", max_length=2000) or "",
        **{f"{name}_nanos": to_nanos(price) for name, price in prices.items()},
    }
    for flag in ("enabled", "expose_referenced_models"):
        value = body.boolean(flag)
        if value is not MISSING:
            values[flag] = value
        elif creating:
            values[flag] = True
    return MetaModelInput(values, program)


def meta_model_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"], "name": row["name"], "model_name": row["model_name"],
        "description": row["description"], "dsl": row["dsl"], "definition": row["dsl"],
        "provider": row["provider"], "provider_name": row["provider_name"],
        "provider_icon_url": row["provider_icon_url"],
        "expose_referenced_models": bool(row["expose_referenced_models"]),
        "billing_mode": row["billing_mode"],
        **{name: format_nanos(row[f"{name}_nanos"]) for name in PRICE_FIELDS},
        "enabled": bool(row["enabled"]),
        "created_at": timestamp(row["created_at"]), "updated_at": timestamp(row["updated_at"]),
    }


def plan_of(row_or_input: MetaModelInput | dict[str, Any]) -> dict[str, Any]:
    if isinstance(row_or_input, MetaModelInput):
        return to_plan(row_or_input.program)
    return to_plan(parse(row_or_input["dsl"]))
