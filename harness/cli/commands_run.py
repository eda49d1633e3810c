"""`bfh demo`, `bfh run` (a catalog scenario, or a topology under a schedule) and `bfh validate`."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from harness.cli.commands_topology import config_warnings, path_warnings
from harness.cli.common import err, exit_code, names, note, rounds, settled


def cmd_demo(args: argparse.Namespace) -> int:
    from harness.cli.demo import run_demo

    return run_demo(Path(args.reports), seed=args.seed)


def cmd_run(args: argparse.Namespace) -> int:
    from harness.agents.launch import agent_factory
    from harness.faults.schedule import load_schedule
    from harness.report.console import print_summary
    from harness.run.runner import execute
    from harness.topology import load_topology
    from harness.verdict.races import run_gate

    topology = load_topology(args.topology or "pair")
    schedule = load_schedule(args.schedule)
    protocol = (
        "stomp"
        if any("stomp" in g.connectors and "mqtt" not in g.connectors for g in topology.groups)
        else "mqtt"
    )
    agents = agent_factory(
        group=topology.groups[0].name,
        protocol=protocol,
        count=300 if args.count is None else args.count,
        rate=10.0 if args.rate is None else args.rate,
        timeout_s=900 if args.publisher_timeout is None else args.publisher_timeout,
        command=args.agent_cmd,
    )
    gate = run_gate(args.gate)  # saved in run.json: a re-judge agrees
    scenario = {"name": "run", "params": {"gate": gate}} if gate != "all" else None
    result = execute(
        topology,
        agents,
        schedule,
        label="run",
        reports=Path(args.reports),
        backend=args.backend,
        scenario=scenario,
    )
    assert result.summary is not None and result.verdict is not None
    v = result.verdict
    note(
        args,
        "run",
        v.verdict,
        result.run_dir,
        v.message("run"),
        v.why_unknown if v.verdict == "unknown" else "",
    )
    print_summary(result.summary)
    err.print(f"run folder: {result.run_dir}")
    return exit_code(result.verdict.verdict)


def cmd_run_scenario(args: argparse.Namespace) -> int:
    """`bfh run NAME`: a catalog scenario (with --schedule: its agents under that schedule)."""
    from harness.agents.packed import PACK_ENV
    from harness.catalog.scenarios import (
        SCENARIOS,
        CatalogError,
        as_fleet,
        fleet_shape,
        topology_named,
        with_changes,
    )
    from harness.catalog.scenarios import run as run_catalog
    from harness.faults.schedule import load_schedule
    from harness.report.html import headline
    from harness.topology import load_topology
    from harness.verdict.races import run_gate

    if args.topology:
        topology = load_topology(args.topology)
    else:  # the entry's own (a fleet's NIO pair, an auth scenario's users)
        topology = topology_named(SCENARIOS[args.scenario].topology if args.scenario in SCENARIOS else "pair")
    schedule = load_schedule(args.schedule) if args.schedule else None
    workload = {
        k: v
        for k, v in (("count", args.count), ("rate", args.rate), ("timeout_s", args.publisher_timeout))
        if v is not None
    }
    if getattr(args, "fleet_status", None) and args.scenario in SCENARIOS:
        workload["params"] = {**SCENARIOS[args.scenario].params, "status_count": args.fleet_status}
    if getattr(args, "fleet_pack", None) is not None:
        os.environ[PACK_ENV] = str(args.fleet_pack)  # read where the fleet is made (fleet_factory)
    if workload and args.scenario not in SCENARIOS:
        raise CatalogError(f"unknown scenario {args.scenario!r}; known: {', '.join(SCENARIOS)}")
    entry = with_changes(args.scenario, **workload) if workload else args.scenario
    if args.fleet and args.scenario in SCENARIOS:
        shape = fleet_shape(as_fleet(SCENARIOS[entry] if isinstance(entry, str) else entry, args.fleet))
        err.print(
            f"fleet of {shape.size} a group: the controller's {shape.controller_count} events at "
            f"{shape.controller_rate:g}/s, {shape.status_count} status event(s) a member "
            "(--count, --rate, --fleet-status set them)"
        )
    out = run_catalog(
        entry,
        topology,
        seed=args.seed,
        agent_cmd=args.agent_cmd,
        reports=Path(args.reports),
        backend=args.backend,
        schedule=schedule,
        gate=run_gate(args.gate),  # a run judges an agent: its own losses fail
        fleet=args.fleet,
    )
    v = out.result.verdict
    why = v.why_unknown if v is not None and v.verdict == "unknown" else ""
    note(args, args.scenario, out.verdict, out.result.run_dir, "\n".join(out.reasons), why)
    row = {
        "scenario": args.scenario,
        **headline(out.result.summary or {}),
        "verdict": out.verdict,
        "broken": (out.result.summary or {}).get("broken", []),
        "reasons": out.reasons,
        "run_dir": str(out.result.run_dir),
    }
    if args.json:
        print(json.dumps(row, indent=2))
    else:
        from harness.report.console import print_summary

        print_summary(out.result.summary or {})
        err.print(f"report: {out.result.run_dir / 'report.html'}")
    return exit_code(out.verdict)


def cmd_validate(args: argparse.Namespace) -> int:
    from harness.topology import load_topology

    topology = load_topology(args.topology)
    config_warnings(topology)
    if args.scenarios:  # the catalog's entries, as before the coverage matrix
        return _validate_scenarios(args, topology)
    from harness.coverage import RunOptions, parse_budget, plan_rows, validate_topology

    plan_rows(topology, names(args.faults), names(args.groups))  # bad names: exit 2 before anything
    budget = parse_budget(args.budget)
    path_warnings(topology)
    opts = RunOptions(args.seed, args.agent_cmd, Path(args.reports), args.backend, args.gate, args.fleet)
    out = validate_topology(
        topology,
        opts,
        faults=names(args.faults),
        groups=names(args.groups),
        budget_s=budget,
        parallel=args.parallel,
        junitxml=Path(args.junitxml) if args.junitxml else None,
    )
    for r in out.matrix["rows"]:
        note(args, r["key"], r["verdict"], r["run_dir"], "\n".join(r.get("reasons") or []))
    if args.json:
        print(json.dumps({**out.matrix, "index": str(out.index)}, indent=2, default=str))
    else:
        _print_matrix(out.matrix)
        err.print(f"index: {out.index}\njson: {out.json}" + (f"\njunit: {out.junit}" if out.junit else ""))
    return out.exit_code


def _print_matrix(m: dict[str, Any]) -> None:
    from rich.table import Table

    t = Table(
        title=f"bfh validate {m['topology']}: {m['verdict'].upper()} ({m['runs']} runs, {m['cells']} cells)"
    )
    t.add_column("fault", no_wrap=True)
    cols = [p for p in m["paths"] if p["must"] != "none"]
    for p in cols:
        must = "" if p["must"] == "deliver" else f"\n({p['must']})"
        t.add_column(p["path"].replace(" → ", "→") + must, overflow="fold")
    t.add_column("promises", overflow="fold")
    for r in m["rows"]:
        cells = [r["cells"][p["key"]] for p in cols] + [r["cells"]["promises"]]
        colour = {True: "green", False: "red"}
        t.add_row(r["key"], *(f"[{colour.get(c['ok'], 'dim')}]{escape(c['text'])}[/]" for c in cells))
    width = max(len(r["key"]) for r in m["rows"]) + 14 * (len(cols) + 1) + 4
    Console(width=max(width, Console(emoji=False).width), emoji=False).print(t)  # a cell per path: wide
    for p in cols:  # the families each path carries (a cell lists those that failed)
        fams = [f["family"] for f in p.get("families", []) if f["must"] != "none" and f["family"]]
        if fams:
            err.print(f"[dim]{escape(p['path'])}: {escape(', '.join(fams))}[/]", soft_wrap=True, emoji=False)
    for r in m["rows"]:
        for reason in r["reasons"]:
            err.print(f"[red]{escape(r['key'])}:[/] {escape(str(reason))}", soft_wrap=True, emoji=False)
    if m["untested_cells"]:
        err.print(
            f"[yellow]not tested ({len(m['untested_cells'])} cells):[/] " + ", ".join(m["untested_cells"])
        )


def _validate_scenarios(args: argparse.Namespace, topology: Any) -> int:
    from harness.catalog.scenarios import validate

    v = validate(
        topology,
        names(args.scenarios) or [],
        seed=args.seed,
        agent_cmd=args.agent_cmd,
        reports=Path(args.reports),
        backend=args.backend,
        show_progress=not args.json,
        gate=args.gate,
        fleet=args.fleet,
    )
    for r in v.rows:
        note(args, r["name"], r["verdict"], r["run_dir"], "\n".join(r.get("reasons") or []))
    if args.json:
        print(
            json.dumps(
                {
                    "topology": v.topology,
                    "exit_code": v.exit_code,
                    "index": str(v.index),
                    "scenarios": v.rows,
                },
                indent=2,
            )
        )
    else:
        from rich.table import Table

        t = Table(title=f"bfh validate {v.topology}")
        for col in ("scenario", "verdict", "broken", "lost", "dup", "dropped", "recovery s", "report"):
            numeric = col in ("lost", "dup", "dropped", "recovery s")
            t.add_column(col, justify="right" if numeric else "left", overflow="fold")
        for r in v.rows:
            colour = "green" if r["verdict"] == "pass" else "red"
            rec = "-" if r["recovery_s"] is None else f"{r['recovery_s']:.2f}"
            t.add_row(
                r["name"],
                f"[{colour}]{r['verdict'].upper()}[/]",
                ", ".join(r.get("broken") or []) or "-",
                str(r["lost"]),
                str(r["duplicated"]),
                str(r["dropped"]),
                rec,
                r["report"],
            )
        Console(emoji=False).print(t)
        for r in v.rows:
            for reason in r["reasons"]:
                err.print(f"[red]{escape(r['name'])}:[/] {escape(str(reason))}", soft_wrap=True)
        err.print(f"index: {v.index}")
    return v.exit_code


def cmd_run_any(args: argparse.Namespace) -> int:
    """`bfh run`: --list, a catalog scenario, or a topology under --schedule; each --rounds times."""
    if args.list:
        from harness.catalog.scenarios import describe

        print("\n".join(f"{x['name']:18} {x['what']}" for x in describe()))
        return 0
    if args.scenario:
        return rounds(args, settled(cmd_run_scenario))
    if not args.schedule:
        err.print("[red]error:[/] give a scenario name or --schedule FILE (see bfh run --help)")
        return 2
    if args.fleet:
        err.print("[red]error:[/] --fleet needs a scenario name (e.g. bfh run fleet-masterslave)")
        return 2
    return rounds(args, settled(cmd_run))
