"""A user's activemq.xml parsed with positions, so it can be checked and patched in place.

Parsed with expat (the parser under xml.etree) because every element needs its line and the
byte span of its start tag: rewrites edit those spans and leave every other byte of the user's
file alone, so the diff against it shows only what the harness changed.
"""

from __future__ import annotations

import re
import xml.parsers.expat
from dataclasses import dataclass, field
from pathlib import Path

from harness.topology.files import read_input

MAX_DEPTH = 256  # elements inside elements; checks walk the tree recursively
AMQ_NS = "http://activemq.apache.org/schema/core"
BEANS_NS = "http://www.springframework.org/schema/beans"
PROPERTY = re.compile(r"\$\{([^}]+)\}")


class ParseFailure(ValueError):
    def __init__(self, line: int, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.line = line
        self.fix = fix


DOCTYPE_FIX = "delete the <!DOCTYPE ...> (ActiveMQ's Spring XML needs none) and write any entity's text out"


def refuse_doctype(p: xml.parsers.expat.XMLParserType) -> None:
    """Make expat parser `p` raise ParseFailure at any DOCTYPE: an external DTD's entities would
    be expanded by the broker's parser and not by ours, so the file checked is not the file run."""

    def doctype(name: str, *_: object) -> None:
        raise ParseFailure(
            p.CurrentLineNumber, f"document type declaration <!DOCTYPE {name}> (not accepted)", DOCTYPE_FIX
        )

    def entity(name: str, *_: object) -> None:
        raise ParseFailure(
            p.CurrentLineNumber, f"entity declaration <!ENTITY {name}> (not accepted)", DOCTYPE_FIX
        )

    p.StartDoctypeDeclHandler = doctype
    p.EntityDeclHandler = entity


@dataclass(eq=False)
class Node:
    ns: str
    tag: str
    attrs: dict[str, str]
    line: int
    start: int  # byte offset of '<'
    start_end: int = 0  # byte offset just after the start tag's '>'
    end: int = 0  # byte offset just after the element (== start_end when self-closing)
    close_start: int = 0  # byte offset of '</' (== start when self-closing)
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)

    @property
    def amq(self) -> bool:
        return self.ns == AMQ_NS

    def find(self, tag: str) -> list[Node]:
        return [c for c in self.children if c.tag == tag]

    def iter(self, tag: str | None = None) -> list[Node]:
        out = [self] if tag is None or self.tag == tag else []
        for c in self.children:
            out += c.iter(tag)
        return out

    @property
    def self_closing(self) -> bool:
        return self.close_start == self.start


@dataclass(eq=False)
class ConfFile:
    path: Path
    data: bytes
    root: Node

    @property
    def broker(self) -> Node | None:
        found = [n for n in self.root.iter("broker") if n.amq]
        return found[0] if found else None

    def comments(self) -> list[tuple[int, int]]:
        return [(m.start(), m.end()) for m in re.finditer(rb"<!--.*?-->", self.data, re.S)]


def _tag_end(data: bytes, start: int) -> int:
    """Offset just after the '>' closing the tag that starts at `start` (quotes respected)."""
    quote = 0
    i = start
    while i < len(data):
        ch = data[i]
        if quote:
            if ch == quote:
                quote = 0
        elif ch in (0x22, 0x27):
            quote = ch
        elif ch == 0x3E:
            return i + 1
        i += 1
    return len(data)


def parse(path: Path) -> ConfFile:
    """Parse `path`; raises ParseFailure (with the line) when it is not well-formed XML, or uses
    what a broker config never needs (a DOCTYPE, nesting deeper than MAX_DEPTH);
    InputFileError when it is not a regular file of bounded size."""
    data = read_input(path)
    p = xml.parsers.expat.ParserCreate(namespace_separator=" ")
    stack: list[Node] = []
    top: list[Node] = []

    def start(name: str, attrs: dict[str, str]) -> None:
        ns, _, tag = name.rpartition(" ")
        at = p.CurrentByteIndex
        n = Node(ns, tag, {k.rpartition(" ")[2]: v for k, v in attrs.items()}, p.CurrentLineNumber, at)
        n.start_end = _tag_end(data, at)
        if len(stack) >= MAX_DEPTH:
            raise ParseFailure(p.CurrentLineNumber, f"elements nested deeper than {MAX_DEPTH} levels")
        n.parent = stack[-1] if stack else None
        (stack[-1].children if stack else top).append(n)
        stack.append(n)

    def end(name: str) -> None:
        n = stack.pop()
        at = p.CurrentByteIndex
        if at in (n.start, n.start_end) and data[n.start_end - 2 : n.start_end] == b"/>":
            n.close_start, n.end = n.start, n.start_end  # <x/>: no end tag
        else:
            n.close_start, n.end = at, _tag_end(data, at)

    p.StartElementHandler = start
    p.EndElementHandler = end
    _feed(p, data)
    return ConfFile(Path(path), data, top[0])


def _feed(p: xml.parsers.expat.XMLParserType, data: bytes) -> None:
    """Parse `data` whole with `p`, refusing a DOCTYPE; ParseFailure with the line otherwise."""
    refuse_doctype(p)
    try:
        p.Parse(data, True)
    except xml.parsers.expat.ExpatError as e:
        raise ParseFailure(
            e.lineno, f"not well-formed XML ({xml.parsers.expat.ErrorString(e.code)})"
        ) from None


def check_text(data: bytes) -> None:
    """ParseFailure (with the line) unless `data` is well-formed XML without a DOCTYPE: every
    reader of a user's XML (xml_file, a rendered activemq.xml) refuses what parse() refuses."""
    _feed(xml.parsers.expat.ParserCreate(), data)


def line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1
