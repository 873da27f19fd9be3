"""The meta-model DSL: parse errors with positions, round trips, checks, evaluation, draws."""

from __future__ import annotations

import random
import string
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import TestCase

from gateway.metamodels.checks import problems
from gateway.metamodels.evaluate import EvaluationError, holds, referenced_models, resolve
from gateway.metamodels.lexer import DslError
from gateway.metamodels.parser import OPERATORS, parse
from gateway.metamodels.plan_reader import PlanError, from_plan
from gateway.metamodels.program import (
    Call,
    Condition,
    Judge,
    Literal,
    Option,
    Parallel,
    Program,
    Route,
    RouteBranch,
    Switch,
    SwitchBranch,
    render,
    to_plan,
)
from gateway.metamodels.variables import request_variables

EXAMPLE = """# cheap by default, big context to the large model, 10 % canary
route {
  when request.total_estimated_tokens > 32000 => call "large-ctx"
  when request.has_image == true => call "vision-mid"
  otherwise => switch { weight 90 => call "fast-small"; weight 10 => call "fast-next" }
}
"""


def known(name: str) -> str | None:
    return {"meta-x": "meta"}.get(name, "model")


class ParseTests(TestCase):
    def test_the_contract_example(self) -> None:
        program = parse(EXAMPLE)
        assert referenced_models(program) == ["large-ctx", "vision-mid", "fast-small",
                                              "fast-next"]
        plan = to_plan(program)
        assert plan["root"]["kind"] == "route"
        assert plan["root"]["routes"][0]["condition"] == {
            "left": "request.total_estimated_tokens", "operator": ">",
            "right": {"kind": "number", "number": 32000}}
        assert plan["root"]["routes"][2]["otherwise"] is True
        assert plan["root"]["routes"][2]["action"]["switches"][1] == {
            "weight": 10, "action": {"kind": "call", "model": "fast-next"}}
        assert problems(program, name="smart", lookup=known) == []

    def test_errors_name_line_and_column(self) -> None:
        cases = {
            "": "line 1:1: expected an action",
            'route {\n  when a.b == 1 => call "x"\n}': "line 3:1: route requires an otherwise",
            'route { otherwise => call "a"\n otherwise => call "b" }':
                "line 2:2: duplicate otherwise branch",
            'route { otherwise => call "a"; when x == 1 => call "b" }':
                "line 1:32: when branch cannot follow otherwise",
            'switch { weight 0 => call "a" }': "line 1:17: switch weight must be a positive",
            'switch { otherwise => call "a"; weight 1 => call "b" }':
                "line 1:33: weighted branch cannot follow otherwise",
            'call "a\n"': "line 1:6: unterminated string",
            'call "a\\q"': "line 1:8: invalid escape \\q",
            'route { when x == -1 => call "a" otherwise => call "b" }':
                "line 1:19: unexpected character '-'",
            'switch { weight 1e5 => call "a" }': 'line 1:18: expected "=>"',
            'parallel { switch { weight 1 => call "a" } }':
                "line 1:12: parallel accepts only calls",
            'call "a" call "b"': 'line 1:10: unexpected "call"',
            'route { when x ~ 1 => call "a" otherwise => call "b" }':
                "line 1:16: unexpected character '~'",
        }
        for source, message in cases.items():
            with self.subTest(source=source):
                try:
                    parse(source)
                except DslError as exc:
                    assert str(exc).startswith(message), (source, str(exc))
                else:
                    self.fail(f"parsed: {source!r}")

    def test_comments_escapes_and_separators(self) -> None:
        program = parse('option mode = "a\\"b\\\\c\\n\\t" ,; # note\n'
                        'parallel { call "a",, call "b" ; } synthesize "s" # end')
        assert program.options == (Option("mode", Literal('a"b\\c\n\t')),)
        assert program.root == Parallel((Call("a"), Call("b")), "s")

    def test_nesting_is_bounded(self) -> None:
        deep = "route { otherwise => " * 40 + 'call "a"' + " }" * 40
        with self.assertRaises(DslError):
            parse(deep)


