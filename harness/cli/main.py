"""`bfh`: a thin command layer over the harness stages.

Over 500 lines: the parser and a short handler for each of the ~15 subcommands; every handler
only calls its stage's entry point, so splitting them would spread one argument layer over files.
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

err = Console(stderr=True)
RAW = argparse.RawDescriptionHelpFormatter
EXAMPLES = {
    "bfh": "examples:\n  bfh validate pair\n  bfh up network-of-pairs && bfh status && bfh down\n"
    "  bfh run masterslave --topology pair\n  bfh report reports/RUN_DIR",
    "demo": "examples:\n  bfh demo\n  bfh demo --seed 7 --reports /tmp/reports",
    "run": "examples:\n  bfh run --list\n  bfh run masterslave --topology pair --seed 3\n"
    "  bfh run network --topology network-of-pairs --json\n"
    "  bfh run --topology pair --schedule reports/schedules/SCHEDULE.json   # replay",
    "validate": "examples:\n  bfh validate pair\n"
    "  bfh validate examples/ops/hub-spoke.yaml --budget 10m --junitxml validate.xml\n"
    "  bfh validate my-topology.yaml --faults kill,pause --groups hub\n"
    "  bfh validate my-topology.yaml --scenarios masterslave,network   # catalog entries instead\n"
    "  bfh validate network-of-pairs --json > results.json; echo $?   # 0 pass, 1 fail, 2 could not run",
    "up": "examples:\n  bfh up pair\n  bfh up network-of-pairs --json",
    "down": "examples:\n  bfh down",
    "status": "examples:\n  bfh status\n  bfh status --json | jq .masters   # exit 3 when nothing is up",
    "report": "examples:\n  bfh report reports/20261121-174701-kill-master-f2c8\n  bfh report RUN_DIR --json",
    "reconcile": "\nexamples:\n  bfh reconcile reports/RUN_DIR\n"
    "  bfh reconcile reports/RUN_DIR --policy policy.yaml\n"
    "  bfh reconcile reports/RUN_DIR --all-pairs     # every pair in messages.parquet, not only anomalies\n"
    "  bfh report reports/RUN_DIR   # re-render report.html",
    "judge": "examples:\n  bfh judge reports/RUN_DIR\n  bfh judge reports/*/ --json\n"
    "  bfh judge RUN_DIR --gates at_least_once,liveness   # exit 0 pass, 1 fail, 2 cannot judge",
    "compose": "examples:\n  bfh compose pair && docker compose -f compose/pair.yml up\n"
    "  bfh compose my-topology.yaml --out /tmp/stack && docker-compose -f /tmp/stack/my-topology.yml up -d",
    "topology": "examples:\n  bfh topology list\n  bfh topology validate my-topology.yaml\n"
    "  bfh topology show pair",
}


GATE_HELP = "all (default): every anomaly fails; agent: only those blamed on the agent (broker findings warn)"
FLEET_HELP = "N agents per group (a fleet: docs/fleet.md)"
ROUNDS_HELP = "run N times, the seed +1 each round; failures of N and the 95%% upper bound (docs/verdict.md)"


def _positive(kind: Callable[[str], float]) -> Callable[[str], Any]:
    """An argparse type: a number of `kind` above zero (argparse prints the usage error)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"must be above zero: {text!r}")
        return value

    return parse


def _sigterm(signum: int, frame: Any) -> None:
    # Unwind like Ctrl-C so every `with` block stops what it started.
    raise KeyboardInterrupt


def _demo(args: argparse.Namespace) -> int:
    from harness.cli.demo import run_demo

    return run_demo(Path(args.reports), seed=args.seed)


def _run(args: argparse.Namespace) -> int:
    from harness.agents.launch import agent_factory
    from harness.faults.schedule import load_schedule
    from harness.report.console import print_summary
    from harness.run.runner import execute
    from harness.topology import load_topology

    topology = load_topology(args.topology)
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
    result = execute(
        topology, agents, schedule, label="run", reports=Path(args.reports), backend=args.backend
    )
    assert result.summary is not None and result.verdict is not None
    _note(args, "run", result.verdict.verdict, result.run_dir, result.verdict.message("run"))
    print_summary(result.summary)
    err.print(f"run folder: {result.run_dir}")
    return _exit_code(result.verdict.verdict)


