"""Resolving a meta model fast must give exactly what the reference code gives (issue 17).

- the program compiled into closures (``Resolver``) against the interpreter
  (``evaluate.resolve``) over generated programs and variables: the same step, the same error
  message, the same number of draws;
- the lazily computed variables against the eager ones, and a route reading only what it
  needs;
- the integer reservation rule against ``reserve_for`` over random prices, multipliers and
  token counts (tiered, per-call and out-of-bounds ones included);
- the reservation cached per catalog snapshot against the same sum computed from scratch, over
  random requests and across a price change, a disabled model and an edited program.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import TestCase

from gateway.auth import Caller
from gateway.billing.cost import PriceSet, billing_tiers
from gateway.billing.pricing import EffectivePrices
from gateway.catalog.snapshot import (
    CatalogSnapshot,
    Channel,
    Group,
    Model,
    ModelConfig,
    UserChannel,
)
from gateway.metamodels.checks import conditions
from gateway.metamodels.compiled import MetaModel, compile_meta
from gateway.metamodels.evaluate import EvaluationError, resolve
from gateway.metamodels.program import Action, Program
from gateway.metamodels.resolver import Resolver
from gateway.metamodels.variables import RequestVariables, request_variables
from gateway.metamodels.worst_case import worst_case
from gateway.metering import Priced, price, reserve_for
from gateway.protocols.request import parse_client_request
from gateway.user_cache import GatewayUser
from gateway.v1.meta_reserve import MetaReserve
from gateway.v1.meta_resolution import call_variables
from gateway.v1.reserve_rule import ReserveRule
from tests.gateway.metamodels.test_dsl import numbers, programs, texts

# -- the compiled program ---------------------------------------------------------------------

values = st.one_of(texts, numbers, st.booleans(), st.integers(-5, 5),
                   st.floats(allow_nan=False), st.none())


class Draws:
    """``draw`` replaying fixed numbers, counting how many were taken."""

    def __init__(self, numbers: list[float]) -> None:
        self.numbers = numbers
        self.taken = 0

    def __call__(self) -> float:
        value = self.numbers[self.taken % len(self.numbers)]
        self.taken += 1
        return value


def outcome(run: Callable[[Draws], Any], numbers: list[float]) -> tuple[Any, str, int]:
    draws = Draws(numbers)
    try:
        return run(draws), "", draws.taken
    except EvaluationError as exc:
        return None, str(exc), draws.taken


def judge_routes(action: Action) -> list[Action]:
    """Every ``judge``'s route in the program (resolved after the judge answered)."""
    found = []
    stack = [action]
    while stack:
        node = stack.pop()
        route = getattr(node, "route", None)
        if route is not None:
            found.append(route)
            stack.append(route)
        for branch in getattr(node, "branches", ()):
            stack.append(branch.action)
        stack.extend(getattr(node, "calls", ()))
    return found


class ResolverTests(TestCase):
    @settings(max_examples=400, deadline=None, derandomize=True)
    @given(programs, st.data())
    def test_the_closures_resolve_as_the_interpreter(self, program: Program,
                                                     data: st.DataObject) -> None:
        names = sorted({c.left for c, _ in conditions(program.root)})
        variables = data.draw(st.fixed_dictionaries(
            {}, optional={name: values for name in names}))
        numbers = data.draw(st.lists(st.floats(0, 1, exclude_max=True), min_size=1,
                                     max_size=4))
        resolver = Resolver(program.root)
        for node in [program.root, *judge_routes(program.root)]:
            expected = outcome(lambda draw, n=node: resolve(n, variables, draw), numbers)
            found = outcome(lambda draw, n=node: resolver.resolve(n, variables, draw), numbers)
            assert found == expected, (node, variables)
            assert found[0] is expected[0]  # the very node the program holds

    def test_errors_are_the_interpreters(self) -> None:
        meta = compile_meta(row('route { when request.text > 3 => call "a"\n'
                                '  when user.id contains "x" => call "b"\n'
                                '  when user.group matches "(" => call "c"\n'
                                '  when nothing.here == 1 => call "d"\n'
                                '  otherwise => call "e" }'))
        for variables, message in (
                ({"request.text": "t"}, "Operator > requires number operands"),
                ({"request.text": Decimal(1), "user.id": Decimal(1)},
                 "Operator contains requires string operands"),
                ({"request.text": Decimal(1), "user.id": "y", "user.group": "g"},
                 "Invalid regular expression '(': missing ), unterminated subpattern at "
                 "position 0"),
                ({}, "Unknown variable: request.text")):
            with self.assertRaises(EvaluationError) as compiled:
                meta.resolver.root(variables, random.random)
            with self.assertRaises(EvaluationError) as interpreted:
                resolve(meta.program.root, variables, random.random)
            assert str(compiled.exception) == str(interpreted.exception) == message


