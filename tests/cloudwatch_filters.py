"""A stand-in for CloudWatch Logs' metric filters and metric math (AWS itself cannot run here), for the subset the
stacks synthesize, following the documented semantics; anything outside that subset raises instead of guessing.

Filter patterns (CloudWatch Logs guide, "Using filter patterns to match terms in JSON log events"): a JSON
pattern is `{ ... }` over comparisons of a selector (`$.a.b`, `$.a[0]`) with `=` / `!=` and a string (quoted;
`*` a wildcard), with `=`, `!=`, `<`, `>`, `<=`, `>=` and a number (the field must be a JSON number), or
`IS TRUE`, `IS FALSE`, `IS NULL`, `NOT EXISTS`; joined with `&&` and `||` (`&&` binding tighter) and
parentheses. A selector that names no field makes its comparison false (`NOT EXISTS` true). A line that is not
a JSON object matches no JSON pattern. A metric filter adds its metric value (`$.field`, a number) for each
matching line, per dimension values (`$.field`, a string or number); a line whose value or dimension is missing
or of another type publishes nothing.

Metric math (CloudWatch guide, "Metric math syntax and functions"): `IF(c, a, b)`, `MAX([...])` across series,
`ABS`, `FILL(m, v)` (a missing datapoint read as v), arithmetic and comparisons, on one period's values.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<op>&&|\|\||<=|>=|!=|=|<|>|\(|\)|\{|\})'
    r"|(?P<sel>\$(?:\.[A-Za-z_][A-Za-z0-9_-]*|\[\d+\])+)|(?P<word>[^\s(){}=<>!&|\"]+))"
)
_MISSING = object()


class UnsupportedPattern(ValueError):
    """A pattern outside the subset this stand-in implements."""


def _tokens(pattern: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(pattern):
        if pattern[pos:].strip() == "":
            break
        m = _TOKEN.match(pattern, pos)
        if m is None or m.end() == pos:
            raise UnsupportedPattern(f"cannot read {pattern[pos:]!r}")
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def select(document: Any, selector: str) -> Any:
    """The value a `$.a.b[0]` selector names, or _MISSING."""
    value = document
    for part in re.findall(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]", selector):
        name, index = part
        if name:
            if not isinstance(value, dict) or name not in value:
                return _MISSING
            value = value[name]
        else:
            if not isinstance(value, list) or int(index) >= len(value):
                return _MISSING
            value = value[int(index)]
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _string_matches(value: Any, wanted: str) -> bool:
    if _is_number(value):
        text = json.dumps(value)
    elif isinstance(value, str):
        text = value
    else:
        return False
    regex = "^" + ".*".join(re.escape(part) for part in wanted.split("*")) + "$"
    return re.match(regex, text, re.DOTALL) is not None


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens, self.i = tokens, 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise UnsupportedPattern("the pattern ends early")
        self.i += 1
        return token

    def expect(self, text: str) -> None:
        if self.take()[1] != text:
            raise UnsupportedPattern(f"expected {text!r}")

    def disjunction(self) -> Any:
        terms = [self.conjunction()]
        while self.peek() == ("op", "||"):
            self.take()
            terms.append(self.conjunction())
        return lambda doc: any(t(doc) for t in terms)

    def conjunction(self) -> Any:
        terms = [self.term()]
        while self.peek() == ("op", "&&"):
            self.take()
            terms.append(self.term())
        return lambda doc: all(t(doc) for t in terms)

    def term(self) -> Any:
        if self.peek() == ("op", "("):
            self.take()
            inner = self.disjunction()
            self.expect(")")
            return inner
        kind, selector = self.take()
        if kind != "sel":
            raise UnsupportedPattern(f"expected a selector, got {selector!r}")
        kind, op = self.take()
        if kind == "word" and op in ("IS", "NOT"):
            word = self.take()[1]
            if op == "NOT" and word == "EXISTS":
                return lambda doc: select(doc, selector) is _MISSING
            if op == "IS" and word in ("TRUE", "FALSE", "NULL"):
                wanted = {"TRUE": True, "FALSE": False, "NULL": None}[word]
                return lambda doc: (v := select(doc, selector)) is not _MISSING and v is wanted
            raise UnsupportedPattern(f"{op} {word}")
        if kind != "op" or op not in ("=", "!=", "<", ">", "<=", ">="):
            raise UnsupportedPattern(f"expected an operator, got {op!r}")
        kind, raw = self.take()
        if kind == "str":
            text = json.loads(raw)
            if op not in ("=", "!="):
                raise UnsupportedPattern(f"{op} with a string")
            equal = op == "="
            return lambda doc: (v := select(doc, selector)) is not _MISSING and _string_matches(v, text) == equal
        try:
            number = float(raw)
        except ValueError:
            if op not in ("=", "!="):
                raise UnsupportedPattern(f"{op} with {raw!r}") from None
            equal = op == "="
            return lambda doc: (v := select(doc, selector)) is not _MISSING and _string_matches(v, raw) == equal
        compare = {
            "=": lambda a: a == number,
            "!=": lambda a: a != number,
            "<": lambda a: a < number,
            ">": lambda a: a > number,
            "<=": lambda a: a <= number,
            ">=": lambda a: a >= number,
        }[op]
        return lambda doc: _is_number(v := select(doc, selector)) and compare(v)


def matcher(pattern: str) -> Any:
    """A function of one parsed log line (any JSON value): whether the JSON filter pattern matches it."""
    parser = _Parser(_tokens(pattern))
    parser.expect("{")
    test = parser.disjunction()
    parser.expect("}")
    if parser.peek() is not None:
        raise UnsupportedPattern("text after the closing brace")
    return lambda doc: isinstance(doc, dict) and test(doc)


@dataclass(frozen=True)
class MetricFilter:
    """One synthesized AWS::Logs::MetricFilter (one metric transformation)."""

    pattern: str
    namespace: str
    name: str
    value: str
    dimensions: tuple[tuple[str, str], ...]

    @classmethod
    def from_template(cls, properties: Mapping[str, Any]) -> MetricFilter:
        (transform,) = properties["MetricTransformations"]
        dimensions = tuple((d["Key"], d["Value"]) for d in transform.get("Dimensions", []))
        return cls(properties["FilterPattern"], transform["MetricNamespace"], transform["MetricName"],
                   transform["MetricValue"], dimensions)  # fmt: skip

    def publish(self, lines: Iterable[Any]) -> dict[tuple[tuple[str, str], ...], float]:
        """Sum of the metric value per dimension values over the lines the pattern matches."""
        test, sums = matcher(self.pattern), {}
        for line in lines:
            if not test(line):
                continue
            value = float(self.value) if not self.value.startswith("$") else select(line, self.value)
            dims = tuple((key, select(line, field)) for key, field in self.dimensions)
            if not _is_number(value) or any(not (isinstance(v, str) or _is_number(v)) for _, v in dims):
                continue
            key = tuple((k, str(v)) for k, v in dims)
            sums[key] = sums.get(key, 0.0) + float(value)
        return sums


def _fill(value: float | None, default: float) -> float:
    return default if value is None else value


def _if(condition: Any, then: float, otherwise: float) -> float:
    return then if condition else otherwise


def evaluate_alarm(
    metrics: list[Mapping[str, Any]], values: Mapping[tuple[str, str, tuple[tuple[str, str], ...]], float]
) -> float:
    """One period of a metric math alarm: `metrics` is the alarm's Metrics array, `values` each metric's sum
    by (namespace, name, dimensions); a metric with no data reads as None (FILL gives it a value)."""
    scope: dict[str, Any] = {"IF": _if, "MAX": max, "ABS": abs, "FILL": _fill, "__builtins__": {}}
    pending = []
    for entry in metrics:
        if "MetricStat" in entry:
            metric = entry["MetricStat"]["Metric"]
            dims = tuple(sorted((d["Name"], d["Value"]) for d in metric.get("Dimensions", [])))
            scope[entry["Id"]] = values.get((metric["Namespace"], metric["MetricName"], dims))
        else:
            pending.append(entry)
    result = math.nan
    while pending:  # expressions may use each other: evaluate those whose inputs are known
        before = len(pending)
        for entry in list(pending):
            try:
                scope[entry["Id"]] = eval(entry["Expression"], scope)  # noqa: S307 - the template's own expression
            except NameError:
                continue
            pending.remove(entry)
            if entry.get("ReturnData", True):
                result = scope[entry["Id"]]
        if len(pending) == before:
            raise UnsupportedPattern(f"expressions name unknown ids: {[e['Expression'] for e in pending]}")
    return float(result)