class ChecksTests(TestCase):
    def test_messages_in_contract_order(self) -> None:
        program = parse('route { when request.colour == "red" => call "smart"\n'
                        '        when user.id > "3" => call "meta-x"\n'
                        '        otherwise => call "gone" }')
        assert problems(program, name="smart",
                        lookup=lambda m: None if m == "gone" else known(m)) == [
            "Unknown variable: request.colour",
            "Operator > requires number operands",
            "Meta model cannot reference itself",
            "Meta model cannot reference another meta model yet: meta-x",
            "Referenced model not found: gone",
        ]

    def test_judge_answer_only_inside_a_judge(self) -> None:
        inside = parse('judge "m" { route { when judge.answer == "code" => call "a"\n'
                       'otherwise => call "b" } }')
        assert problems(inside, name="x", lookup=known) == []
        outside = parse('route { when judge.answer == "code" => call "a" otherwise => call "b" }')
        assert problems(outside, name="x", lookup=known) == ["Unknown variable: judge.answer"]

    def test_plan_objects_get_the_executable_checks(self) -> None:
        program = from_plan({"root": {"kind": "switch", "switches": [
            {"weight": 0, "action": {"kind": "call", "model": "a"}},
            {"otherwise": True, "action": {"kind": "call", "model": "a"}},
            {"otherwise": True, "action": {"kind": "call", "model": "a"}}]}})
        assert problems(program, name="x", lookup=known)[:2] == [
            "switch weight must be positive", "switch cannot have duplicate otherwise branches"]
        wide = parse("parallel { " + " ".join(f'call "m{i}"' for i in range(9)) + " }")
        assert problems(wide, name="x", lookup=known) == ["parallel accepts at most 8 calls"]
        bad_regex = parse('route { when request.text matches "(" => call "a" otherwise => '
                          'call "b" }')
        assert problems(bad_regex, name="x", lookup=known)[0].startswith(
            "Invalid regular expression")

    def test_bad_plan_objects_are_refused_with_where(self) -> None:
        for plan, where in [
            ({"root": {"kind": "nope"}}, "definition.root.kind"),
            ({"root": {"kind": "call"}}, "definition.root.model"),
            ({"root": {"kind": "route", "routes": [{"condition": {
                "left": "a b", "operator": "==", "right": {"kind": "bool", "bool": True}},
                "action": {"kind": "call", "model": "a"}}]}}, "condition.left"),
            ({"root": {"kind": "switch", "switches": [{"weight": -1, "action": {
                "kind": "call", "model": "a"}}]}}, "weight"),
            ([], "definition"),
        ]:
            with self.subTest(plan=plan):
                try:
                    from_plan(plan)
                except PlanError as exc:
                    assert where in str(exc), str(exc)
                else:
                    self.fail("accepted")