def _note(args: argparse.Namespace, name: str, verdict: str, run_dir: Any, message: str) -> None:
    """One judged run of this command, for --rounds (harness/run/rounds.py)."""
    if isinstance(getattr(args, "outcomes", None), list):
        args.outcomes.append((name, verdict, Path(run_dir) if run_dir else None, message))


def _rounds(args: argparse.Namespace, once: Callable[[argparse.Namespace], int]) -> int:
    """--rounds N: the command N times (seed +1 each round), tallied per scenario or fault row;
    exit 1 when a round failed, 2 when one could not run."""
    import contextlib

    from harness.run.rounds import Round, Tally, write_json

    n = getattr(args, "rounds", 1)
    if n == 1:
        return once(args)
    base, worst = args.seed, 0
    tallies: dict[str, Tally] = {}
    for i in range(n):
        args.seed, args.outcomes = base + i, []
        err.rule(f"[bold]round {i + 1}/{n}[/] (seed {args.seed})")
        with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
            worst = max(worst, 2 if once(args) == 2 else 0)
        for name, verdict, run_dir, message in args.outcomes:
            replay = " ".join(["bfh", *_without_rounds(sys.argv[1:]), "--seed", str(args.seed)])
            tallies.setdefault(name, Tally(name)).rounds.append(Round(i, verdict, run_dir, replay, message))
    out = write_json(list(tallies.values()), Path(args.reports))
    if args.json:
        print(json.dumps([t.to_dict() for t in tallies.values()], indent=2))
    for t in tallies.values():
        err.print(escape(t.message() if t.failures else t.line()), soft_wrap=True, highlight=False)
    err.print(f"rounds: {out}")
    return worst or (1 if any(t.failures for t in tallies.values()) else 0)