# -- lazy variables -----------------------------------------------------------------------------

def row(dsl: str, **fields: Any) -> dict[str, Any]:
    return {"id": 1, "model_name": "smart", "name": "smart", "description": "", "dsl": dsl,
            "provider": "meta", "provider_name": "Meta Module", "provider_icon_url": "",
            "expose_referenced_models": True, "billing_mode": "actual", "input_price_nanos": 0,
            "output_price_nanos": 0, "cached_input_price_nanos": 0, **fields}


BODIES: list[dict[str, Any]] = [
    {"model": "m", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "first"},
                                     {"type": "image_url", "image_url": {"url": "u"}}]},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "second", "text": "shadow"}],
     "tools": [{}, {}], "temperature": 0.25, "max_completion_tokens": 100},
    {"contents": [{"role": "user", "parts": [{"text": "hey"}, {"inline_data": {}}]}],
     "systemInstruction": {"parts": [{"text": "sys"}]},
     "generationConfig": {"maxOutputTokens": 64}},
    {"system": [{"type": "text", "text": "sys"}], "max_tokens": 7, "messages": [
        {"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]},
        {"role": "user", "content": "", "parts": ["p"]}]},
    {"input": [{"role": "user", "content": [{"type": "input_text", "text": "x"}]}],
     "instructions": "inst", "functions": [{}], "stream": True, "temperature": 2},
    {"prompt": "just text", "max_tokens": 1.5, "temperature": True},
    {"messages": [{"role": "user", "content": "no \\u escapes here"}],
     "image\u005furl": 1},
    # keys the raw scan must not miss, values it must not take for keys
    {"tool_choice": "auto", "messages": [{"role": "user", "content": [{"type": "image"}]}]},
    {"function_call": {}, "images_extra": 1, "audio_url_x": 2, "messages": []},
    {"messages": [{"role": "user", "content": "line\nbreak \"tools\" input_audio"}]},
]
#: bodies as sent with ``\\u`` escapes (spelling a key, or only in a value)
ESCAPED = [b'{"messages": [{"role": "user", "content": [{"\\u0069mage": {}}]}]}',
           b'{"messages": [{"role": "user", "content": "caf\\u00e9"}], "tools": []}',
           b'{"\\u0074ool_choice": "none", "messages": []}']


class LazyVariablesTests(TestCase):
    def test_each_variable_is_the_eager_walks(self) -> None:
        for body in BODIES:
            raw = orjson.dumps(body)
            eager = request_variables(body, len(raw))  # every name, the walk for has_*
            lazy = RequestVariables(body, len(raw), raw)
            for name in sorted(eager, reverse=True):
                assert lazy[name] == eager[name], (name, body)
                assert type(lazy[name]) is type(eager[name]), (name, body)
            with self.assertRaises(KeyError):
                lazy["user.balance"]
        for raw in ESCAPED:
            body = orjson.loads(raw)
            eager = request_variables(body, len(raw))
            lazy = RequestVariables(body, len(raw), raw)
            for name in ("request.has_image", "request.has_audio", "request.has_tools"):
                assert lazy[name] == eager[name], (name, raw)
        assert RequestVariables(orjson.loads(ESCAPED[0]), 1, ESCAPED[0])["request.has_image"]
        assert RequestVariables(orjson.loads(ESCAPED[2]), 1, ESCAPED[2])["request.has_tools"]

    def test_message_texts_keep_every_shape(self) -> None:
        variables = RequestVariables(BODIES[0], 10)
        assert variables["request.last_user_message"] == "shadow\nsecond"
        assert variables["request.text"] == "be brief\nfirst\nok\nshadow\nsecond"
        assert RequestVariables(BODIES[2], 10)["request.last_user_message"] == "p"

    def test_a_route_reads_only_the_variables_up_to_its_true_branch(self) -> None:
        meta = compile_meta(row('route { when request.stream == false => call "a"\n'
                                '  when request.text contains "x" => call "b"\n'
                                '  when user.group == "g" => call "c"\n'
                                '  otherwise => call "d" }'))
        request = parse_client_request("chat", orjson.dumps({
            "model": "smart", "messages": [{"role": "user", "content": "x"}]}))
        caller = Caller(user=GatewayUser(id=7, enabled=True, is_admin=False, token_version=0,
                                         primary_group_id=1, memberships=()), key=None, ip="")
        variables = call_variables(CatalogSnapshot(), caller, request, False)
        assert meta.resolver.root(variables, random.random).model == "a"  # type: ignore
        assert set(variables) == {"request.stream"}
        streamed = parse_client_request("chat", orjson.dumps({
            "model": "smart", "stream": True, "messages": [{"role": "user", "content": "y"}]}))
        variables = call_variables(CatalogSnapshot(), caller, streamed, False)
        assert meta.resolver.root(variables, random.random).model == "d"  # type: ignore
        assert set(variables) == {"request.stream", "request.text", "user.group"}
        assert variables["user.group"] == ""


