"""YAML for user files (topologies, schedules): the safe loader without aliases (a 544-byte
alias bomb expands to gigabytes), nesting capped, and every failure one line with its line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

MAX_DEPTH = 64


class RefusedYaml(yaml.YAMLError):
    """YAML the harness does not accept: an alias, deep nesting, a value Python cannot hold."""

    def __init__(self, problem: str, mark: Any = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark

    def __str__(self) -> str:
        return self.problem + (f" (line {self.problem_mark.line + 1})" if self.problem_mark else "")


class BoundedLoader(yaml.SafeLoader):
    """yaml.SafeLoader refusing aliases (`*name`, `<<: *name`) and nesting deeper than MAX_DEPTH."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise RefusedYaml(
                f"YAML aliases (*{event.anchor}) are not accepted; write the value out", event.start_mark
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise RefusedYaml(f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def compose(text: str) -> tuple[yaml.Node | None, Any]:
    """(node, data) of a single-document YAML text; yaml.YAMLError (see problem()) if refused."""
    loader = BoundedLoader(text)
    try:
        node = loader.get_single_node()
        try:
            data = loader.construct_document(node) if node is not None else None
        except (ValueError, OverflowError) as e:  # 5,000-digit integers, 2024-13-45 dates
            why = "an integer of more than 4300 digits" if "digits" in str(e) else _first_line(e)
            raise RefusedYaml(f"a value that cannot be read: {why}") from None
        return node, data
    finally:
        loader.dispose()


_KEY_KINDS = {"int": "a number", "float": "a number", "bool": "true/false", "null": "null"}


def non_text_key(node: yaml.Node) -> str | None:
    """What YAML reads a mapping key as, when not text (`1:`, `~:`, `yes:`); None for text."""
    tag = node.tag.rpartition(":")[2]
    if tag == "str":
        return None
    return _KEY_KINDS.get(tag, f"a {tag}")


@dataclass
class OddKey:
    """A mapping key pydantic would report without a line: one YAML does not read as text
    (``kind``: `1:` is a number), or one written twice (``first_line``: YAML keeps the last)."""

    loc: tuple[str | int, ...]  # the mapping's path
    key: str
    line: int
    kind: str | None = None
    first_line: int | None = None

    @property
    def what(self) -> str:
        """What is wrong, for a message that names the key's path before it."""
        if self.kind:
            return f"key {self.key or '(empty)'} is {self.kind}, not a name"
        return f"appears twice (first on line {self.first_line}); YAML would silently keep the last one"


@dataclass
class LineIndex:
    """The 1-based lines of a document's keys and items by key path (``(key, "<value>")``: a
    value's own line, e.g. a block scalar's), and its odd keys, in document order."""

    lines: dict[tuple[str | int, ...], int] = field(default_factory=dict)
    odd_keys: list[OddKey] = field(default_factory=list)

    @classmethod
    def of(cls, node: yaml.Node | None) -> LineIndex:
        index = cls()
        if node is not None:
            index._walk(node, ())
        return index

    def _walk(self, node: yaml.Node, loc: tuple[str | int, ...]) -> None:
        self.lines.setdefault(loc, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for k, v in node.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
                line = k.start_mark.line + 1
                kind = non_text_key(k)
                if kind:
                    self.odd_keys.append(OddKey(loc, key, line, kind=kind))
                if key in seen:
                    self.odd_keys.append(OddKey(loc, key, line, first_line=seen[key]))
                seen.setdefault(key, line)
                self.lines[loc + (key,)] = line
                self._walk(v, loc + (key,))
                self.lines[loc + (key, "<value>")] = v.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self.lines[loc + (i,)] = item.start_mark.line + 1
                self._walk(item, loc + (i,))

    def line_of(self, loc: tuple[Any, ...]) -> int | None:
        """The line of ``loc``, or of its nearest enclosing key that has one."""
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get(())


def safe_load(text: str) -> Any:
    return compose(text)[1]


def problem(e: yaml.YAMLError) -> tuple[str, int | None]:
    """(one-line message, 1-based line or None) of a YAML error."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    line = mark.line + 1 if mark is not None else None
    if isinstance(e, yaml.reader.ReaderError):
        char = e.character if isinstance(e.character, int) else 0
        return f"unacceptable character #x{char:04x} at position {e.position}", None
    text = getattr(e, "problem", None) or str(e)
    return _first_line(text), line


def _first_line(e: object) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__
