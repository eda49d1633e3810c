"""A finding of `bfh agent check`, and the line of docs/agent-contract.md that states its rule.

The document is found where it is kept: the checkout's docs/, or the copy shipped in this package
(`agent-contract.md`, a link to docs/ in the checkout, a file in the wheel). A rule id is looked
up where the document states it (a line starting `**C-15**`), so the cited line follows the
document's edits.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.agentcheck.rules import RULES

DOC = "docs/agent-contract.md"
_HERE = Path(__file__).resolve().parent
_CANDIDATES = (_HERE.parent.parent / DOC, _HERE / "agent-contract.md")

#: agent.conf's mb.password in the check's runs (the pair takes any credentials); no finding
#: quotes it (a line of agent.out that printed it is shown with it redacted)
PASSWORD = f"bfh-check-{secrets.token_hex(6)}"
REDACTED = "<mb.password>"

CONTRACT = "contract"  # the adapter's log or exit is wrong: the adapter's author fixes it
BEHAVIOUR = "behaviour"  # the client under test broke a promise (harness/verdict): a finding


@dataclass(frozen=True)
class Finding:
    rule: str  # a RULES id (contract) or a promise (behaviour)
    what: str
    where: str | None = None  # messages.jsonl:LINE (contract) or the evidence (behaviour)
    kind: str = CONTRACT

    def __post_init__(self) -> None:
        for name in ("what", "where"):
            value = getattr(self, name)
            if isinstance(value, str) and PASSWORD in value:
                object.__setattr__(self, name, value.replace(PASSWORD, REDACTED))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "rule": self.rule, "where": self.where, "what": self.what}
        if self.kind == CONTRACT:
            rule = RULES.get(self.rule)
            out["rule_text"] = rule.text if rule else None
            out["contract"] = contract_line(self.rule)
        return out


@lru_cache(maxsize=1)
def _doc() -> tuple[str, tuple[str, ...]] | None:
    for path in _CANDIDATES:
        try:
            return str(path), tuple(path.read_text(encoding="utf-8").splitlines())
        except OSError:
            continue
    return None


def contract_line(rule_id: str) -> str | None:
    """`docs/agent-contract.md:LINE` where the rule's id is stated; None when it is not."""
    doc = _doc()
    if doc is None:
        return None
    stated = re.compile(rf"^\*\*{re.escape(rule_id)}\*\*")  # a rule starts its line: **C-15**
    named = re.compile(rf"(?<![\w-]){re.escape(rule_id)}(?![\w-])")
    for pattern in (stated, named):
        for no, line in enumerate(doc[1], 1):
            if pattern.search(line):
                return f"{DOC}:{no}"
    return None


def missing_rules() -> list[str]:
    """The rule ids the contract document does not state (a test keeps this empty)."""
    return [r for r in RULES if contract_line(r) is None]
