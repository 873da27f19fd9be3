"""The pure parts of meta-model execution: the compiled record, the worst case a program can
cost, the pruning of candidates that can never be the dearest, lazily computed variables and
the listing rule of ``expose_referenced_models``."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson
from twisted.trial.unittest import TestCase

from gateway.billing.cost import PriceSet, billing_tiers
from gateway.billing.estimate_reserve import reserve_amount_nanos
from gateway.billing.pricing import EffectivePrices
from gateway.catalog.snapshot import CatalogSnapshot
from gateway.metamodels.compiled import MetaModel, compile_meta
from gateway.metamodels.parser import parse
from gateway.metamodels.variables import request_variables
from gateway.metamodels.worst_case import synthesis_input, worst_case
from gateway.metering import Priced
from gateway.v1.meta_reserve import dearest

COSTS = {"a": 10, "b": 30, "c": 5, "j": 2}


def meta(dsl: str, **row: Any) -> MetaModel:
    return compile_meta({
        "id": 1, "model_name": "smart", "name": "Smart", "description": "", "dsl": dsl,
        "provider": "meta", "provider_name": "Meta Module", "provider_icon_url": "",
        "expose_referenced_models": True, "billing_mode": "actual", "input_price_nanos": 0,
        "output_price_nanos": 0, "cached_input_price_nanos": 0, **row})


def cost(dsl: str, answer_tokens: int = 0) -> int:
    # one extra input token costs 1 (the synthesizer's input grows with the answers)
    return worst_case(parse(dsl).root, lambda model, extra: (
        None if model not in COSTS else COSTS[model] + extra), answer_tokens)


def option(input_price: str, output_price: str, multiplier: str = "1",
           tiers: Any = None) -> Priced:
    prices = PriceSet(input=Decimal(input_price), output=Decimal(output_price),
                      tiers={"input": billing_tiers(tiers)} if tiers else {})
    effective = EffectivePrices(base={}, group_multiplier=Decimal(multiplier),
                                user_channel_multiplier=Decimal(1), prices={})
    return Priced(candidate=None, effective=effective, prices=prices)  # type: ignore[arg-type]


class CompiledTests(TestCase):
    def test_the_record_is_ready_for_requests(self) -> None:
        compiled = meta('route { when user.balance < 5 => call "a"\n'
                        '  when request.has_image == true => parallel { call "b"; call "c" }\n'
                        '  otherwise => call "a" }')
        assert compiled.referenced == ("a", "b", "c")
        assert compiled.variables == {"user.balance", "request.has_image"}
        assert compiled.fans_out and not compiled.bills_meta
        assert compiled.listed_prices() is None
        assert not meta('switch { weight 1 => call "a" }').fans_out

    def test_actual_mode_ignores_stored_prices_meta_mode_keeps_them(self) -> None:
        assert meta('call "a"', input_price_nanos=7).prices == PriceSet()
        priced = meta('call "a"', billing_mode="meta", input_price_nanos=1_500_000_000,
                      output_price_nanos=2_000_000_000)
        assert priced.bills_meta
        assert priced.listed_prices() == {"input_price": Decimal("1.5"),
                                          "output_price": Decimal(2),
                                          "cached_input_price": Decimal(0)}


class WorstCaseTests(TestCase):
    def test_branches_cost_their_dearest_fan_outs_their_sum(self) -> None:
        assert cost('call "a"') == 10
        assert cost('route { when request.stream == true => call "a"\n'
                    '  otherwise => call "b" }') == 30
        assert cost('switch { weight 9 => call "c"; otherwise => call "a" }') == 10
        assert cost('parallel { call "a"; call "b" }') == 40
        assert cost('parallel { call "a"; call "b" } synthesize "c"') == 45
        # the synthesizer reads up to one answer per call on top of the request
        assert cost('parallel { call "a"; call "b" } synthesize "c"', answer_tokens=100) == 245
        assert synthesis_input(parse('route { when request.stream == true => call "a"\n'
                                     '  otherwise => parallel { call "a"; call "b"; call "c" }'
                                     ' synthesize "a" }').root, 7) == 21
        assert synthesis_input(parse('parallel { call "a"; call "b" }').root, 7) == 0
        assert cost('judge "j" { route { when judge.answer == "x" => call "b"\n'
                    '  otherwise => call "c" } }') == 32

    def test_unreachable_models_cost_nothing(self) -> None:
        assert cost('call "gone"') == 0
        assert cost('route { when request.stream == true => call "gone"\n'
                    '  otherwise => call "c" }') == 5


class DearestTests(TestCase):
    def test_dominated_flat_prices_are_dropped(self) -> None:
        cheap, dear, wide = option("1", "2"), option("3", "4"), option("1", "9")
        kept = dearest([cheap, dear, wide, option("3", "4")])
        assert kept == (dear, wide)
        # the multiplier counts: 1 x 2 becomes dearer than 3 x 4 at 5x
        scaled = option("1", "2", multiplier="5")
        assert dearest([dear, scaled]) == (scaled,)

    def test_the_kept_ones_reserve_what_all_would(self) -> None:
        options = [option(i, o, m) for i, o, m in (
            ("1", "2", "1"), ("3", "4", "1"), ("1", "9", "1"), ("2", "2", "2"), ("0", "1", "3"))]
        for input_tokens, output_tokens in ((10, 1), (1, 10_000), (5_000, 5_000), (0, 0)):
            def most(found: Any) -> int:
                return max(reserve_amount_nanos(
                    p.prices, input_tokens, output_tokens,
                    group_multiplier=p.effective.group_multiplier) for p in found)
            assert most(dearest(options)) == most(options)

    def test_tiered_prices_are_always_kept(self) -> None:
        tiered = option("1", "1", tiers=[{"min_tokens": 0, "price": "1"},
                                         {"min_tokens": 1000, "price": "50"}])
        assert tiered in dearest([option("9", "9"), tiered])


class LazyVariablesTests(TestCase):
    def test_wanted_names_have_the_values_of_the_full_set(self) -> None:
        body = {"model": "m", "temperature": 0.5, "max_tokens": 40, "tools": [{"type": "x"}],
                "messages": [{"role": "system", "content": "be brief"},
                             {"role": "user", "content": [{"type": "image_url",
                                                           "image_url": {"url": "u"}},
                                                          {"type": "text", "text": "hi"}]}]}
        size = len(orjson.dumps(body))
        full = request_variables(body, size)
        wanted = ["request.has_image", "request.last_user_message", "request.tool_count",
                  "user.balance"]
        some = request_variables(body, size, wanted)
        assert some == {name: full[name] for name in wanted[:3]}
        assert some["request.has_image"] is True and some["request.last_user_message"] == "hi"


class HiddenModelsTests(TestCase):
    def test_a_model_is_hidden_unless_some_meta_model_exposes_it(self) -> None:
        snapshot = CatalogSnapshot(meta_models=[
            meta('route { when request.stream == true => call "a"\n  otherwise => call "b" }',
                 model_name="m1", expose_referenced_models=False),
            meta('call "b"', model_name="m2", id=2),
        ])
        assert snapshot.hidden_models == {"a"}
        assert set(snapshot.meta_models) == {"m1", "m2"}


class RawScanTests(TestCase):
    def test_has_keys_from_the_raw_body_match_the_walk(self) -> None:
        escaped = b'{"messages": [{"role": "user", "content": [{"image\\u005furl": {}}]}]}'
        plain = b'{"messages": [{"role": "user", "content": "an image_url, no key"}]}'
        tools = b'{"tools": [], "messages": []}'
        for raw in (escaped, plain, tools):
            body = orjson.loads(raw)
            names = ["request.has_image", "request.has_audio", "request.has_tools"]
            walked = request_variables(body, len(raw), names)
            assert request_variables(body, len(raw), names, raw) == walked
        assert request_variables(orjson.loads(escaped), 1, names, escaped)["request.has_image"]
        assert request_variables(orjson.loads(tools), 1, names, tools)["request.has_tools"]
