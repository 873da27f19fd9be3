"""Tokens of the meta-model DSL, each with the line and column a parse error will name.

Lexical rules (contract §6.3): ``#`` comments to end of line; identifiers start with a letter or
``_`` and go on with letters, digits, ``_`` and ``.``; numbers are unsigned decimals with no
exponent or underscores; strings are double-quoted on one line with the escapes ``\\"``, ``\\\\``,
``\\n``, ``\\r`` and ``\\t`` only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TokenKind = Literal["ident", "number", "string", "punct", "end"]

#: longest first, so ``=>`` is not read as ``=`` then ``>``
PUNCTUATION = ("=>", "==", "!=", "<=", ">=", "<", ">", "=", "{", "}", ";", ",")
ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "r": "\r", "t": "\t"}


class DslError(ValueError):
    """A problem in the program text: ``line L:C: <reason>`` (1-based line and column)."""

    def __init__(self, line: int, column: int, reason: str) -> None:
        super().__init__(f"line {line}:{column}: {reason}")
        self.line = line
        self.column = column
        self.reason = reason


@dataclass(frozen=True)
class Token:
    kind: TokenKind
    text: str
    line: int
    column: int

    def describe(self) -> str:
        if self.kind == "end":
            return "end of program"
        if self.kind == "string":
            return "a string"
        if self.kind == "number":
            return f"number {self.text}"
        return f'"{self.text}"'


def _is_ident_start(char: str) -> bool:
    return char == "_" or (char.isascii() and char.isalpha())


def _is_ident_part(char: str) -> bool:
    return char in "_." or (char.isascii() and char.isalnum())


def tokenize(source: str) -> list[Token]:
    """Every token of ``source``, ending with one ``end`` token; raises ``DslError``."""
    tokens: list[Token] = []
    line, line_start, i, n = 1, 0, 0, len(source)
    while i < n:
        char = source[i]
        column = i - line_start + 1
        if char == "\n":
            line, line_start, i = line + 1, i + 1, i + 1
        elif char in " \t\r":
            i += 1
        elif char == "#":
            while i < n and source[i] != "\n":
                i += 1
        elif char == '"':
            i, text = _string(source, i, line, line_start)
            tokens.append(Token("string", text, line, column))
        elif char.isascii() and char.isdigit():
            start = i
            while i < n and source[i].isascii() and source[i].isdigit():
                i += 1
            if i < n and source[i] == ".":
                i += 1
                if not (i < n and source[i].isascii() and source[i].isdigit()):
                    raise DslError(line, i - line_start + 1,
                                   "expected a digit after the decimal point")
                while i < n and source[i].isascii() and source[i].isdigit():
                    i += 1
            tokens.append(Token("number", source[start:i], line, column))
        elif _is_ident_start(char):
            start = i
            while i < n and _is_ident_part(source[i]):
                i += 1
            tokens.append(Token("ident", source[start:i], line, column))
        else:
            for punct in PUNCTUATION:
                if source.startswith(punct, i):
                    tokens.append(Token("punct", punct, line, column))
                    i += len(punct)
                    break
            else:
                raise DslError(line, column, f"unexpected character {char!r}")
    tokens.append(Token("end", "", line, len(source) - line_start + 1))
    return tokens


def _string(source: str, i: int, line: int, line_start: int) -> tuple[int, str]:
    """Reads the string opening at ``i``; returns the index after it and its value."""
    column = i - line_start + 1
    out: list[str] = []
    i += 1
    while True:
        if i >= len(source) or source[i] == "\n":
            raise DslError(line, column, "unterminated string")
        char = source[i]
        if char == '"':
            return i + 1, "".join(out)
        if char == "\\":
            escape = source[i + 1] if i + 1 < len(source) else ""
            if escape not in ESCAPES:
                raise DslError(line, i - line_start + 1, f"invalid escape \\{escape}".rstrip())
            out.append(ESCAPES[escape])
            i += 2
        else:
            out.append(char)
            i += 1


def quote(text: str) -> str:
    """``text`` as a DSL string literal (the inverse of the lexer's string rule)."""
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("\r", "\\r").replace("\t", "\\t"))
    return f'"{escaped}"'
