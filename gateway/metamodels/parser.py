"""The meta-model DSL parser: source text to a ``Program``, or ``line L:C: <reason>``.

Grammar (contract §6.3)::

    program   := { "option" IDENT "=" literal sep* } action sep*
    action    := "call" STRING
               | "route" route-body
               | "switch" "{" { ("weight"|"chance"|"probability") NUMBER "=>" action sep* }
                              [ "otherwise" "=>" action sep* ] "}"
               | "parallel" "{" call { sep* call } sep* "}" [ "synthesize" STRING ]
               | "judge" STRING "{" sep* [ "prompt" STRING sep* ] "route" route-body sep* "}"
    route-body := "{" { "when" expr "=>" action sep* } "otherwise" "=>" action sep* "}"
    expr      := IDENT operator literal
    literal   := STRING | NUMBER | "true" | "false"
    sep       := ";" | ","

A recursive-descent parser; nesting is bounded so a hostile program cannot exhaust the stack.
"""

from __future__ import annotations

from decimal import Decimal

from gateway.metamodels.lexer import DslError, Token, tokenize
from gateway.metamodels.program import (
    Action,
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
)

OPERATORS = frozenset({"==", "!=", "<", "<=", ">", ">=", "contains", "not_contains",
                       "starts_with", "ends_with", "matches"})
