"""The scorecard, `bfh-scorecard/1`: one gate run's promises and measures, per entry and round.

A scorecard is what `bfh compare OLD NEW` and `pytest --bfh-baseline OLD.json` compare across
agent releases (docs/compare.md, "The scorecard"). It is small (kilobytes: percentiles, never
raw samples), so a team commits it or keeps it as a CI artifact. Its one owner is this module:
the models, `load_scorecard`, `save`, and `MEASURES`, the documented names a round's `measures`
use. Who writes one: every pytest session of the plugin, `bfh run` and `bfh validate`; the round
builder that reads a run folder is `harness.verdict.scorecard.round_from_run` (`scorecard_from_runs`
there builds a whole scorecard from run folders; it reads run.json and analysis/verdict.json, which
this layer may not).

    {"schema": "bfh-scorecard/1",
     "created": ISO 8601 UTC time the file was written,
     "harness_version": harness.__version__,
     "source": "pytest" | "bfh run" | "bfh validate" | "run folders",
     "agent": {"version": the string the team passed (--bfh-agent-version / --agent-version; ""),
               "command": the agent's command line, "command_sha256": sha256 of that command},
     "entries": [{"entry": catalog entry id (or `bfh validate` row id),
                  "rounds": [{"run_id", "seed", "verdict": pass|fail|n/a|unknown|error,
                              "promises": {promise: pass|fail|n/a|unknown},
                              "measures": {name: [float, ...]},
                              "load": {"load_avg_max", "sched_delay_max_s", ...}}]}]}

Measures: a name is a base name of `MEASURES`, optionally with a role in brackets
(`recovery_s[subscriber:orders]`). Every value of one list comes from the same round (one per role,
fault window or member, in no particular order); a list may be empty (the round gave nothing to
measure, e.g. no fault took a connection down). Every measure is lower-is-better. A round that
judged nothing (an error before the verdict) has verdict "error", no promises and no measures.
Readers must ignore measure names they do not know (a newer harness may add some); a change of
any field's meaning bumps the schema to `bfh-scorecard/2`.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.contracts import outfile

SCHEMA: Literal["bfh-scorecard/1"] = "bfh-scorecard/1"
SOURCES = ("pytest", "bfh run", "bfh validate", "run folders")
#: the file name the writers use in a reports folder (the plugin's default: <--bfh-reports>/scorecard.json)
FILE_NAME = "scorecard.json"


@dataclass(frozen=True)
class Measure:
    """One measure a round may carry: its unit, whether it is a count, and what it is."""

    unit: str  # "s", "1/s" or "count"
    what: str
    per_role: bool = False  # named `<base>[<role>]`, one list per role

    @property
    def is_count(self) -> bool:
        return self.unit == "count"


#: every measure name a round's `measures` may use (the base name, before any `[role]`); all are
#: lower-is-better. The verdict's checkers compute them (harness/verdict/checks/*: Check.measures).
MEASURES: dict[str, Measure] = {
    "recovery_s": Measure(
        "s",
        "from the role losing its connection in a fault window until it is back (subscribed again, or the "
        "publisher connected): one per agent and window",
        True,
    ),
    "retry_pause_max_s": Measure(
        "s",
        "the longest pause between a role's connection attempts while away, from losing its connection "
        "until back: what its backoff reached (the takeover's own time is not in it); one per agent and "
        "window",
        True,
    ),
    "takeover_to_delivery_s": Measure(
        "s", "from a broker fault's start until the first delivery to any subscriber after it (per fault)"
    ),
    "publish_latency_p50_s": Measure("s", "median first attempt -> ack of publishes on a serving broker"),
    "publish_latency_p95_s": Measure("s", "95th percentile first attempt -> ack on a serving broker"),
    "failed_attempts_per_s": Measure(
        "1/s", "failed connection attempts per second over the densest 5 s (one per agent)", True
    ),
    "duplicates": Measure("count", "deliveries received more than once"),
    "dropped_at_timeout": Measure("count", "publishes dropped at mb.publisher.timeout (not at shutdown)"),
    "fleet_recovery_p50_s": Measure("s", "a fleet's median role back, from the fault's start"),
    "fleet_recovery_p95_s": Measure("s", "a fleet's 95th percentile role back, from the fault's start"),
    "fleet_recovery_max_s": Measure("s", "a fleet's slowest role back, from the fault's start"),
    "storm_attempts_per_role_s": Measure(
        "1/s",
        "a fleet's densest 2 s of connection attempts at the brokers, per role per second (one per run)",
    ),
    "storm_sustained_per_role_s": Measure(
        "1/s",
        "a fleet's densest 20 s of connection attempts at the brokers, per role per second (one per run)",
    ),
    "storm_all_back_s": Measure("s", "from a fault's end until every fleet member is back (per fault)"),
}


def base_name(name: str) -> str:
    """`recovery_s[publisher]` -> `recovery_s` (the key of MEASURES and of the tolerances)."""
    return name.split("[", 1)[0]


def role_of(name: str) -> str | None:
    """`recovery_s[publisher]` -> `publisher`; None for a name without a role."""
    return name.split("[", 1)[1].rstrip("]") if "[" in name else None


def measure_name(base: str, role: str | None = None) -> str:
    return f"{base}[{role}]" if role else base


class ScorecardError(ValueError):
    """A file that is not a readable `bfh-scorecard/1` (the message names the file and the field)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Agent(_Model):
    """The agent release the scorecard measured."""

    version: str = ""  # what the team passed (--bfh-agent-version, bfh run --agent-version)
    command: str = ""  # the agent's command line (redacted as run.json holds it)
    command_sha256: str = ""  # sha256 hex of `command`: two scorecards of the same command agree