def _without_rounds(argv: list[str]) -> list[str]:
    """The command line without --rounds/--seed (the replay gives the round's own seed)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--rounds", "--seed"):
            skip = True
        elif not a.startswith(("--rounds=", "--seed=")):
            out.append(shlex.quote(a))
    return out


def _exit_code(verdict: str) -> int:
    """0 pass or n/a, 1 fail, 2 unknown (a checker crashed: the run was not judged)."""
    return {"fail": 1, "unknown": 2}.get(verdict, 0)


def _run_scenario(args: argparse.Namespace) -> int:
    """`bfh run NAME`: a catalog scenario (with --schedule: its agents under that schedule)."""
    from harness.catalog.scenarios import SCENARIOS, CatalogError, with_changes
    from harness.catalog.scenarios import run as run_catalog
    from harness.faults.schedule import load_schedule
    from harness.report.html import headline
    from harness.topology import load_topology

    topology = load_topology(args.topology)
    schedule = load_schedule(args.schedule) if args.schedule else None
    workload = {
        k: v
        for k, v in (("count", args.count), ("rate", args.rate), ("timeout_s", args.publisher_timeout))
        if v is not None
    }
    if workload and args.scenario not in SCENARIOS:
        raise CatalogError(f"unknown scenario {args.scenario!r}; known: {', '.join(SCENARIOS)}")
    out = run_catalog(
        with_changes(args.scenario, **workload) if workload else args.scenario,
        topology,
        seed=args.seed,
        agent_cmd=args.agent_cmd,
        reports=Path(args.reports),
        backend=args.backend,
        schedule=schedule,
        gate=args.gate,
        fleet=args.fleet,
    )
    _note(args, args.scenario, out.verdict, out.result.run_dir, "\n".join(out.reasons))
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
    return _exit_code(out.verdict)


def _validate(args: argparse.Namespace) -> int:
    from harness.topology import load_topology

    topology = load_topology(args.topology)
    _config_warnings(topology)
    if args.scenarios:  # the catalog's entries, as before the coverage matrix
        return _validate_scenarios(args, topology)
    from harness.coverage import RunOptions, parse_budget, plan_rows, validate_topology

    plan_rows(topology, _names(args.faults), _names(args.groups))  # bad names: exit 2 before anything
    budget = parse_budget(args.budget)
    _path_warnings(topology)
    opts = RunOptions(args.seed, args.agent_cmd, Path(args.reports), args.backend, args.gate, args.fleet)
    out = validate_topology(
        topology,
        opts,
        faults=_names(args.faults),
        groups=_names(args.groups),
        budget_s=budget,
        parallel=args.parallel,
        junitxml=Path(args.junitxml) if args.junitxml else None,
    )
    for r in out.matrix["rows"]:
        _note(args, r["key"], r["verdict"], r["run_dir"], "\n".join(r.get("reasons") or []))
    if args.json:
        print(json.dumps({**out.matrix, "index": str(out.index)}, indent=2, default=str))
    else:
        _print_matrix(out.matrix)
        err.print(f"index: {out.index}\njson: {out.json}" + (f"\njunit: {out.junit}" if out.junit else ""))
    return out.exit_code


def _names(text: str | None) -> list[str] | None:
    return [n.strip() for n in text.split(",") if n.strip()] if text else None


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
    Console(width=max(width, Console().width), emoji=False).print(t)  # a cell per path: wide
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
        _names(args.scenarios) or [],
        seed=args.seed,
        agent_cmd=args.agent_cmd,
        reports=Path(args.reports),
        backend=args.backend,
        show_progress=not args.json,
        gate=args.gate,
        fleet=args.fleet,
    )
    for r in v.rows:
        _note(args, r["name"], r["verdict"], r["run_dir"], "\n".join(r.get("reasons") or []))
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
        Console().print(t)
        for r in v.rows:
            for reason in r["reasons"]:
                err.print(f"[red]{escape(r['name'])}:[/] {escape(str(reason))}", soft_wrap=True)
        err.print(f"index: {v.index}")
    return v.exit_code


def _up(args: argparse.Namespace) -> int:
    from harness.cli.supervisor import up
    from harness.topology import load_topology

    load_topology(args.topology)  # a bad file fails here, before anything starts
    st = up(args.topology, Path(args.reports), backend=args.backend)
    return _print_state(st, args.json)


def _print_state(st: dict[str, Any] | None, as_json: bool) -> int:
    if as_json:
        print(json.dumps(st or {"status": "down"}, indent=2))
        return 0
    if not st:
        print("nothing is up")
        return 0
    status = st.get("status") if st.get("alive") else f"{st.get('status')} (supervisor gone)"
    print(f"{st.get('topology')}: {status} (pid {st.get('pid')}, run folder {st.get('run_dir')})")
    for g, conns in (st.get("client_urls") or {}).items():
        print(f"  group {g}: master {(st.get('masters') or {}).get(g)}")
        for c, urls in conns.items():
            print(f"    {c}: {','.join(urls)}")
    if st.get("brokers"):
        print("  brokers: " + ", ".join(f"{b}={s}" for b, s in st["brokers"].items()))
    if st.get("proxies"):
        print(f"  fault proxy {st.get('fault_proxy')}: " + ", ".join(st["proxies"]))
    return 0


def _down(args: argparse.Namespace) -> int:
    from harness.cli.supervisor import down

    st = down(Path(args.reports))
    if args.json:
        print(json.dumps({"stopped": bool(st), "run_dir": (st or {}).get("run_dir")}))
    else:
        print(f"stopped {st.get('topology')} (run folder {st.get('run_dir')})" if st else "nothing was up")
    return 0


def _status(args: argparse.Namespace) -> int:
    from harness.cli.supervisor import read_state

    st = read_state(Path(args.reports))
    _print_state(st, args.json)
    return 0 if st and st.get("alive") and st.get("status") == "up" else 3


def _report(args: argparse.Namespace) -> int:
    from harness.report.html import ReportError, render_report, run_headline
    from harness.verdict import VerdictError, judge

    try:  # the evidence first (harness/contracts/manifest.py), then re-judged from disk, so the report
        _check_evidence(Path(args.run_dir))  # shows today's checkers' verdict
        judge(Path(args.run_dir))
    except VerdictError as e:
        raise ReportError(str(e)) from None
    except Exception as e:  # noqa: BLE001 - a crash on this run's data: one line, exit 2
        raise ReportError(f"{args.run_dir}: the judge crashed ({_crash(e)})") from None
    html = render_report(Path(args.run_dir))
    if args.json:
        row = run_headline(Path(args.run_dir))
        print(json.dumps({**row, "report": str(html), "summary_md": str(html.with_name("summary.md"))}))
    else:
        err.print(f"report: {html}\nsummary: {html.with_name('summary.md')}")
    return 0


def _reconcile(args: argparse.Namespace, rest: list[str]) -> int:
    """The Spark reconciliation, then the verdict of each run (harness.verdict), as `bfh judge`."""
    from spark_analysis.reconcile import main as reconcile_main
    from spark_analysis.reconcile import run_dirs

    if "-h" in rest or "--help" in rest:
        try:
            return reconcile_main(rest)
        finally:  # its own parser prints the options; the examples follow
            print(EXAMPLES["reconcile"])
    from harness.contracts import manifest
    from harness.verdict import VerdictError, refuse_unjudgeable

    try:
        for d in run_dirs(rest):
            refuse_unjudgeable(d)
            manifest.verify(d, analysis=False)  # the logs it reads are the run's sealed ones
    except (VerdictError, manifest.EvidenceError) as e:
        _error(str(e))
        return 2
    code = reconcile_main([*rest, "--quiet"])
    if code != 0:
        return code
    for d in run_dirs(rest):  # the new analysis/ is what the manifest seals from now on
        manifest.reseal_analysis(d)
    return _judge_dirs(run_dirs(rest), None, as_json=False)


def _error(text: str) -> None:
    """One line on stderr: `error: ...` (a path with a newline in it stays on the line)."""
    line = " ".join(str(text).split())
    err.print(f"[red]error:[/] {escape(line)}", soft_wrap=True, highlight=False)


def _crash(e: BaseException) -> str:
    return " ".join(f"{type(e).__name__}: {e}".split())[:300]


def _check_evidence(run_dir: Path) -> None:
    """The run folder against its manifest (harness/contracts/manifest.py): missing, foreign or altered
    evidence is a VerdictError; a folder from before manifests gets one warning line."""
    from harness.contracts import manifest
    from harness.verdict import VerdictError

    try:
        warning = manifest.verify(run_dir)
    except manifest.EvidenceError as e:
        raise VerdictError(str(e)) from None
    if warning:
        err.print(f"[yellow]warning:[/] {escape(' '.join(warning.split()))}", soft_wrap=True, highlight=False)


def _judge(args: argparse.Namespace) -> int:
    gates = [g.strip() for g in args.gates.split(",") if g.strip()] if args.gates else None
    return _judge_dirs([Path(d) for d in args.run_dirs], gates, args.json, args.gate)


def _judge_dirs(dirs: list[Path], gates: list[str] | None, as_json: bool, gate: str | None = None) -> int:
    """Judge reconciled run folders from disk, every one of them: 0 all pass (or n/a), 1 a fail,
    2 a folder that cannot be judged (its evidence missing, foreign or altered, a checker or the
    report crashed): the worst code of all."""
    from harness.report.html import ReportError, render_report
    from harness.verdict import VerdictError, judge

    code, rows = 0, list[dict[str, Any]]()
    for d in dirs:
        try:
            _check_evidence(d)
            v = judge(d, gates, gate=gate)
        except VerdictError as e:
            _error(str(e))
            code = 2
            rows.append({"run_dir": str(d), "verdict": "error", "error": " ".join(str(e).split())})
            continue
        except Exception as e:  # noqa: BLE001 - a crash on this run's data: one line, exit 2
            _error(f"{d}: the judge crashed ({_crash(e)})")
            code = 2
            rows.append({"run_dir": str(d), "verdict": "error", "error": _crash(e)})
            continue
        report_error = None
        try:
            render_report(d)
        except (ReportError, OSError) as e:
            report_error = " ".join(str(e).split())
            err.print(
                f"[yellow]report not rendered: {escape(report_error)}[/]", soft_wrap=True, highlight=False
            )
        code = max(code, _exit_code(v.verdict), 2 if report_error else 0)
        row = {"run_dir": str(v.run_dir), "verdict": v.verdict, "broken": v.broken, "checks": v.table()}
        rows.append({**row, "report_error": report_error} if report_error else row)
        if not as_json:
            colour = {"pass": "green", "fail": "red"}.get(v.verdict, "yellow")
            err.print(f"[{colour}]{v.verdict.upper()}[/] {escape(str(v.run_dir))}")
            if v.verdict != "pass":
                err.print(escape(v.message()), soft_wrap=True, highlight=False)
    if as_json:
        print(json.dumps(rows, indent=2, default=str))
    return code


def _port(text: str) -> int:
    """An argparse type: a TCP port, 1..65535."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"port {n} is outside 1..65535")
    return n


