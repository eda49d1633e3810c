"""Loading a topology: YAML read with a line-tracking loader, so every problem is reported as
`file:line: key.path: what is wrong. Fix: what to write instead`, all problems at once; the
built-in topologies (harness/topologies/*.yaml); a deployment's own activemq.xml files (`config:`)
are checked and imported by harness.topology.imported."""

from __future__ import annotations

import difflib
import os
import re
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from harness.topology import yamlsafe
from harness.topology.amqxml import ParseFailure, check_text
from harness.topology.destfilter import locate
from harness.topology.files import InputFileError, check_input, expand, read_text
from harness.topology.imported import import_configs
from harness.topology.model import (
    Bridge,
    ConnectorSpec,
    Group,
    Loc,
    Problem,
    Topology,
    TopologyError,
    User,
    _Problems,
)

_FIELD_HINTS: dict[str, str] = {
    "name": "add `name: <lowercase-name>`",
    "groups": "add `groups:` with at least one `- name: <group>`",
    "from": "add `from: <group>`",
    "to": "add `to: <group>`",
    "password": "add `password: <secret>`",
}


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The pydantic model whose keys live at `loc` (for spelling suggestions)."""
    models: dict[str, type[BaseModel]] = {"groups": Group, "bridges": Bridge, "users": User}
    model: type[BaseModel] | None = Topology
    i = 0
    while i < len(loc) and model is not None:
        part = loc[i]
        if model is Topology and part in ("groups", "bridges", "users"):
            model = models[str(part)]
            i += 2
            continue
        if model is Group and part == "connectors":
            model = ConnectorSpec
            i += 2
            continue
        return None
    return model if i == len(loc) else None


def _keys_of(model: type[BaseModel]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items()]


def _problem_from_error(e: Any) -> list[Problem]:
    loc: Loc = tuple(p for p in e["loc"] if p != "[key]")
    etype = e["type"]
    ctx = e.get("ctx") or {}
    inner = ctx.get("error")
    if isinstance(inner, _Problems):
        return [Problem(loc + p.loc, p.message, p.fix) for p in inner.problems]
    msg = str(e["msg"]).removeprefix("Value error, ")
    value = e.get("input")
    fix = ""
    if etype == "extra_forbidden":
        model = _model_at(loc[:-1])
        known = _keys_of(model) if model else []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        msg = f"unknown key {loc[-1]!r}"
        fix = (f"did you mean {close[0]!r}? " if close else "") + (
            f"known keys here: {', '.join(known)}" if known else "remove it"
        )
    elif etype == "invalid_key":
        kind = {bool: "true/false", int: "a number", float: "a number", type(None): "null"}
        return [_non_text_key(loc[:-1], str(value), kind.get(type(value), type(value).__name__))]
    elif etype == "missing":
        msg = "required key is missing"
        fix = _FIELD_HINTS.get(str(loc[-1]), f"add `{loc[-1]}:`")
    elif etype == "literal_error":
        expected = str(ctx.get("expected", "")).replace("'", "")
        msg = f"unknown connector {value!r}" if "[key]" in e["loc"] else f"{value!r} is not allowed here"
        close = difflib.get_close_matches(
            str(value), [x.strip() for x in expected.replace(" or ", ",").split(",")], n=1
        )
        fix = (f"did you mean {close[0]!r}? " if close else "") + f"use one of {expected}"
    elif etype == "string_pattern_mismatch":
        if loc and loc[-1] == "name" and len(loc) >= 1 and loc[0] == "users":
            fix = "user names cannot contain spaces or commas"
        else:
            fix = (
                "use lowercase letters, digits and '-', starting with a letter, at most 31 characters "
                "(it becomes broker and file names)"
            )
        msg = f"{value!r} is not a valid name"
    elif etype in ("int_parsing", "int_type", "int_from_float"):
        fix = "write a whole number"
    elif etype in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        op = next(k for k in ("ge", "le", "gt", "lt") if k in ctx)
        fix = f"use a value {dict(ge='>=', le='<=', gt='>', lt='<')[op]} {ctx[op]}"
        msg = f"{value!r} is out of range"
    elif etype in ("bool_parsing", "bool_type"):
        fix = "write true or false"
    elif etype in ("string_type", "string_too_short"):
        fix = "write a non-empty text value (quote it if YAML reads it as a number or boolean)"
    elif etype == "too_long":
        msg = f"{ctx.get('actual_length', 'too many'):,} items; at most {ctx.get('max_length', 0):,}"
        fix = "fold entries into wildcards (`a.>`, `*.b`), or split the list"
    elif etype in ("list_type", "too_short"):
        fix = "write a YAML list with at least one `- ` item" if etype == "too_short" else "write a YAML list"
    elif etype in ("dict_type", "model_type", "model_attributes_type"):
        fix = "write a mapping of `key: value` lines here"
    return [Problem(loc, msg, fix)]


class _LineMap:
    """Line numbers of keys and items in a YAML document, by key path (yamlsafe.LineIndex), and
    the problems of its odd keys."""

    def __init__(self, node: yaml.Node | None = None) -> None:
        index = yamlsafe.LineIndex.of(node)
        self.lines = index.lines
        self.line_of = index.line_of
        self.problems: list[Problem] = [_odd_key(k) for k in index.odd_keys]


def _odd_key(k: yamlsafe.OddKey) -> Problem:
    if k.kind:
        return _non_text_key(k.loc, k.key, k.kind, k.line)
    return Problem(k.loc + (k.key,), f"key {k.key!r} {k.what}", "remove one of them", k.line)


def _non_text_key(loc: Loc, key: str, kind: str, line: int | None = None) -> Problem:
    """A key YAML does not read as text (`1:`, `~:`): pydantic would report it without a line."""
    model = _model_at(loc)
    if model:
        fix = f"remove it, or use a known key here: {', '.join(_keys_of(model))}"
    elif loc[-1:] == ("connectors",):
        fix = "use one of openwire, mqtt or stomp"
    else:
        fix = f"quote it if it is meant as text ('{key}': ...), or remove it"
    return Problem(loc + (key,), yamlsafe.OddKey(loc, key, line or 0, kind=kind).what, fix, line)


def _report(source: str, problems: list[Problem]) -> TopologyError:
    n = len(problems)
    head = f"{source}: invalid topology ({n} problem{'s' if n != 1 else ''})"
    return TopologyError("\n".join([head] + ["  " + p.render(source) for p in problems]), problems)


def parse_topology(data: Any, source: str = "<topology>", lines: _LineMap | None = None) -> Topology:
    """Validate already-parsed data; every problem is reported (with its line when `lines` is given)."""
    problems = list(lines.problems) if lines else []
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        p = Problem(
            (),
            f"a topology must be a mapping with `name` and `groups`, but the document is {kind}",
            "start the file with `name: <topology-name>` and a `groups:` list (see docs/topology.md)",
            lines.line_of(()) if lines else None,
        )
        raise _report(source, problems + [p])
    topology: Topology | None = None
    try:
        topology = Topology.model_validate(data)
    except ValidationError as err:
        for e in err.errors():
            if (
                lines
                and lines.problems  # a YAML key that is not text (a list item null is not a key)
                and (e["type"] == "invalid_key" or ("[key]" in e["loc"] and not isinstance(e["input"], str)))
            ):
                continue  # a key that is not text: reported at its own line by _LineMap
            problems += _problem_from_error(e)
    if lines:
        for p in problems:
            if p.line is None:
                p.line = _fragment_line(p, lines) or lines.line_of(p.loc)
    if problems:
        problems.sort(key=lambda p: p.line or 0)
        raise _report(source, problems)
    assert topology is not None
    return topology


def _fragment_line(p: Problem, lines: _LineMap) -> int | None:
    """For an XML fragment problem, the file line of the XML error."""
    if not p.loc or p.loc[-1] != "xml_fragment":
        return None
    m = re.search(r"fragment line (\d+)", p.message)
    start = lines.lines.get(p.loc + ("<value>",))
    if m and start:
        # A block scalar (`|`) starts on the line after the key's indicator.
        key_line = lines.lines.get(p.loc, start)
        first = start + 1 if start == key_line else start
        return first + int(m.group(1)) - 1
    return None


def _absolute(name: str, base: Path) -> str:
    """`name` relative to the topology file; kept as written when it cannot be expanded (the
    read reports why: `~nosuchuser/`) or resolved (a symlink loop)."""
    try:
        p = expand(name)
    except InputFileError:
        return name
    p = p if p.is_absolute() else base / p
    try:
        return str(p.resolve())
    except (OSError, RuntimeError):
        return str(p)


def _resolve_files(data: Any, base: Path) -> None:
    """Make xml_file and config paths absolute (relative to the topology file)."""
    if not isinstance(data, dict) or not isinstance(data.get("groups"), list):
        return
    for g in data["groups"]:
        if isinstance(g, dict) and isinstance(g.get("xml_file"), str):
            g["xml_file"] = _absolute(g["xml_file"], base)
        if isinstance(g, dict) and isinstance(g.get("config"), (str, list)):
            files = [g["config"]] if isinstance(g["config"], str) else g["config"]
            out = [_absolute(f, base) if isinstance(f, str) else f for f in files]
            g["config"] = out[0] if isinstance(g["config"], str) else out


def _file_problems(data: Any, lines: _LineMap) -> list[Problem]:
    out: list[Problem] = []
    if not isinstance(data, dict) or not isinstance(data.get("groups"), list):
        return out
    for i, g in enumerate(data["groups"]):
        if isinstance(g, dict) and isinstance(g.get("config"), (str, list)):
            files = [g["config"]] if isinstance(g["config"], str) else g["config"]
            for f in files:
                try:
                    if isinstance(f, str):
                        check_input(f)
                except InputFileError as e:
                    out.append(
                        Problem(
                            ("groups", i, "config"),
                            str(e),
                            "give a regular file, relative to the topology file or absolute",
                            lines.line_of(("groups", i, "config")),
                        )
                    )
        if not (isinstance(g, dict) and isinstance(g.get("xml_file"), str)):
            continue
        loc: Loc = ("groups", i, "xml_file")
        path = Path(g["xml_file"])
        try:
            text = read_text(path)
        except InputFileError as e:
            out.append(
                Problem(
                    loc,
                    str(e),
                    "give a regular file, relative to the topology file or absolute",
                    lines.line_of(loc),
                )
            )
            continue
        try:
            check_text(re.sub(r"\{[{%#].*?[}%#]\}", "x", text, flags=re.S).encode())
        except ParseFailure as e:
            out.append(
                Problem(
                    loc,
                    f"{path} line {e.line}: {e}",
                    e.fix or "fix the file; Jinja2 {{ ... }} placeholders are allowed",
                    lines.line_of(loc),
                )
            )
    return out


def loads_topology(text: str, source: str = "<topology>", base_dir: Path | None = None) -> Topology:
    """Parse and validate topology YAML text."""
    try:
        node, data = yamlsafe.compose(text)
    except yaml.YAMLError as e:
        problem, line = yamlsafe.problem(e)
        fix = "fix the YAML syntax (indent with spaces, not tabs; quote values containing ': ' or '#')"
        if isinstance(e, yamlsafe.RefusedYaml):
            fix = "write every value out (no anchors/aliases, at most a few levels deep)"
        raise _report(source, [Problem((), f"not valid YAML: {problem}", fix, line)]) from None
    lines = _LineMap(node)
    if base_dir is not None:
        _resolve_files(data, base_dir)
    lines.problems += _file_problems(data, lines)
    topology = parse_topology(data, source, lines)
    bridges = locate(topology.bridges, source, lines.line_of)  # the file:line path warnings cite
    topology = topology.model_copy(update={"bridges": bridges})
    if any(g.config for g in topology.groups):
        # checks the files; errors raise here
        topology = import_configs(topology, source)
    return topology


def load_topology(path_or_name: str | Path) -> Topology:
    """Load a topology file, or a built-in example by name (`pair`, `network-of-pairs`, ...)."""
    path = Path(path_or_name)
    if str(path_or_name) in builtin_names() and not os.path.lexists(path):
        return builtin_topology(str(path_or_name))
    try:
        text = read_text(path)
    except InputFileError as e:
        raise TopologyError(
            f"cannot read topology file {e}. Fix: give the path of a UTF-8 YAML file, "
            f"or a built-in name: {', '.join(builtin_names())}"
        ) from None
    try:
        base = path.resolve().parent
    except (OSError, RuntimeError):
        base = path.absolute().parent
    return loads_topology(text, str(path), base)


def builtin_names() -> list[str]:
    root = resources.files("harness") / "topologies"
    return sorted(p.name.removesuffix(".yaml") for p in root.iterdir() if p.name.endswith(".yaml"))


def builtin_path(name: str) -> Path:
    return Path(str(resources.files("harness") / "topologies" / f"{name}.yaml"))


def builtin_topology(name: str) -> Topology:
    f = resources.files("harness") / "topologies" / f"{name}.yaml"
    if not f.is_file():
        close = difflib.get_close_matches(name, builtin_names(), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise TopologyError(
            f"no built-in topology {name!r}. Fix: {hint}built-ins: {', '.join(builtin_names())}"
        )
    return loads_topology(f.read_text(encoding="utf-8"), f"built-in {name}", Path(str(f)).parent)
