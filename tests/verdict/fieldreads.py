"""Which fields of the agents' message-log records the verdict's code reads, found with `ast`
(issue 41: "a checker reads only fields docs/agent-contract.md lists").

Nothing is imported or run. A name holds a record when it is bound from the records: a loop or
comprehension over `v.records.get(...)`, `v.records.values()` / `.items()`, `v.events(...)`,
`iter_records(...)`, an element `recs[i]`, `next(<records>)`, a dict filled with records (`d.setdefault(k,
r)`, `d.setdefault(k, []).append(r)`), or a parameter that some call passes a record (or a list of
them) to, across modules by function name. A read is `r.get("f")`, `r["f"]`, `"f" in r`, or the
same with a key bound by a loop over a tuple of strings. Loop and comprehension names hold a record
only inside their loop, so a name reused for something else afterwards is not confused with one.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

REC, LIST, LISTS, ITEMS, ENUM, BY_AGENT, DICT_REC, DICT_LIST = (
    "rec",
    "list",
    "lists",
    "items",
    "enum",
    "by_agent",
    "dict_rec",
    "dict_list",
)
_CONTAINERS = (DICT_REC, DICT_LIST, LIST)


@dataclass(frozen=True)
class Read:
    field: str
    where: str  # module:function:line


@dataclass
class _Env:
    names: dict[str, object]
    shared: dict[str, str]  # containers filled along the function (not scoped to a loop)
    fn: str

    def child(self) -> _Env:
        return _Env(dict(self.names), self.shared, self.fn)

    def kind(self, name: str) -> object:
        return self.names.get(name, self.shared.get(name))


@dataclass
class Analyzer:
    modules: dict[str, ast.Module]  # module label -> its tree
    params: dict[str, dict[str, str]] = field(default_factory=dict)  # function -> param -> kind
    reads: set[Read] = field(default_factory=set)
    index: dict[str, list[ast.FunctionDef | ast.ClassDef]] = field(default_factory=dict)

    def run(self) -> set[Read]:
        for _ in range(8):  # to a fixpoint of the parameters calls pass records to
            before = {k: dict(v) for k, v in self.params.items()}
            self.reads = set()
            for label, tree in self.modules.items():
                self._functions(label, tree.body, None)
            if before == self.params:
                break
        return self.reads

    def _functions(self, label: str, body: list[ast.stmt], outer: _Env | None) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                self._functions(label, node.body, outer)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                env = outer.child() if outer else _Env({}, {}, "")
                env = _Env(env.names, {}, f"{label}:{node.name}")
                for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
                    kind = self.params.get(node.name, {}).get(a.arg)
                    if kind is not None:
                        env.names[a.arg] = kind
                    else:
                        env.names.pop(a.arg, None)
                self._stmts(label, node.body, env)

    # -- statements ------------------------------------------------------------------------------
    def _stmts(self, label: str, body: list[ast.stmt], env: _Env) -> None:
        for s in body:
            if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self._functions(label, [s], env)
            elif isinstance(s, ast.For | ast.AsyncFor):
                self._expr(s.iter, env)
                inner = env.child()
                self._bind(s.target, self._element(s.iter, env), inner)
                self._stmts(label, s.body, inner)
                self._stmts(label, s.orelse, env)
            elif isinstance(s, ast.Assign | ast.AnnAssign):
                value = s.value
                if value is None:
                    continue
                self._expr(value, env)
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                for t in targets:
                    self._bind(t, self._kind(value, env), env)
            else:
                for child in ast.iter_child_nodes(s):
                    if isinstance(child, ast.stmt):
                        self._stmts(label, [child], env)
                    elif isinstance(child, ast.expr):
                        self._expr(child, env)
                    elif isinstance(child, ast.excepthandler | ast.withitem | ast.match_case):
                        for sub in ast.iter_child_nodes(child):
                            if isinstance(sub, ast.stmt):
                                self._stmts(label, [sub], env)
                            elif isinstance(sub, ast.expr):
                                self._expr(sub, env)

    def _bind(self, target: ast.expr, kind: object, env: _Env) -> None:
        if isinstance(target, ast.Name):
            if kind is None:
                env.names.pop(target.id, None)
            else:
                env.names[target.id] = kind
        elif isinstance(target, ast.Tuple | ast.List):
            parts = kind if isinstance(kind, tuple) and len(kind) == len(target.elts) else None
            for i, elt in enumerate(target.elts):
                self._bind(elt, parts[i] if parts else None, env)

    # -- what an expression holds ------------------------------------------------------------------
    def _element(self, it: ast.expr, env: _Env) -> object:
        """The kind of each item a loop over `it` binds."""
        k = self._kind(it, env)
        if k == LIST:
            return REC
        if k == LISTS:
            return LIST
        if k == ITEMS:
            return (None, LIST)
        if k == ENUM:
            return (None, REC)
        if isinstance(it, ast.Tuple | ast.List) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in it.elts
        ):
            return ("keys", *(e.value for e in it.elts if isinstance(e, ast.Constant)))
        return None

    def _kind(self, e: ast.expr, env: _Env) -> object:  # noqa: C901 - one case per expression form
        if isinstance(e, ast.Name):
            return env.kind(e.id)
        if isinstance(e, ast.Attribute) and e.attr == "records":
            return BY_AGENT
        if isinstance(e, ast.Subscript):
            base = self._kind(e.value, env)
            if base in (BY_AGENT, DICT_LIST):
                return LIST
            if base == DICT_REC:
                return REC
            if base == LIST:
                return LIST if isinstance(e.slice, ast.Slice) else REC
            return None
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
            return LIST if LIST in (self._kind(e.left, env), self._kind(e.right, env)) else None
        if isinstance(e, ast.BoolOp):
            kinds = {self._kind(v, env) for v in e.values}
            return LIST if LIST in kinds else (REC if REC in kinds else None)
        if isinstance(e, ast.IfExp):
            return self._kind(e.body, env) or self._kind(e.orelse, env)
        if isinstance(e, ast.ListComp | ast.GeneratorExp):
            return LIST if self._comp_elt(e, env) == REC else None
        if isinstance(e, ast.Call):
            return self._call_kind(e, env)
        return None

    def _call_kind(self, e: ast.Call, env: _Env) -> object:
        f = e.func
        if isinstance(f, ast.Attribute):
            base = self._kind(f.value, env)
            if base == BY_AGENT:
                return {"get": LIST, "values": LISTS, "items": ITEMS}.get(f.attr)
            if f.attr == "get" and base in (DICT_LIST, DICT_REC):
                return LIST if base == DICT_LIST else REC
            if f.attr == "events":
                return LIST
            return None
        if isinstance(f, ast.Name) and e.args:
            first = self._kind(e.args[0], env)
            if f.id in ("sorted", "list", "reversed") and first == LIST:
                return LIST
            if f.id == "enumerate" and first == LIST:
                return ENUM
            if f.id == "next" and isinstance(e.args[0], ast.GeneratorExp):
                return REC if self._comp_elt(e.args[0], env) == REC else None
        if isinstance(f, ast.Name) and f.id == "iter_records":
            return LIST
        return None

    def _comp_elt(self, e: ast.ListComp | ast.GeneratorExp, env: _Env) -> object:
        inner = env.child()
        for gen in e.generators:
            self._bind(gen.target, self._element(gen.iter, inner), inner)
        return self._kind(e.elt, inner)

    # -- reads -------------------------------------------------------------------------------------
    def _read(self, holder: ast.expr, key: ast.expr, env: _Env) -> None:
        if self._kind(holder, env) != REC:
            return
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            keys: tuple[str, ...] = (key.value,)
        elif isinstance(key, ast.Name) and isinstance(k := env.kind(key.id), tuple) and k[:1] == ("keys",):
            keys = tuple(str(x) for x in k[1:])
        else:
            return
        for name in keys:
            self.reads.add(Read(name, f"{env.fn}:{key.lineno}"))

    def _expr(self, e: ast.expr, env: _Env) -> None:
        if isinstance(e, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            inner = env.child()
            for gen in e.generators:
                self._expr(gen.iter, inner)
                self._bind(gen.target, self._element(gen.iter, inner), inner)
                for cond in gen.ifs:
                    self._expr(cond, inner)
            for part in [e.key, e.value] if isinstance(e, ast.DictComp) else [e.elt]:
                self._expr(part, inner)
            return
        if isinstance(e, ast.Lambda):
            inner = env.child()
            for a in e.args.args:
                inner.names.pop(a.arg, None)
            self._expr(e.body, inner)
            return
        if isinstance(e, ast.Subscript):
            self._read(e.value, e.slice, env)
        elif isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.ops[0], ast.In | ast.NotIn):
            self._read(e.comparators[0], e.left, env)
        elif isinstance(e, ast.Call):
            self._call(e, env)
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                self._expr(child, env)

    def _call(self, e: ast.Call, env: _Env) -> None:
        f = e.func
        if isinstance(f, ast.Attribute) and f.attr == "get" and e.args:
            self._read(f.value, e.args[0], env)
        self._fill(e, env)
        self._pass(e, env)
        for kw in e.keywords:  # key=lambda r: r["ts"] over records
            if kw.arg == "key" and isinstance(kw.value, ast.Lambda) and kw.value.args.args:
                over = e.args[0] if e.args else (f.value if isinstance(f, ast.Attribute) else None)
                if over is not None and self._kind(over, env) == LIST:
                    inner = env.child()
                    inner.names[kw.value.args.args[0].arg] = REC
                    self._expr(kw.value.body, inner)

    def _fill(self, e: ast.Call, env: _Env) -> None:
        """`d.setdefault(k, r)`, `d.setdefault(k, []).append(r)`, `xs.append(r)`: d, xs hold records."""
        f = e.func
        if not isinstance(f, ast.Attribute) or not e.args or self._kind(e.args[-1], env) != REC:
            return
        if f.attr == "setdefault" and isinstance(f.value, ast.Name):
            env.shared[f.value.id] = DICT_REC
        elif f.attr == "append" and isinstance(f.value, ast.Name):
            env.shared[f.value.id] = LIST
        elif f.attr == "append" and isinstance(f.value, ast.Call):
            inner = f.value.func
            held = inner.value if isinstance(inner, ast.Attribute) and inner.attr == "setdefault" else None
            if isinstance(held, ast.Name):
                env.shared[held.id] = DICT_LIST

    def _pass(self, e: ast.Call, env: _Env) -> None:
        """A record (or records) passed to a function of the verdict marks its parameter."""
        f = e.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        if name is None:
            return
        for fn, offset in self._defs(name, isinstance(f, ast.Attribute)):
            params = [*fn.args.posonlyargs, *fn.args.args]
            for i, arg in enumerate(e.args):
                kind = self._kind(arg, env)
                if kind in (REC, *_CONTAINERS) and i + offset < len(params):
                    self.params.setdefault(fn.name, {})[params[i + offset].arg] = str(kind)
            for kw in e.keywords:
                kind = self._kind(kw.value, env) if kw.arg else None
                if kind in (REC, *_CONTAINERS):
                    self.params.setdefault(fn.name, {})[str(kw.arg)] = str(kind)

    def _defs(self, name: str, method: bool) -> list[tuple[ast.FunctionDef, int]]:
        if not self.index:
            for tree in self.modules.values():
                for node in ast.walk(tree):
                    if isinstance(node, ast.FunctionDef | ast.ClassDef):
                        self.index.setdefault(node.name, []).append(node)
        out: list[tuple[ast.FunctionDef, int]] = []
        for node in self.index.get(name, []):
            if isinstance(node, ast.FunctionDef):
                first = node.args.args[0].arg if node.args.args else ""
                out.append((node, 1 if method and first in ("self", "cls") else 0))
            else:  # a class: its __init__ after self
                out += [(n, 1) for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
        return out


def field_reads(paths: list[Path], root: Path) -> dict[str, set[str]]:
    """field -> where it is read (module:function:line), over the given source files."""
    modules = {str(p.relative_to(root)): ast.parse(p.read_text(encoding="utf-8")) for p in paths}
    out: dict[str, set[str]] = {}
    for r in Analyzer(modules).run():
        out.setdefault(r.field, set()).add(r.where)
    return out


def analyse_source(source: str) -> dict[str, set[str]]:
    """The same over one snippet (the self-test)."""
    out: dict[str, set[str]] = {}
    for r in Analyzer({"snippet": ast.parse(source)}).run():
        out.setdefault(r.field, set()).add(r.where)
    return out