def _fault_proxy(rest: list[str]) -> int:
    from harness.faultproxy.server import main as server_main

    return server_main(rest)


def _topology(args: argparse.Namespace) -> int:
    from harness.topology import builtin_names, load_topology

    if args.action == "list":
        print("\n".join(builtin_names()))
        return 0
    topo = load_topology(args.file)
    if args.action == "show":
        print(json.dumps(topo.redacted(), indent=2))
    else:
        from harness.deploy.brokerconf import check_rendered

        check_rendered(topo)  # what a run renders, parsed: validate fails when a run would
        _config_warnings(topo)
        _path_warnings(topo)
        err.print(f"[green]ok[/] {args.file}: {len(topo.groups)} group(s), {len(topo.bridges)} bridge(s)")
    return 0


def _path_warnings(topology: Any) -> None:
    """The delivery paths ActiveMQ cannot route as the topology requires (predicted, no broker)."""
    from harness.topology.paths import path_warnings, predict

    preds = predict(topology)
    for w in path_warnings(preds):
        err.print(f"[yellow]warning: {escape(w)}[/]", soft_wrap=True, highlight=False)
    need = [p for p in preds if p.must == "deliver"]
    routed = sum(p.routable for p in need)
    err.print(f"paths: {routed} of {len(need)} that must deliver are routable (predicted)", highlight=False)


