"""Stage 1: per-run facts and the small dimensions (one Spark job, or none when staging kept them).

The facts are a "cube" of a few rows per run (event, agent, topic, filter, reason with counts and
first/last times); from them come the subscriptions, the topics and the run ids the later stages
look up.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from spark_analysis.frames import collect_many, json_literal
from spark_analysis.ingest import (
    FACTS_EXAMPLES,
    FOREIGN,
    MALFORMED,
    PUBLISHER_EVENTS,
    RunSources,
    facts_frames,
    staged_facts,
)
from spark_analysis.inputs import RunInput, run_id_from_json
from spark_analysis.policy import Policy


@dataclass
class Facts:
    runs: int  # runs in the job; ``rk`` indexes them
    cube: list[dict[str, Any]]
    malformed_rows: list[dict[str, Any]]
    run_ids: list[str]
    t_min: dict[int, float]
    t_max: dict[int, float]
    #: subscriptions, identity (rk, agent, filter), with their run-local index ``j``
    subs: list[dict[str, Any]]
    smax: int  # the most subscriptions of one run
    sub_at: dict[tuple[int, int], dict[str, Any]]
    topics: list[tuple[int, str]]
    dims: list[tuple[int, str, str]]  # (rk, kind, value) of agents, topics and drop reasons

    def sub_lookup(self, field_name: str, j: Any, dtype: str) -> Any:
        """Column: ``field_name`` of subscription ``j`` of the row's run (a literal-array lookup)."""
        from pyspark.sql import functions as F

        values = [
            self.sub_at[(rk, jj)][field_name] if (rk, jj) in self.sub_at else None
            for rk in range(self.runs)
            for jj in range(self.smax)
        ]
        if not values:
            return F.lit(None).cast(dtype)
        arr = json_literal(values, f"array<{dtype}>")
        return F.when(j.isNotNull(), F.element_at(arr, F.col("rk") * self.smax + j + 1))

    def sub_field(self, field_name: str, j: int, dtype: str) -> Any:
        """Column: ``field_name`` of subscription index ``j`` (a constant) of the row's run: a lookup
        in an array of one value per run, not of every run's every subscription."""
        from pyspark.sql import functions as F

        values = [(self.sub_at.get((rk, j)) or {}).get(field_name) for rk in range(self.runs)]
        if self.runs == 1:
            return F.lit(values[0]).cast(dtype)
        arr = F.array(*[F.lit(v).cast(dtype) for v in values])
        return F.element_at(arr, F.col("rk") + 1)

    def roles(self, rk: int) -> list[tuple[str, bool, str | None]]:
        """(agent, is_ack, subscription) of every role of a run: publishers with an acknowledged
        send, subscriptions with a receipt."""
        return sorted(
            {(r["agent"], True, None) for r in self.cube if r["rk"] == rk and r["event"] == "sent"}
            | {
                (r["agent"], False, r["subscription"])
                for r in self.cube
                if r["rk"] == rk and r["event"] == "received"
            },
            key=lambda x: (x[0], x[1], x[2] or ""),
        )


def _new_sub() -> dict[str, Any]:
    return {"first_ts": None, "durable": None, "qos": None, "subscribed_count": 0, "receipts": 0}


def _run_id(inp: RunInput, rk: int, cube: list[dict[str, Any]]) -> str:
    rid = run_id_from_json(inp.run_json)
    if rid:
        return rid
    counts: dict[str, int] = defaultdict(int)
    for r in cube:
        if r["rk"] == rk and r["run"] and r["event"] not in (MALFORMED, FOREIGN):
            counts[r["run"]] += r["n"]
    if counts:
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    return inp.run_dir.name


def read_facts(ev: Any, sources: list[RunSources], inputs: list[RunInput], policy: Policy) -> Facts:
    # the cube of small dimensions is kept with the staged Parquet: read it, unless a policy
    # asks for more malformed examples than were kept and some run may have them
    cached = [staged_facts(s) for s in sources]
    n = policy.examples
    if all(c is not None for c in cached) and (
        n <= FACTS_EXAMPLES or all(len(c["malformed"]) < FACTS_EXAMPLES for c in cached if c)
    ):
        got: dict[str, list[dict[str, Any]]] = {"cube": [], "malformed": []}
        for rk, c in enumerate(cached):
            assert c is not None
            got["cube"] += [{**r, "rk": rk} for r in c["cube"]]
            got["malformed"] += [{**r, "rk": rk} for r in c["malformed"] if r["_rn"] <= n]
    else:
        got = collect_many(facts_frames(ev, n))
    cube = got["cube"]
    t_min: dict[int, float] = {}
    t_max: dict[int, float] = {}
    for r in cube:
        if r["t0"] is not None and r["event"] not in (MALFORMED, FOREIGN):
            rk = r["rk"]
            t_min[rk] = min(t_min.get(rk, r["t0"]), r["t0"])
            t_max[rk] = max(t_max.get(rk, r["t1"]), r["t1"])

    # subscriptions: identity (agent, filter); durable/qos from the FIRST `subscribed` record
    found: dict[tuple[int, str, str], dict[str, Any]] = {}
    firsts: dict[tuple[int, str, str], tuple[float, int]] = {}
    for r in cube:
        if r["event"] == "subscribed":
            key = (r["rk"], r["agent"], r["topic"])
            s = found.setdefault(key, _new_sub())
            s["subscribed_count"] += r["n"]
            order = (r["t0"], r["s0"])
            if key not in firsts or order < firsts[key]:
                firsts[key] = order
                s.update(first_ts=r["t0"], durable=r["durable"], qos=r["qos"])
        elif r["event"] == "received":
            found.setdefault((r["rk"], r["agent"], r["subscription"]), _new_sub())["receipts"] += r["n"]
    per_run: dict[int, int] = defaultdict(int)
    subs = []
    for (rk, agent, filt), s in sorted(found.items()):
        subs.append({"rk": rk, "j": per_run[rk], "agent": agent, "filter": filt, **s})
        per_run[rk] += 1
    return Facts(
        runs=len(inputs),
        cube=cube,
        malformed_rows=got["malformed"],
        run_ids=[_run_id(inp, rk, cube) for rk, inp in enumerate(inputs)],
        t_min=t_min,
        t_max=t_max,
        subs=subs,
        smax=max(per_run.values(), default=0),
        sub_at={(s["rk"], s["j"]): s for s in subs},
        topics=sorted(
            {(r["rk"], r["topic"]) for r in cube if r["event"] in PUBLISHER_EVENTS and r["topic"] is not None}
        ),
        dims=sorted(
            {
                (r["rk"], kind, r[kind])
                for r in cube
                if r["event"] in PUBLISHER_EVENTS
                for kind in ("agent", "topic", "reason")
                if r[kind] is not None
            }
        ),
    )
