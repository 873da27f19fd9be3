"""What resolving a meta model adds to one /v1 request, timed piece by piece in one process.

Issue 17's goal: a program with 10 branches must add under 20 µs per request.  The program
below is a ``route`` with nine conditions (one of every variable family and most operators,
a regular expression included) and an ``otherwise``; the request matches none of them, so
every condition is evaluated (the worst case for a route).  Timed with the gateway's own code:

- ``variables``: ``call_variables`` -- every variable the program reads, from the parsed
  body (the pipeline parses it anyway) and the caller; each is computed when a condition
  first reads it, so here they are read one by one;
- ``evaluate``: the program compiled into closures (``MetaModel.resolver``) over those
  variables, down to the model to call;
- ``reserve``: ``MetaReserve.nanos`` -- the worst case over the ten models the program can
  reach (two channels each) on an in-memory catalog snapshot;
- ``total``: what ``route_meta`` runs for such a program: the variables computed as the
  conditions read them, the evaluation, the reservation.  It is what a meta model adds: the
  request then goes on exactly like one naming the resolved model;
- ``baseline``: the non-meta path's resolve step for the same body naming ``m10`` (the name,
  the meta-model lookup, the caller's candidates priced, their reservation) -- a reference
  measured in the same run, because this machine's CPU speed varies up to 2x within minutes:
  compare ``total/baseline`` across machines and runs, not the absolute figures.

Every step runs ``--repeat`` times, alternating, each the best of 5 rounds; the min-max over
the runs is reported.  Re-run on a quiet machine with

    .venv/bin/python bench/metamodel_resolution.py --n 50000 --repeat 5
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Sequence
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
    normalize_model_name,
)
from gateway.metamodels.compiled import MetaModel, compile_meta
from gateway.metamodels.evaluate import resolve
from gateway.metamodels.program import Call
from gateway.metering import price, reserve_for
from gateway.protocols.request import parse_client_request
from gateway.user_cache import GatewayUser
from gateway.v1.call import routing_inputs
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


def snapshot(meta_models: Sequence[MetaModel] = ()) -> CatalogSnapshot:
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
        channels=channels, models=models, configs=configs, meta_models=meta_models)


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


def steps() -> dict[str, Callable[[], object]]:
    """The timed steps, each a function of no arguments, on one request and one snapshot."""
    meta = compile_meta({
        "id": 1, "model_name": "smart", "name": "smart", "description": "", "dsl": PROGRAM,
        "provider": "meta", "provider_name": "Meta Module", "provider_icon_url": "",
        "expose_referenced_models": True, "billing_mode": "actual", "input_price_nanos": 0,
        "output_price_nanos": 0, "cached_input_price_nanos": 0})
    catalog = snapshot([meta])  # the meta model's reservation rule is cached on it
    caller = Caller(user=GatewayUser(id=7, enabled=True, is_admin=False, token_version=0,
                                     primary_group_id=1, memberships=()), key=None, ip="")
    request = parse_client_request("chat", BODY)
    plain = parse_client_request("chat", BODY.replace(b'"smart"', b'"m10"'))
    draw = random.Random(1).random
    # the same answers as the reference code (the interpreter, pricing every candidate)
    variables = call_variables(catalog, caller, request, False)
    assert meta.resolver.root(variables, draw) == Call("m10")
    assert resolve(meta.program.root, dict(variables), draw) == Call("m10")
    reserve = MetaReserve(catalog, 7, [1], (), "min")
    assert reserve.nanos(meta, 300, 512, 4096) == reserve_for(
        [o for m in meta.referenced for o in reserve.model_options(m)], 300, 512, 4096)

    read = sorted(meta.variables)

    def variables_step() -> object:
        # every variable the program reads, computed (a route stops reading at its first
        # true branch: this request matches none, so all are read)
        found = call_variables(catalog, caller, request, False)
        for name in read:
            found[name]
        return found

    def evaluate_step() -> object:
        return meta.resolver.root(variables, draw)

    def reserve_step() -> object:
        return MetaReserve(catalog, 7, [1], (), "min").nanos(
            meta, request.estimated_input_tokens, request.max_output_tokens, 4096)

    def total_step() -> object:
        found = call_variables(catalog, caller, request, False)
        meta.resolver.root(found, draw)
        return MetaReserve(catalog, 7, [1], (), "min").nanos(
            meta, request.estimated_input_tokens, request.max_output_tokens, 4096)

    def baseline_step() -> object:
        # the non-meta path's resolve step for the same body naming a real model: the name,
        # the meta-model lookup, the caller's candidates priced, and their reservation
        model = normalize_model_name(plain.model)
        assert catalog.meta_models.get(model) is None
        inputs = routing_inputs(catalog, model, 7, (1,), ())
        assert inputs is not None
        priced = [price(c, catalog, (1,), "min") for c in inputs.by_config.values()]
        return reserve_for(priced, plain.estimated_input_tokens, plain.max_output_tokens, 4096)

    return {"baseline": baseline_step, "variables": variables_step,
            "evaluate": evaluate_step, "reserve": reserve_step, "total": total_step}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of every step, alternating (min-max over them is reported)")
    args = parser.parse_args()
    timed = steps()
    runs: dict[str, list[float]] = {name: [] for name in timed}
    ratios: list[float] = []
    print(f"10-branch meta model, {len(BODY)}-byte chat body, n={args.n}, "
          f"{max(2, args.repeat)} runs")
    for run in range(max(2, args.repeat)):
        found = {name: per_call_us(fn, args.n) for name, fn in timed.items()}
        for name, value in found.items():
            runs[name].append(value)
        ratios.append(found["total"] / found["baseline"])
        print(f"  run {run + 1}: " + "  ".join(f"{name} {value:.2f}"
                                               for name, value in found.items())
              + f"  total/baseline {ratios[-1]:.2f}")
    print("µs per request, min-max over the runs:")
    for name, values in runs.items():
        print(f"  {name:<10} {min(values):7.2f} - {max(values):7.2f}")
    print(f"  total/baseline {min(ratios):.2f} - {max(ratios):.2f}  (total = what a meta model "
          "adds: the meta path then runs the baseline's steps for the resolved model)")


if __name__ == "__main__":
    main()