def _config_warnings(topology: Any) -> None:
    """Warnings of the deployment files a topology imports (`config:`; errors stop the load)."""
    from harness.topology.confcheck import check, warnings

    for w in warnings(check(topology)):
        err.print(f"[yellow]{escape(w.render())}[/]", soft_wrap=True, highlight=False)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bfh",
        description="Broker-failover chaos test harness",
        epilog=EXAMPLES["bfh"],
        formatter_class=RAW,
    )
    sub = p.add_subparsers(dest="cmd", required=True)

    def add(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name, help=help, description=help, epilog=EXAMPLES.get(name), formatter_class=RAW
        )

    d = add("demo", "kill -9 the master of a pair mid-traffic and reconcile")
    d.add_argument("--reports", default="reports")
    d.add_argument("--seed", type=int, default=0)

    r = add("run", "run a catalog scenario, or a topology with a fault schedule (replays generated failures)")
    r.add_argument("scenario", nargs="?", help="catalog scenario name (see `bfh run --list`)")
    r.add_argument("--list", action="store_true", help="list the catalog scenarios")
    r.add_argument("--topology", default="pair", help="topology file or built-in name")
    r.add_argument("--schedule", default=None, help="schedule file (JSON/YAML)")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--json", action="store_true", help="print the outcome as JSON (catalog scenarios)")
    r.add_argument("--agent-cmd", default=None, help="agent command template with {config} {workload} {log}")
    r.add_argument("--backend", default="local", choices=["local", "docker"])
    own = "default: the scenario's own; without a scenario"
    r.add_argument("--count", type=_positive(int), default=None, help=f"messages to publish ({own} 300)")
    r.add_argument("--rate", type=_positive(float), default=None, help=f"messages per second ({own} 10)")
    r.add_argument(
        "--publisher-timeout",
        type=_positive(int),
        default=None,
        help=f"mb.publisher.timeout in s ({own} 900)",
    )
    r.add_argument("--reports", default="reports")
    r.add_argument("--gate", default=None, choices=["all", "agent"], help=GATE_HELP)
    r.add_argument("--fleet", type=_positive(int), default=None, help=FLEET_HELP)
    r.add_argument("--rounds", type=_positive(int), default=1, help=ROUNDS_HELP)

    sub.add_parser("reconcile", help="run the PySpark reconciliation on RUN_DIR (see --help)", add_help=False)
    sub.add_parser("fault-proxy", help="run the Toxiproxy-compatible fault proxy server", add_help=False)
    sub.add_parser("doctor", help="what this machine lacks (Java, ActiveMQ, ...); exit 0/2", add_help=False)

    v = add("validate", "bring a topology up and run failover scenarios against it; exit 0/1/2")
    v.add_argument("topology", help="topology file or built-in name")
    v.add_argument(
        "--scenarios",
        default=None,
        help="comma-separated catalog names instead of the coverage matrix (default: every fault row)",
    )
    v.add_argument(
        "--faults",
        default=None,
        help="comma-separated fault rows only (baseline, kill, stop, pause, ...; docs/coverage.md)",
    )
    v.add_argument("--groups", default=None, help="comma-separated groups: only their rows and bridges")
    v.add_argument("--budget", default=None, help="stop starting runs at this wall time (600, 90s, 10m, 1h)")
    v.add_argument("--parallel", type=_positive(int), default=None, help="runs at once (default: by size)")
    v.add_argument("--junitxml", default=None, help="write one JUnit test case per matrix cell here")
    v.add_argument("--backend", default="local", choices=["local", "docker"])
    v.add_argument("--agent-cmd", default=None, help="agent command template with {config} {workload} {log}")
    v.add_argument("--seed", type=int, default=1)
    v.add_argument("--reports", default="reports")
    v.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    v.add_argument("--gate", default=None, choices=["all", "agent"], help=GATE_HELP)
    v.add_argument("--fleet", type=_positive(int), default=None, help=FLEET_HELP)
    v.add_argument("--rounds", type=_positive(int), default=1, help=ROUNDS_HELP + " (each row N times)")

    u = add("up", "bring a topology up for manual poking (detached; `bfh down` stops it)")
    u.add_argument("topology", help="topology file or built-in name")
    u.add_argument("--backend", default="local", choices=["local", "docker"])
    for name, what in (
        ("down", "stop the topology `bfh up` started"),
        ("status", "show the topology `bfh up` started"),
    ):
        x = add(name, what)
        x.add_argument("--json", action="store_true")
        x.add_argument("--reports", default="reports")
    u.add_argument("--reports", default="reports")
    u.add_argument("--json", action="store_true")

    jp = add("judge", "judge reconciled run folders from disk (every promise; no Spark)")
    jp.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    jp.add_argument("--gates", default=None, help="comma-separated promises to gate (default: the run's)")
    jp.add_argument("--json", action="store_true", help="print the verdict table as JSON")
    jp.add_argument("--gate", default=None, choices=["all", "agent"], help=GATE_HELP + "; default: the run's")

    rp = add("report", "render RUN_DIR/report.html and summary.md from a reconciled run")
    rp.add_argument("run_dir")
    rp.add_argument("--json", action="store_true")

    t = add("topology", "validate, show or list topologies")
    t.add_argument("action", choices=["validate", "show", "list"])
    t.add_argument("file", nargs="?", default="pair")

    c = add("compose", "write a Docker Compose file (and its conf dir) for a topology")
    c.add_argument("topology", help="topology file or built-in name")
    c.add_argument("--out", default="compose", help="folder for <name>.yml and conf/<name>/")
    c.add_argument("--client-port", type=_port, default=21000, help="first published client port")
    c.add_argument("--api-port", type=_port, default=8474, help="published fault-proxy API port")

    im = add("images", "build the Docker images from Debian packages (cached by recipe hash)")
    im.add_argument("action", choices=["build", "list"])
    im.add_argument("names", nargs="*", help="activemq, faultproxy (default: both)")
    im.add_argument("--force", action="store_true", help="rebuild even if the recipe's tag exists")
    return p