WEIGHT_WORDS = frozenset({"weight", "chance", "probability"})
ACTION_WORDS = ("call", "route", "switch", "parallel", "judge")
MAX_DEPTH = 32


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens = tokenize(source)
        self.pos = 0
        self.depth = 0

    # -- token helpers --------------------------------------------------------------------

    @property
    def token(self) -> Token:
        return self.tokens[self.pos]

    def fail(self, reason: str, token: Token | None = None) -> DslError:
        token = token or self.token
        return DslError(token.line, token.column, reason)

    def is_word(self, word: str) -> bool:
        return self.token.kind == "ident" and self.token.text == word

    def is_punct(self, punct: str) -> bool:
        return self.token.kind == "punct" and self.token.text == punct

    def advance(self) -> Token:
        token = self.token
        if token.kind != "end":
            self.pos += 1
        return token

    def expect_punct(self, punct: str, where: str) -> None:
        if not self.is_punct(punct):
            raise self.fail(f'expected "{punct}" {where}, found {self.token.describe()}')
        self.advance()

    def expect_word(self, word: str, where: str) -> None:
        if not self.is_word(word):
            raise self.fail(f'expected "{word}" {where}, found {self.token.describe()}')
        self.advance()

    def expect_string(self, what: str) -> str:
        if self.token.kind != "string":
            raise self.fail(f"expected {what} (a double-quoted string), found "
                            f"{self.token.describe()}")
        return self.advance().text

    def skip_separators(self) -> None:
        while self.is_punct(";") or self.is_punct(","):
            self.advance()

    # -- grammar --------------------------------------------------------------------------

    def program(self) -> Program:
        options: list[Option] = []
        while self.is_word("option"):
            self.advance()
            if self.token.kind != "ident":
                raise self.fail(f"expected an option name, found {self.token.describe()}")
            name = self.advance().text
            self.expect_punct("=", "after the option name")
            options.append(Option(name, self.literal()))
            self.skip_separators()
        if self.token.kind == "end":
            raise self.fail("expected an action (call, route, switch, parallel or judge)")
        root = self.action()
        self.skip_separators()
        if self.token.kind != "end":
            raise self.fail(f"unexpected {self.token.describe()} after the program's action")
        return Program(tuple(options), root)

    def action(self) -> Action:
        token = self.token
        if token.kind != "ident" or token.text not in ACTION_WORDS:
            raise self.fail("expected an action (call, route, switch, parallel or judge), "
                            f"found {token.describe()}")
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(f"actions nested deeper than {MAX_DEPTH} levels")
        self.advance()
        try:
            if token.text == "call":
                return Call(self.expect_string("a model name"))
            if token.text == "route":
                return self.route_body()
            if token.text == "switch":
                return self.switch()
            if token.text == "parallel":
                return self.parallel()
            return self.judge()
        finally:
            self.depth -= 1

    def route_body(self) -> Route:
        self.expect_punct("{", 'after "route"')
        branches: list[RouteBranch] = []
        otherwise_seen = False
        while not self.is_punct("}"):
            if self.is_word("when"):
                if otherwise_seen:
                    raise self.fail("when branch cannot follow otherwise")
                self.advance()
                condition = self.condition()
                self.expect_punct("=>", "after the condition")
                branches.append(RouteBranch(self.action(), condition))
            elif self.is_word("otherwise"):
                if otherwise_seen:
                    raise self.fail("duplicate otherwise branch")
                otherwise_seen = True
                self.advance()
                self.expect_punct("=>", 'after "otherwise"')
                branches.append(RouteBranch(self.action()))
            elif self.token.kind == "end":
                raise self.fail('expected "}" to close the route, found end of program')
            else:
                raise self.fail(f'expected "when", "otherwise" or "}}" in a route, found '
                                f"{self.token.describe()}")
            self.skip_separators()
        if not otherwise_seen:
            raise self.fail("route requires an otherwise branch")
        self.advance()
        return Route(tuple(branches))

    def condition(self) -> Condition:
        if self.token.kind != "ident":
            raise self.fail(f"expected a variable name, found {self.token.describe()}")
        left = self.advance().text
        operator = self.token
        if operator.kind not in ("ident", "punct") or operator.text not in OPERATORS:
            raise self.fail(f"expected an operator after {left}, found {operator.describe()}")
        self.advance()
        return Condition(left, operator.text, self.literal())

    def literal(self) -> Literal:
        token = self.token
        if token.kind == "string":
            self.advance()
            return Literal(token.text)
        if token.kind == "number":
            self.advance()
            return Literal(Decimal(token.text))
        if token.kind == "ident" and token.text in ("true", "false"):
            self.advance()
            return Literal(token.text == "true")
        raise self.fail(f"expected a string, number, true or false, found {token.describe()}")

    def switch(self) -> Switch:
        self.expect_punct("{", 'after "switch"')
        branches: list[SwitchBranch] = []
        otherwise_seen = False
        while not self.is_punct("}"):
            token = self.token
            if token.kind == "ident" and token.text in WEIGHT_WORDS:
                if otherwise_seen:
                    raise self.fail("weighted branch cannot follow otherwise")
                self.advance()
                if self.token.kind != "number" or Decimal(self.token.text) <= 0:
                    raise self.fail("switch weight must be a positive number")
                weight = Decimal(self.advance().text)
                self.expect_punct("=>", "after the weight")
                branches.append(SwitchBranch(self.action(), weight))
            elif self.is_word("otherwise"):
                if otherwise_seen:
                    raise self.fail("duplicate otherwise branch")
                otherwise_seen = True
                self.advance()
                self.expect_punct("=>", 'after "otherwise"')
                branches.append(SwitchBranch(self.action()))
            elif token.kind == "end":
                raise self.fail('expected "}" to close the switch, found end of program')
            else:
                raise self.fail(f'expected "weight", "otherwise" or "}}" in a switch, found '
                                f"{token.describe()}")
            self.skip_separators()
        self.advance()
        return Switch(tuple(branches))

    def parallel(self) -> Parallel:
        self.expect_punct("{", 'after "parallel"')
        self.skip_separators()
        calls: list[Call] = []
        while not self.is_punct("}"):
            if not self.is_word("call"):
                if self.token.kind == "end":
                    raise self.fail('expected "}" to close parallel, found end of program')
                raise self.fail(f"parallel accepts only calls, found {self.token.describe()}")
            self.advance()
            calls.append(Call(self.expect_string("a model name")))
            self.skip_separators()
        if not calls:
            raise self.fail("parallel requires at least one call")
        self.advance()
        synthesize = None
        if self.is_word("synthesize"):
            self.advance()
            synthesize = self.expect_string("the synthesizing model's name")
        return Parallel(tuple(calls), synthesize)

    def judge(self) -> Judge:
        model = self.expect_string("the judging model's name")
        self.expect_punct("{", "after the judge model")
        self.skip_separators()
        prompt = None
        if self.is_word("prompt"):
            self.advance()
            prompt = self.expect_string("the judge prompt")
            self.skip_separators()
        self.expect_word("route", "in judge")
        route = self.route_body()
        self.skip_separators()
        self.expect_punct("}", "to close judge")
        return Judge(model, route, prompt)


def parse(source: str) -> Program:
    """The program in ``source``; raises ``DslError`` naming the line and column."""
    return _Parser(source).program()
