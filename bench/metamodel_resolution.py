"""What resolving a meta model adds to one /v1 request, timed piece by piece in one process.

Issue 17's goal: a program with 10 branches must add under 20 µs per request.  The program
below is a ``route`` with nine conditions (one of every variable family and most operators,
a regular expression included) and an ``otherwise``; the request matches none of them, so
every condition is evaluated (the worst case for a route).  Timed with the gateway's own code:

- ``variables``: ``call_variables`` -- the request variables the program reads, from the
  parsed body (the pipeline parses it anyway), plus the caller's;
- ``evaluate``: ``resolve`` over those variables, down to the model to call;
- ``reserve``: ``MetaReserve.nanos`` -- the worst case over the ten models the program can
  reach (two channels each) on an in-memory catalog snapshot;
- ``total``: the three in a row, which is what ``route_meta`` runs for such a program.

    .venv/bin/python bench/metamodel_resolution.py [--n 50000]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson

from gateway.auth import Caller
from gateway.catalog.snapshot import (
    CatalogSnapshot,
    Channel,
    Group,
    Model,
    ModelConfig,
    UserChannel,
)
from gateway.metamodels.compiled import compile_meta
from gateway.metamodels.evaluate import resolve
from gateway.protocols.request import parse_client_request
from gateway.user_cache import GatewayUser
from gateway.v1.meta_reserve import MetaReserve
from gateway.v1.meta_resolution import call_variables

PROGRAM = r"""
route {
  when request.has_image == true => call "m1"
  when request.has_audio == true => call "m2"
  when request.total_estimated_tokens > 32000 => call "m3"
  when request.tool_count >= 5 => call "m4"
  when request.system contains "translator" => call "m5"
  when user.group == "enterprise" => call "m6"
  when api_key.name starts_with "batch-" => call "m7"
  when request.last_user_message matches "(?i)\\bkernel\\b" => call "m8"
  when request.temperature > 1.5 => call "m9"
  otherwise => call "m10"
}
"""
BODY = orjson.dumps({
    "model": "smart",
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Summarise the following paragraph in two sentences. " * 8},
        {"role": "assistant", "content": "Sure, here is a summary of the paragraph."},
        {"role": "user", "content": "Now make it shorter, please, and keep the tone."},
    ],
    "temperature": 0.7,
    "max_tokens": 512,
})
MODELS = [f"m{i}" for i in range(1, 11)]


def snapshot() -> CatalogSnapshot:
    prices = {"input_price": Decimal("0.5"), "output_price": Decimal("1.5")}
    models = [Model(id=i, model_name=name, display_name=name, provider="custom",
                    provider_icon_url="", quota_type=0, enabled=True,
                    prices={**prices, "input_price": Decimal(i)}, tiers={},
                    video_billing_config=None)
              for i, name in enumerate(MODELS, 1)]
    channels = [Channel(id=c, user_channel_id=1, name=f"up{c}", type="compat",
                        base_url="http://127.0.0.1:9", api_key="k", priority=0, weight=1,
                        enabled=True) for c in (1, 2)]
    configs = [ModelConfig(id=m.id * 10 + c.id, channel_id=c.id, model_id=m.id,
                           upstream_model_name="", enabled=True, price_overrides={})
               for m in models for c in channels]
    return CatalogSnapshot(
        groups=[Group(1, "default", Decimal(1))],
        user_channels=[UserChannel(id=1, name="standard", description="",
                                   multiplier=Decimal(1), routing_algorithm="priority",
                                   enabled=True, rate_limit_enabled=False,
                                   rate_limit_requests_per_minute=0, rate_limit_burst=0)],
        channels=channels, models=models, configs=configs)


def per_call_us(fn: Callable[[], object], n: int, rounds: int = 5) -> float:
    """CPU time per call, the best of ``rounds`` rounds (other processes on a shared machine
    only ever add time, as ``timeit`` reasons)."""
    for _ in range(min(n, 2000)):  # warm caches (regex, routing inputs, prices)
        fn()
    best = float("inf")
    per_round = max(1, n // rounds)
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(per_round):
            fn()
        best = min(best, (time.process_time() - start) * 1e6 / per_round)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=50_000)
    n = parser.parse_args().n
    meta = compile_meta({
        "id": 1, "model_name": "smart", "name": "smart", "description": "", "dsl": PROGRAM,
        "provider": "meta", "provider_name": "Meta Module", "provider_icon_url": "",
        "expose_referenced_models": True, "billing_mode": "actual", "input_price_nanos": 0,
        "output_price_nanos": 0, "cached_input_price_nanos": 0})
    catalog = snapshot()
    caller = Caller(user=GatewayUser(id=7, enabled=True, is_admin=False, token_version=0,
                                     primary_group_id=1, memberships=()), key=None, ip="")
    request = parse_client_request("chat", BODY)
    variables = call_variables(catalog, caller, request, False, meta.variables)
    draw = random.Random(1).random
    assert resolve(meta.program.root, variables, draw).model == "m10"  # type: ignore[union-attr]

    def variables_step() -> object:
        return call_variables(catalog, caller, request, False, meta.variables)

    def evaluate_step() -> object:
        return resolve(meta.program.root, variables, draw)

    def reserve_step() -> object:
        return MetaReserve(catalog, 7, [1], (), "min").nanos(meta, 300, 512, 4096)

    def total_step() -> object:
        found = call_variables(catalog, caller, request, False, meta.variables)
        resolve(meta.program.root, found, draw)
        return MetaReserve(catalog, 7, [1], (), "min").nanos(meta, 300, 512, 4096)

    print(f"10-branch meta model, {len(BODY)}-byte chat body, n={n}")
    for label, fn in (("variables", variables_step), ("evaluate", evaluate_step),
                      ("reserve", reserve_step), ("total", total_step)):
        print(f"  {label:<10} {per_call_us(fn, n):7.2f} µs per request")


if __name__ == "__main__":
    main()