class EvaluateTests(TestCase):
    def variables(self, **body: object) -> dict[str, object]:
        values = request_variables(body, 4000)
        values.update({"user.balance": Decimal(5), "user.id": Decimal(7), "user.group": "vip",
                       "user.is_admin": False, "api_key.name": "k",
                       "api_key.quota_limit": Decimal(0), "api_key.quota_remaining": Decimal(0)})
        return values

    def test_route_takes_the_first_true_branch(self) -> None:
        program = parse(EXAMPLE)
        big = self.variables(messages=[{"role": "user", "content": "hi"}], max_tokens=40000)
        assert resolve(program.root, big, random.random) == Call("large-ctx")
        image = self.variables(messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:"}}]}])
        assert resolve(program.root, image, random.random) == Call("vision-mid")
        plain = self.variables(messages=[{"role": "user", "content": "hi"}])
        assert resolve(program.root, plain, lambda: 0.95) == Call("fast-next")
        assert resolve(program.root, plain, lambda: 0.5) == Call("fast-small")

    def test_request_variables_of_each_family(self) -> None:
        chat = request_variables({"messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "first"}]},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "second"}], "tools": [{}, {}], "stream": True,
            "temperature": 0.2, "max_completion_tokens": 100}, 400)
        assert chat["request.input_tokens"] == 100
        assert chat["request.total_estimated_tokens"] == 200
        assert chat["request.message_count"] == 4
        assert chat["request.last_user_message"] == "second"
        assert chat["request.system"] == "be brief"
        assert chat["request.text"] == "be brief\nfirst\nok\nsecond"
        assert chat["request.tool_count"] == 2 and chat["request.has_tools"] is True
        assert chat["request.stream"] is True
        assert chat["request.temperature"] == Decimal("0.2")
        google = request_variables({"contents": [{"role": "user", "parts": [{"text": "hey"}]}],
                                    "generationConfig": {"maxOutputTokens": 64}}, 10)
        assert google["request.text"] == "hey"
        assert google["request.max_output_tokens"] == 64
        assert google["request.message_count"] == 1
        messages = request_variables({"system": [{"type": "text", "text": "sys"}], "messages": [
            {"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]}, 10)
        assert messages["request.system"] == "sys" and messages["request.has_audio"] is True
        responses = request_variables({"input": "just text", "instructions": "inst"}, 10)
        assert responses["request.text"] == "just text"
        assert responses["request.system"] == "inst"

    def test_operator_typing(self) -> None:
        values = {"s": "Hello", "n": Decimal(3), "b": True}
        assert holds(Condition("n", "==", Literal(Decimal("3.0"))), values)
        assert not holds(Condition("n", "==", Literal("3")), values)
        assert holds(Condition("n", "!=", Literal("3")), values)
        assert holds(Condition("s", "matches", Literal("^H.l+o$")), values)
        assert holds(Condition("s", "not_contains", Literal("x")), values)
        for condition, message in [
            (Condition("s", ">", Literal(Decimal(1))), "Operator > requires number operands"),
            (Condition("n", "contains", Literal("3")),
             "Operator contains requires string operands"),
            (Condition("zzz", "==", Literal(True)), "Unknown variable: zzz"),
        ]:
            with self.assertRaises(EvaluationError) as caught:
                holds(condition, values)
            assert str(caught.exception) == message

    def test_switch_weights_are_drawn_in_proportion(self) -> None:
        # 20,000 seeded draws; each share within 4 standard deviations of its weight
        program = parse('switch { weight 70 => call "a"; chance 20 => call "b"; '
                        'probability 10 => call "c" }')
        rng = random.Random(1234)
        counts = {"a": 0, "b": 0, "c": 0}
        draws = 20_000
        for _ in range(draws):
            step = resolve(program.root, {}, rng.random)
            assert isinstance(step, Call)
            counts[step.model] += 1
        for model, share in (("a", 0.7), ("b", 0.2), ("c", 0.1)):
            sigma = (share * (1 - share) / draws) ** 0.5
            assert abs(counts[model] / draws - share) < 4 * sigma, counts

    def test_switch_remainder_goes_to_otherwise(self) -> None:
        program = parse('switch { weight 0.25 => call "a"; otherwise => call "rest" }')
        assert resolve(program.root, {}, lambda: 0.2) == Call("a")
        assert resolve(program.root, {}, lambda: 0.3) == Call("rest")
        full = parse('switch { weight 2 => call "a"; weight 2 => call "b"; otherwise => '
                     'call "never" }')
        assert {resolve(full.root, {}, lambda x=x: x).model  # type: ignore[union-attr]
                for x in (0.0, 0.49, 0.5, 0.99)} == {"a", "b"}


# -- properties -----------------------------------------------------------------------------

names = st.text(string.ascii_letters + string.digits + "-_./:", min_size=1, max_size=12)
texts = st.text(max_size=12)
idents = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,10}", fullmatch=True).filter(
    lambda s: s not in {"true", "false"})
numbers = st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False,
                      allow_infinity=False)
literals = st.one_of(texts.map(Literal), numbers.map(Literal), st.booleans().map(Literal))
conditions = st.builds(Condition, idents, st.sampled_from(sorted(OPERATORS)), literals)
calls = st.builds(Call, names)


def routes(actions: st.SearchStrategy) -> st.SearchStrategy:
    whens = st.lists(st.builds(RouteBranch, actions, conditions), max_size=3)
    return st.builds(lambda ws, last: Route((*ws, RouteBranch(last))), whens, actions)


def _switch(weighted: list, last: object) -> Switch:
    branches = [SwitchBranch(a, w) for a, w in weighted]
    if last is not None:
        branches.append(SwitchBranch(last))
    return Switch(tuple(branches))


def extend(actions: st.SearchStrategy) -> st.SearchStrategy:
    positive = numbers.filter(lambda d: d > 0)
    return st.one_of(
        routes(actions),
        st.builds(_switch, st.lists(st.tuples(actions, positive), min_size=1, max_size=3),
                  st.none() | actions),
        st.builds(Parallel, st.lists(calls, min_size=1, max_size=4).map(tuple),
                  st.none() | names),
        st.builds(Judge, names, routes(actions), st.none() | texts),
    )


programs = st.builds(Program, st.lists(st.builds(Option, idents, literals), max_size=2).map(tuple),
                     st.recursive(calls, extend, max_leaves=12))


class PropertyTests(TestCase):
    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(programs)
    def test_render_parse_round_trip(self, program: Program) -> None:
        source = render(program)
        assert parse(source) == program, source
        assert from_plan(to_plan(program)) == program

    @settings(max_examples=500, deadline=None, derandomize=True)
    @given(programs, st.data())
    def test_mutations_never_crash_the_parser(self, program: Program, data: st.DataObject) -> None:
        source = render(program)
        for _ in range(3):
            where = data.draw(st.integers(0, len(source)))
            how = data.draw(st.sampled_from(["delete", "insert", "swap"]))
            noise = data.draw(st.text(alphabet='{}"#;,=><!\\\n ab1.é', min_size=1, max_size=3))
            if how == "delete":
                source = source[:where] + source[where + len(noise):]
            elif how == "insert":
                source = source[:where] + noise + source[where:]
            else:
                source = source[:where] + noise + source[where + 1:]
        try:
            parse(source)
        except DslError as exc:
            assert str(exc).startswith("line "), str(exc)