def _images(args: argparse.Namespace) -> int:
    from harness.deploy import images

    try:
        if args.action == "list":
            for name, recipe in images.recipes().items():
                print(f"{name:12} {recipe.tag}")
            return 0
        for name, (tag, built, secs) in images.build_all(args.names or None, force=args.force).items():
            err.print(f"[green]{'built' if built else 'cached'}[/] {name}: {tag} ({secs:.1f}s)")
    except images.ImageError as e:
        err.print(f"[red]error:[/] {escape(str(e))}", soft_wrap=True, highlight=False)
        return 2
    return 0


def _compose(args: argparse.Namespace) -> int:
    from harness.backends.compose import ComposeError, n_client_ports, write
    from harness.topology import load_topology

    topo = load_topology(args.topology)
    ports = range(args.client_port, args.client_port + n_client_ports(topo))
    try:
        written = write(topo, Path(args.out), ports, args.api_port)
    except ComposeError as e:
        err.print(f"[red]error:[/] {escape(str(e))}", soft_wrap=True, highlight=False)
        return 2
    for path in written:
        print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, _sigterm)
    # These two hand their arguments on untouched to their own parsers.
    if argv and argv[0] == "fault-proxy":
        return _fault_proxy(argv[1:])
    if argv and argv[0] == "doctor":  # first: it must work when the rest cannot be imported
        from harness.cli.doctor import main as doctor

        return doctor(argv[1:])
    if argv and argv[0] == "reconcile":
        return _reconcile(argparse.Namespace(), argv[1:])
    args = build_parser().parse_args(argv)
    from harness.agents.launch import AgentError
    from harness.backends import BackendError
    from harness.catalog.scenarios import CatalogError, one_line
    from harness.cli.supervisor import UpError
    from harness.coverage import CoverageError
    from harness.faults.schedule import ScheduleError
    from harness.report.html import ReportError
    from harness.run.runner import RunError
    from harness.topology import TopologyError

    try:
        if args.cmd == "demo":
            return _demo(args)
        if args.cmd == "run":
            if args.list:
                from harness.catalog.scenarios import describe

                print("\n".join(f"{x['name']:18} {x['what']}" for x in describe()))
                return 0
            if args.scenario:
                return _rounds(args, _run_scenario)
            if not args.schedule:
                err.print("[red]error:[/] give a scenario name or --schedule FILE (see bfh run --help)")
                return 2
            if args.fleet:
                err.print("[red]error:[/] --fleet needs a scenario name (e.g. bfh run fleet-masterslave)")
                return 2
            return _rounds(args, _run)
        if args.cmd == "images":
            return _images(args)
        if args.cmd == "compose":
            return _compose(args)
        handlers = {
            "validate": lambda a: _rounds(a, _validate),
            "up": _up,
            "down": _down,
            "status": _status,
            "report": _report,
            "judge": _judge,
        }
        if args.cmd in handlers:
            return handlers[args.cmd](args)
        return _topology(args)
    except (CatalogError, CoverageError, ReportError, UpError) as e:
        err.print(f"[red]error:[/] {escape(one_line(e))}", soft_wrap=True, highlight=False)
        return 2
    except (TopologyError, ScheduleError, BackendError, RunError, AgentError) as e:
        if args.cmd == "validate":  # ops scripts want one line
            err.print(f"[red]error:[/] {escape(one_line(e))}", soft_wrap=True, highlight=False)
            return 2
        err.print(f"[red]error:[/] {escape(str(e))}", soft_wrap=True, highlight=False)
        return 2
    except KeyboardInterrupt:
        err.print("[yellow]interrupted: everything started was stopped[/]")
        return 130


if __name__ == "__main__":
    sys.exit(main())
