"""cel-go's two parser nesting limits, measured on the text, and the syntax tree they count.

cel-go's parser (``parser/parser.go``, the same in v0.22 to v0.28; Kubernetes sets no parser
option, so the defaults apply) stops a deep expression in two places, each at
``maxRecursionDepth`` = 250:

* while ANTLR parses: a parse listener counts, per grammar rule, how many contexts of that rule
  are open (``recursionListener.EnterEveryRule``); past 250 the parse stops with
  ``expression recursion limit exceeded: 250``. A left-recursive rule (``relation``, ``calc``,
  ``member``) closes its context before it opens the next one of a chain
  (``TriggerExitRuleEvent`` before ``PushNewRecursionContext`` in the generated parser), so
  ``a + b + c`` or ``a.b.c`` counts once; nested parentheses, list and map literals, call
  arguments and the right operands of ``?:`` count once per level;
* while building the AST: the visitor counts nested ternaries, binary relations and
  arithmetic, selections, member calls and indexes (``checkAndIncrementRecursionDepth``), so a
  left-nested chain of n operands counts n - 1; past 250: ``max recursion depth exceeded``.

Both are reported without a location (``<input>:-1:0``). cel-cpp, which type-checks here, has
the same counters with a fixed limit of 32; :mod:`_deep` uses the tree built here to compile
deeper expressions in pieces. Hand-written because no maintained Python package parses CEL
with cel-go's ANTLR rule structure (the counts depend on it, not only on the AST).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = ["CEL_GO_MAX_DEPTH", "Node", "cel_go_depth_error", "deep_stack", "parse"]

#: cel-go's ``parser.MaxRecursionDepth`` default (``parser.go``); Kubernetes keeps it.
CEL_GO_MAX_DEPTH = 250

LISTENER_ERROR = f"ERROR: <input>:-1:0: expression recursion limit exceeded: {CEL_GO_MAX_DEPTH}"
VISITOR_ERROR = "ERROR: <input>:-1:0: max recursion depth exceeded"

_TOKEN = re.compile(r"""
  (?P<ws>[ \t\r\n\f]+|//[^\n]*)
| (?P<str>(?:[bB][rR]?|[rR][bB]?)?(?:'''|\"\"\"|'|"))
| (?P<num>0[xX][0-9a-fA-F]+[uU]?|\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?|\d+[uU]?)
| (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
| (?P<esc>`[^`\n\r]*`)
| (?P<op>==|!=|<=|>=|&&|\|\||[<>!\-+*/%?:.,()\[\]{}])
""", re.X)
_RELATIONS = {"<", "<=", ">=", ">", "==", "!=", "in"}
_KEYWORD_LITERALS = {"true", "false", "null"}
#: Member calls whose leading identifier arguments bind variables (macros, ``cel.bind``).
BINDING_CALLS = {"all", "exists", "exists_one", "existsOne", "map", "filter", "transformList",
                 "transformMap", "transformMapEntry", "sortBy", "bind", "block"}


class _Syntax(Exception):
    """Not a text this model parses: it leaves the verdict to the engine."""


class _Limit(Exception):
    pass


@dataclass
class Node:
    """A node of the parse tree: ``kind``, source span ``[start, end)`` and children.

    ``counted`` marks the kinds cel-go's visitor counts. ``name`` is an identifier's or a
    call's name; ``binders`` the names a macro call binds (its leading identifier arguments).
    """

    kind: str
    start: int
    end: int
    children: list[Node] = field(default_factory=list)
    counted: bool = False
    name: str = ""
    binders: tuple[str, ...] = ()


def _string_end(text: str, i: int, prefix_and_quote: str) -> int:
    quote = prefix_and_quote.lstrip("bBrR")
    raw = any(c in "rR" for c in prefix_and_quote[:-len(quote)])
    j = i + len(prefix_and_quote)
    while j < len(text):
        if text.startswith(quote, j):
            return j + len(quote)
        if len(quote) == 1 and text[j] in "\r\n":
            break
        j += 2 if text[j] == "\\" and not raw else 1
    raise _Syntax


def _tokens(text: str) -> list[tuple[str, str, int, int]]:
    out: list[tuple[str, str, int, int]] = []
    i = 0
    while i < len(text):
        found = _TOKEN.match(text, i)
        if found is None:
            raise _Syntax
        kind = found.lastgroup or ""
        if kind == "str":
            end = _string_end(text, i, found.group())
            out.append(("lit", text[i:end], i, end))
            i = end
            continue
        i = found.end()
        if kind == "ws":
            continue
        value = found.group()
        if kind == "ident" and value in _KEYWORD_LITERALS:
            kind = "lit"
        elif kind == "ident" and value == "in":
            kind = "op"
        elif kind == "num":
            kind = "lit"
        out.append((kind, value, found.start(), i))
    out.append(("eof", "", len(text), len(text)))
    return out


class _Parser:
    """A recursive-descent copy of ``CEL.g4`` that opens and closes rules as ANTLR does."""

    def __init__(self, text: str, limit: int) -> None:
        self.tokens = _tokens(text)
        self.at = 0
        self.limit = limit
        self.open: dict[str, int] = {}

    # -- the parse listener ------------------------------------------------------------------
    def enter(self, rule: str) -> None:
        depth = self.open.get(rule, 0) + 1
        self.open[rule] = depth
        if depth > self.limit:
            raise _Limit

    def exit(self, rule: str) -> None:
        if self.open.get(rule, 0) > 0:  # ExitEveryRule never goes below zero
            self.open[rule] -= 1

    # -- tokens ------------------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> tuple[str, str, int, int]:
        return self.tokens[min(self.at + ahead, len(self.tokens) - 1)]

    def is_op(self, value: str, ahead: int = 0) -> bool:
        kind, text, _, _ = self.peek(ahead)
        return kind == "op" and text == value

    def take(self, value: str | None = None, kind: str | None = None) -> tuple[str, str, int, int]:
        token = self.peek()
        if (value is not None and token[1] != value) or (kind is not None and token[0] != kind) \
                or token[0] == "eof":
            raise _Syntax
        self.at += 1
        return token

    def last_end(self) -> int:
        return self.tokens[self.at - 1][3]

    # -- rules -------------------------------------------------------------------------------
    def start(self) -> Node:
        self.enter("start")
        node = self.expr()
        if self.peek()[0] != "eof":
            raise _Syntax
        self.exit("start")
        return node

    def expr(self) -> Node:
        self.enter("expr")
        node = self.conditional("conditionalOr")
        if self.is_op("?"):
            self.take()
            then = self.conditional("conditionalOr")
            self.take(":")
            otherwise = self.expr()
            node = Node("ternary", node.start, otherwise.end, [node, then, otherwise], counted=True)
        self.exit("expr")
        return node

    def conditional(self, rule: str) -> Node:
        self.enter(rule)
        operator, inner = ("||", "conditionalAnd") if rule == "conditionalOr" else ("&&", "relation")
        terms = [self.conditional(inner) if inner == "conditionalAnd" else self.relation(0)]
        while self.is_op(operator):
            self.take()
            terms.append(self.conditional(inner) if inner == "conditionalAnd" else self.relation(0))
        self.exit(rule)
        return terms[0] if len(terms) == 1 else Node(operator, terms[0].start, terms[-1].end, terms)

    def relation(self, precedence: int) -> Node:
        self.enter("relation")
        node = self.calc(0)
        while precedence <= 1 and self.peek()[0] == "op" and self.peek()[1] in _RELATIONS:
            self.exit("relation")
            self.enter("relation")
            operator = self.take()[1]
            right = self.relation(2)
            node = Node(operator, node.start, right.end, [node, right], counted=True)
        self.exit("relation")
        return node

    def calc(self, precedence: int) -> Node:
        self.enter("calc")
        node = self.unary()
        while self.peek()[0] == "op":
            operator = self.peek()[1]
            if operator in "*/%" and precedence <= 2:
                right_precedence = 3
            elif operator in "+-" and precedence <= 1:
                right_precedence = 2
            else:
                break
            self.exit("calc")
            self.enter("calc")
            self.take()
            right = self.calc(right_precedence)
            node = Node(operator, node.start, right.end, [node, right], counted=True)
        self.exit("calc")
        return node

    def unary(self) -> Node:
        self.enter("unary")
        start = self.peek()[2]
        if self.is_op("-") and self.peek(1)[0] == "lit" and self.peek(1)[1][:1] in "0123456789.":
            node = self.member()  # `-1` is a signed literal (the first alternative wins)
        elif self.is_op("!") or self.is_op("-"):
            operator = self.peek()[1]
            while self.is_op(operator):
                self.take()
            operand = self.member()
            node = Node("not" if operator == "!" else "negate", start, operand.end, [operand])
        else:
            node = self.member()
        self.exit("unary")
        return node

    def member(self) -> Node:
        self.enter("member")
        node = self.primary()
        while self.is_op(".") or self.is_op("["):
            self.exit("member")
            self.enter("member")
            if self.take()[1] == ".":
                if self.is_op("?"):
                    self.take()
                    name = self.take(kind=None)[1]
                    node = Node("select", node.start, self.last_end(), [node], counted=True, name=name)
                    continue
                kind, name, _, _ = self.take()
                if kind not in ("ident", "esc"):
                    raise _Syntax
                if self.is_op("(") and kind == "ident":
                    args = self.call_args()
                    binders = tuple(a.name for a in args[:-1] if a.kind == "ident") \
                        if name in BINDING_CALLS else ()
                    node = Node("call", node.start, self.last_end(), [node, *args], counted=True,
                                name=name, binders=binders)
                else:
                    node = Node("select", node.start, self.last_end(), [node], counted=True, name=name)
            else:
                if self.is_op("?"):
                    self.take()
                index = self.expr()
                self.take("]")
                node = Node("index", node.start, self.last_end(), [node, index], counted=True)
        self.exit("member")
        return node

    def call_args(self) -> list[Node]:
        self.take("(")
        args: list[Node] = []
        if not self.is_op(")"):
            self.enter("exprList")
            args.append(self.expr())
            while self.is_op(","):
                self.take()
                args.append(self.expr())
            self.exit("exprList")
        self.take(")")
        return args

    def primary(self) -> Node:
        self.enter("primary")
        kind, value, start, _ = self.peek()
        if kind == "ident" or (kind == "op" and value == "." and self.peek(1)[0] == "ident"):
            node = self.ident_call_or_message()
        elif self.is_op("("):
            self.take()
            inner = self.expr()
            self.take(")")
            node = Node("group", start, self.last_end(), [inner])
        elif self.is_op("["):
            self.take()
            elements = self.sequence("listInit", "]", entries=False)
            node = Node("list", start, self.last_end(), elements)
        elif self.is_op("{"):
            self.take()
            entries = self.sequence("mapInitializerList", "}", entries=True)
            node = Node("map", start, self.last_end(), entries)
        elif kind == "lit" or (kind == "op" and value == "-"):
            self.enter("literal")
            if value == "-":
                self.take()
            self.take(kind="lit")
            self.exit("literal")
            node = Node("literal", start, self.last_end())
        else:
            raise _Syntax
        self.exit("primary")
        return node

    def ident_call_or_message(self) -> Node:
        start = self.peek()[2]
        ahead = 1 if self.is_op(".") else 0
        while self.peek(ahead)[0] == "ident" and self.is_op(".", ahead + 1):
            ahead += 2
        if self.peek(ahead)[0] == "ident" and self.is_op("{", ahead + 1):  # CreateMessage
            self.at += ahead + 2
            fields = self.sequence("fieldInitializerList", "}", entries=True, field_names=True)
            return Node("message", start, self.last_end(), fields)
        if self.is_op("."):
            self.take()
        name = self.take(kind="ident")[1]
        if self.is_op("("):
            args = self.call_args()
            return Node("global", start, self.last_end(), args, name=name)
        return Node("ident", start, self.last_end(), name=name)

    def sequence(self, rule: str, close: str, *, entries: bool, field_names: bool = False) -> list[Node]:
        """List elements or map/message entries (keys and values as children, in order)."""
        out: list[Node] = []
        if not self.is_op(close):
            self.enter(rule)
            while True:
                if field_names:
                    self.enter("optField")
                    if self.is_op("?"):
                        self.take()
                    self.take()
                    self.exit("optField")
                else:
                    self.enter("optExpr")
                    if self.is_op("?"):
                        self.take()
                    out.append(self.expr())
                    self.exit("optExpr")
                if entries:
                    self.take(":")
                    out.append(self.expr())
                if not self.is_op(",") or self.is_op(close, 1):
                    break
                self.take()
            self.exit(rule)
        if self.is_op(","):
            self.take()
        self.take(close)
        return out


@contextmanager
def deep_stack() -> Iterator[None]:
    """Room on Python's stack for recursive walks of a tree up to cel-go's 250 levels (the parser
    here takes about ten frames a level, the checker's passes about five)."""
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, sys.getrecursionlimit() + 24 * (CEL_GO_MAX_DEPTH + 2)))
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


def _run(text: str, limit: int) -> Node:
    with deep_stack():
        return _Parser(text, limit).start()


def parse(text: str, limit: int = CEL_GO_MAX_DEPTH) -> Node | None:
    """The parse tree of ``text``; ``None`` when it is not plain CEL or passes ``limit``."""
    try:
        return _run(text, limit)
    except (_Syntax, _Limit, RecursionError):
        return None


def visitor_depth(node: Node) -> int:
    """The deepest chain of nodes cel-go's AST visitor counts."""
    deepest, stack = 0, [(node, 0)]
    while stack:
        current, depth = stack.pop()
        depth += current.counted
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in current.children)
    return deepest


def cel_go_depth_error(text: str) -> str | None:
    """cel-go's parser error for nesting past its limits, ``None`` when it has none (or when
    ``text`` is not plain CEL this model follows: then the engine's own message stands)."""
    try:
        tree = _run(text, CEL_GO_MAX_DEPTH)
    except _Limit:
        return LISTENER_ERROR
    except (_Syntax, RecursionError):
        return None
    return VISITOR_ERROR if visitor_depth(tree) > CEL_GO_MAX_DEPTH else None