# -- the reservation rule -------------------------------------------------------------------

PRICES = [Decimal(0), Decimal("0.5"), Decimal(3), Decimal("12.000000001"), Decimal("0.07"),
          Decimal("123456789.123456789")]
MULTIPLIERS = [Decimal(1), Decimal("0.333"), Decimal("1.25"), Decimal(3), Decimal("0.1"),
               Decimal("0.3333333333333333333333333")]  # 25 digits: outside the exact bounds


def random_option(rng: random.Random) -> Priced:
    tiers = ({"input": billing_tiers([{"min_tokens": 0, "price": "1"},
                                      {"min_tokens": 500, "price": "4"}])}
             if rng.random() < 0.15 else {})
    prices = PriceSet(input=rng.choice(PRICES), output=rng.choice(PRICES), tiers=tiers,
                      quota_type=1 if rng.random() < 0.1 else 0)
    effective = EffectivePrices(base={}, group_multiplier=rng.choice(MULTIPLIERS),
                                user_channel_multiplier=rng.choice(MULTIPLIERS), prices={})
    return Priced(candidate=None, effective=effective, prices=prices)  # type: ignore[arg-type]


def random_tokens(rng: random.Random) -> tuple[int, int | None, int]:
    size = rng.choice([0, 1, 7, 999, 12_345, 10**9, 10**16])
    max_output = rng.choice([None, 0, -3, 1, 512, 100_000, 10**16])
    return size, max_output, rng.choice([0, 4096])


class ReserveRuleTests(TestCase):
    def test_the_rule_is_reserve_for_exactly(self) -> None:
        rng = random.Random(17)
        for _ in range(3000):
            options = [random_option(rng) for _ in range(rng.randint(1, 4))]
            rule = ReserveRule(options)
            for _ in range(3):
                tokens = random_tokens(rng)
                assert rule.nanos(*tokens) == reserve_for(options, *tokens), (options, tokens)


# -- the reservation cached per snapshot -------------------------------------------------------

MODELS = ["m1", "m2", "m3", "m4"]
PROGRAMS = [
    'route { when request.stream == true => call "m1"\n'
    '  when request.input_tokens > 50 => call "m2"\n  otherwise => call "m3" }',
    'switch { weight 1 => call "m4"; weight 3 => call "m2" }',
    'parallel { call "m1"; call "m3" } synthesize "m4"',
    'judge "m1" { route { when judge.answer == "x" => call "m2"\n  otherwise => call "m3" } }',
    'call "gone"',
]


def catalog(prices: dict[str, tuple[str, str]], metas: list[MetaModel], *,
            disabled: frozenset[str] = frozenset(),
            overrides: dict[int, dict[str, Decimal]] | None = None) -> CatalogSnapshot:
    models = [Model(id=i, model_name=name, display_name=name, provider="custom",
                    provider_icon_url="", quota_type=0, enabled=name not in disabled,
                    prices={"input_price": Decimal(prices[name][0]),
                            "output_price": Decimal(prices[name][1])},
                    tiers={}, video_billing_config=None)
              for i, name in enumerate(MODELS, 1)]
    channels = [Channel(id=c, user_channel_id=c, name=f"up{c}", type="compat",
                        base_url="http://127.0.0.1:9", api_key="k", priority=0, weight=1,
                        enabled=True) for c in (1, 2)]
    configs = [ModelConfig(id=m.id * 10 + c.id, channel_id=c.id, model_id=m.id,
                           upstream_model_name="", enabled=True,
                           price_overrides=(overrides or {}).get(m.id * 10 + c.id, {}))
               for m in models for c in channels]
    return CatalogSnapshot(
        groups=[Group(1, "default", Decimal("1.5")), Group(2, "vip", Decimal("0.8"))],
        user_channels=[UserChannel(id=u, name=f"uc{u}", description="",
                                   multiplier=Decimal(multiplier),
                                   routing_algorithm="priority", enabled=True,
                                   rate_limit_enabled=False,
                                   rate_limit_requests_per_minute=0, rate_limit_burst=0)
                       for u, multiplier in ((1, "1"), (2, "1.1"))],
        channels=channels, models=models, configs=configs, meta_models=metas)