class Load(BaseModel):
    """The machine's load during the round (run.json observations.load, summarized): a comparison
    shows it so a slower NEW on a busier machine is seen as such. Unknown keys are kept."""

    model_config = ConfigDict(extra="allow")
    load_avg_max: float | None = None  # the 1-minute load average's max
    sched_delay_max_s: float | None = None  # the probe thread's worst oversleep of a 0.1 s sleep
    sched_delay_p99_s: float | None = None
    overloaded_samples: int | None = None  # samples with a delay >= loadlog.OVERLOADED_S
    broker_answer_max_s: float | None = None  # slowest broker answer (TCP connect -> first byte)


class Round(_Model):
    """One run of one entry: its verdict, each promise's status and the measures."""

    run_id: str
    seed: int | None = None
    verdict: str  # pass | fail | n/a | unknown | error
    promises: dict[str, str] = Field(default_factory=dict)  # promise -> pass | fail | n/a | unknown
    measures: dict[str, list[float]] = Field(default_factory=dict)  # see MEASURES
    load: Load = Field(default_factory=Load)


class Entry(_Model):
    entry: str  # the catalog entry id (pytest, bfh run) or the `bfh validate` row id
    rounds: list[Round] = Field(default_factory=list)


class Scorecard(_Model):
    """The whole file. `schema` is spelled `schema_` in Python (pydantic's BaseModel owns `schema`)."""

    schema_: Literal["bfh-scorecard/1"] = Field(default=SCHEMA, alias="schema")
    created: str = Field(default_factory=lambda: now())
    harness_version: str = ""
    source: Literal["pytest", "bfh run", "bfh validate", "run folders"]
    agent: Agent = Field(default_factory=Agent)
    entries: list[Entry] = Field(default_factory=list)

    def entry(self, entry_id: str) -> Entry | None:
        return next((e for e in self.entries if e.entry == entry_id), None)

    def add_round(self, entry_id: str, rnd: Round) -> None:
        """Append a round to its entry (created in order of first appearance)."""
        found = self.entry(entry_id)
        if found is None:
            found = Entry(entry=entry_id)
            self.entries.append(found)
        found.rounds.append(rnd)

    def to_json(self) -> str:
        """Indented, with each list of numbers on one line (a reviewable diff when committed)."""
        text = json.dumps(self.model_dump(mode="json", by_alias=True), indent=1)
        return _NUMBERS.sub(lambda m: "[" + " ".join(m.group(1).split()) + "]", text) + "\n"


#: a JSON list of numbers, as json.dumps(indent=1) spreads it over lines
_NUMBERS = re.compile(r"\[(\s*-?[0-9.eE+-]+(?:,\s*-?[0-9.eE+-]+)*)\s*\]")


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _where(err: ValidationError) -> str:
    """pydantic's first errors as `entries[0].rounds[2].seed: message` lines."""
    out = []
    for e in err.errors()[:5]:
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e["loc"]).lstrip(".")
        out.append(f"{loc or '(top)'}: {e['msg']}")
    return "; ".join(out)


def parse(data: Any, where: str = "scorecard") -> Scorecard:
    """A scorecard from decoded JSON; ScorecardError naming the field when it is not one."""
    if not isinstance(data, dict):
        raise ScorecardError(f"{where}: not a JSON object")
    schema = data.get("schema")
    if schema != SCHEMA:
        raise ScorecardError(f"{where}: schema {schema!r}, not {SCHEMA!r} (not a scorecard, or a newer one)")
    try:
        return Scorecard.model_validate(data)
    except ValidationError as e:
        raise ScorecardError(f"{where}: {_where(e)}") from None


def load_scorecard(path: Path | str) -> Scorecard:
    """Read and validate a scorecard file; ScorecardError (file and field named) otherwise."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ScorecardError(f"{path}: cannot be read ({e.strerror or e})") from None
    except ValueError as e:
        raise ScorecardError(f"{path}: not JSON ({e})") from None
    return parse(data, str(path))


def save(card: Scorecard, path: Path | str) -> Path:
    """Write the scorecard atomically (parent folders created); returns the path."""
    path = Path(path)
    if outfile.own_fd(path) is None and not os.path.lexists(path):
        path.parent.mkdir(parents=True, exist_ok=True)
    return outfile.write_text(path, card.to_json())
