"""The template's plain conditions, evaluated without Jinja.

Most ``when`` and many ``default`` values of ``templates/copier.yml`` are one expression made of
names, strings, numbers, booleans, lists, ``==``, ``!=``, ``in``, ``not in``, ``and``, ``or``,
``not`` and parentheses: ``{{ strategy == 'checkpoint' and checkpoint_store == 'table' }}``. Jinja
compiles exactly these to the same Python operations, so they are parsed with :mod:`ast` and
evaluated here — importing and compiling Jinja cost `advisor recommend` about a third of its
start-up. Anything else (a filter, a call, a block, text around the braces) is not plain: the
caller renders it with the sandboxed Jinja environment, as before.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

_ONE_EXPRESSION = re.compile(r"\A\{\{(?P<body>[^{}]*)\}\}\Z", re.S)
_PLAIN = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.Compare, ast.Eq, ast.NotEq,
          ast.In, ast.NotIn, ast.Name, ast.Load, ast.Constant, ast.List, ast.Tuple)


@lru_cache(maxsize=256)
def plain(template: str) -> ast.Expression | None:
    """The parsed expression when ``template`` is one plain expression, else None."""
    match = _ONE_EXPRESSION.match(template.strip())
    if match is None or "|" in match["body"]:
        return None
    try:
        tree = ast.parse(match["body"].strip(), mode="eval")
    except SyntaxError:
        return None
    if not all(isinstance(node, _PLAIN) for node in ast.walk(tree)):
        return None
    if any(isinstance(node, ast.Constant) and not isinstance(node.value, (str, int, float, bool)) for node in ast.walk(tree)):
        return None
    return tree


def names(tree: ast.Expression) -> frozenset[str]:
    return frozenset(node.id for node in ast.walk(tree) if isinstance(node, ast.Name))


def evaluate(tree: ast.Expression, value: Callable[[str], object]) -> object:
    """Its value, the names looked up with ``value`` (only those the evaluation reaches)."""
    return _eval(tree.body, value)


def _eval(node: ast.AST, value: Callable[[str], object]) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        # Jinja's `true`/`false`/`none` are names to ast; the template writes Python's spelling.
        return value(node.id)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(item, value) for item in node.elts]
    if isinstance(node, ast.UnaryOp):  # `not`, the only unary operator let through
        return not _eval(node.operand, value)
    if isinstance(node, ast.BoolOp):  # operands returned as Python (and Jinja) do
        result: object = None
        for item in node.values:
            result = _eval(item, value)
            if isinstance(node.op, ast.And) and not result or isinstance(node.op, ast.Or) and result:
                return result
        return result
    if isinstance(node, ast.Compare):
        left = _eval(node.left, value)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, value)
            if not _compare(op, left, right):
                return False
            left = right
        return True
    raise ValueError(f"not a plain expression: {ast.dump(node)}")  # plain() lets nothing else through


def _compare(op: ast.cmpop, left: Any, right: Any) -> bool:
    if isinstance(op, ast.Eq):
        return bool(left == right)
    if isinstance(op, ast.NotEq):
        return bool(left != right)
    if isinstance(op, ast.In):
        return left in right
    return left not in right  # ast.NotIn: plain() lets no other comparison through