def from_scratch(snapshot: CatalogSnapshot, meta: MetaModel, groups: tuple[int, ...],
                 tokens: tuple[int, int | None, int]) -> int:
    """The reservation with nothing cached: every candidate priced anew, summed as
    ``worst_case`` says (no pruning, no rule)."""
    input_tokens, max_output, default_output = tokens

    def options(model: str) -> list[Priced]:
        return [price(c, snapshot, groups, "min")
                for c in snapshot.candidates_for(model, 7, groups, ())]

    if not meta.fans_out:
        every = [o for model in meta.referenced for o in options(model)]
        return reserve_for(every, input_tokens, max_output, default_output) if every else 0
    answer_tokens = max_output if max_output and max_output > 0 else default_output

    def cost_of(model: str, extra: int) -> int | None:
        found = options(model)
        return reserve_for(found, input_tokens + extra, max_output,
                           default_output) if found else None

    return worst_case(meta.program.root, cost_of, answer_tokens)


def cached(snapshot: CatalogSnapshot, meta: MetaModel, groups: tuple[int, ...],
           tokens: tuple[int, int | None, int]) -> int:
    return MetaReserve(snapshot, 7, groups, (), "min").nanos(meta, *tokens)


class CachedReservationTests(TestCase):
    prices = {"m1": ("1", "2"), "m2": ("3", "1"), "m3": ("0.5", "8"), "m4": ("2", "2")}

    def metas(self) -> list[MetaModel]:
        return [compile_meta(row(dsl, id=i, model_name=f"meta{i}"))
                for i, dsl in enumerate(PROGRAMS)]

    def test_cached_equals_from_scratch_over_random_requests(self) -> None:
        metas = self.metas()
        snapshot = catalog(self.prices, metas, overrides={11: {"output_price": Decimal(9)}})
        rng = random.Random(5)
        for _ in range(400):
            meta = rng.choice(metas)
            groups = rng.choice([(1,), (2,), (1, 2)])
            tokens = (rng.choice([0, 3, 51, 700, 10**6]), rng.choice([None, 16, 4000]),
                      rng.choice([0, 4096]))
            assert cached(snapshot, meta, groups, tokens) == from_scratch(
                snapshot, meta, groups, tokens), (meta.model_name, groups, tokens)

    def assert_follows(self, before: CatalogSnapshot, after: CatalogSnapshot,
                       meta_before: MetaModel, meta_after: MetaModel) -> None:
        tokens = (120, 1000, 4096)
        old = cached(before, meta_before, (1,), tokens)
        assert old == from_scratch(before, meta_before, (1,), tokens)
        new = cached(after, meta_after, (1,), tokens)
        assert new == from_scratch(after, meta_after, (1,), tokens)
        assert new != old

    def test_a_price_change_invalidates_it(self) -> None:
        metas = self.metas()
        before = catalog(self.prices, metas)
        after = catalog({**self.prices, "m3": ("0.5", "80")}, metas)
        self.assert_follows(before, after, metas[0], metas[0])

    def test_a_disabled_model_invalidates_it(self) -> None:
        metas = self.metas()
        before = catalog(self.prices, metas)
        after = catalog(self.prices, metas, disabled=frozenset({"m3"}))
        self.assert_follows(before, after, metas[0], metas[0])
        assert cached(after, metas[4], (1,), (1, 1, 1)) == 0  # reaches nothing

    def test_an_edited_meta_model_invalidates_it(self) -> None:
        metas = self.metas()
        before = catalog(self.prices, metas)
        edited = compile_meta(row('call "m2"', id=0, model_name="meta0"))
        after = catalog(self.prices, [edited, *metas[1:]])
        self.assert_follows(before, after, metas[0], edited)
        # a request that still holds the old program on the new snapshot gets its own
        # program's reservation, and does not leave it behind for the edited one
        tokens = (120, 1000, 4096)
        assert cached(after, metas[0], (1,), tokens) == from_scratch(after, metas[0], (1,),
                                                                     tokens)
        assert cached(after, edited, (1,), tokens) == from_scratch(after, edited, (1,), tokens)
