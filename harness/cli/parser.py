"""`bfh`'s argument parser: every subcommand, its options and examples."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

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
    "agent": "examples:\n  bfh agent check '/opt/my-agent/bin/agent -c {config} -w {workload} -o {log}'\n"
    "  bfh agent check '{python} -m agent_under_test.reference --config {config} --workload {workload} "
    "--log {log}' --json\n  # exit 0 no contract error, 1 contract errors, 2 could not run",
    "topology": "examples:\n  bfh topology list\n  bfh topology validate my-topology.yaml\n"
    "  bfh topology show pair",
    "compare": "examples:\n  bfh compare last-release/scorecard.json reports/scorecard.json\n"
    "  bfh compare reports-1.4/ reports-1.5/ --html compare.html --junitxml compare.xml\n"
    "  bfh compare OLD NEW --json compare.json; echo $?   # 0 no regression, 1 a regression, 2 cannot say\n"
    "  tolerances: [tool.bfh.compare.tolerance] in pyproject.toml (docs/compare.md)",
}


GATE_HELP = "all: every anomaly fails; agent: only those blamed on the agent (broker findings warn)"
RUN_GATE_HELP = (
    "all: every anomaly fails; agent: only those blamed on the agent, or unknown (broker findings and "
    "races warn, with their measured rate); default: agent (a run judges an agent)"
)


FLEET_HELP = (
    "N agents per group (a fleet: docs/fleet.md); a large fleet's default events, rate and status "
    "events are scaled down to about half of what one pair carries"
)


ROUNDS_HELP = "run N times, the seed +1 each round; failures of N and the 95%% upper bound (docs/verdict.md)"


def positive(kind: Callable[[str], float]) -> Callable[[str], Any]:
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


def at_least_zero(text: str) -> int:
    """An argparse type: a whole number of at least 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0: {text!r}")
    return value


def _unknown_args(r: argparse.ArgumentParser) -> None:
    """`bfh run`'s rule for an unknown verdict (harness/cli/common.py `settled`)."""
    r.add_argument(
        "--rerun-unknown",
        type=at_least_zero,
        default=1,
        metavar="N",
        help="run again, up to N times, when the verdict is unknown (a checker crashed, or overload "
        "explains a timing breach); still unknown: inconclusive, exit 2 (default 1)",
    )
    r.add_argument(
        "--unknown",
        choices=["fail", "skip"],
        default="fail",
        help="an inconclusive run: fail (exit 2, default) or skip (exit 0, counted in --rounds' tally)",
    )


def port(text: str) -> int:
    """An argparse type: a TCP port, 1..65535."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"port {n} is outside 1..65535")
    return n


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("broker-failover-harness")
    except PackageNotFoundError:  # a checkout used without installing it
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bfh",
        description="Broker-failover chaos test harness",
        epilog=EXAMPLES["bfh"],
        formatter_class=RAW,
    )
    p.add_argument("--version", action="version", version=f"bfh {_version()}")
    sub = p.add_subparsers(dest="cmd", required=True)

    def add(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name, help=help, description=help, epilog=EXAMPLES.get(name), formatter_class=RAW
        )

    _add_runs(add, sub)
    _add_operations(add)
    return p


Add = Callable[[str, str], argparse.ArgumentParser]


def _add_runs(add: Add, sub: Any) -> None:
    """demo, run, validate (and the commands with their own parsers, listed in their place)."""
    d = add("demo", "kill -9 the master of a pair mid-traffic and reconcile")
    d.add_argument("--reports", default="reports")
    d.add_argument("--seed", type=int, default=0)

    r = add("run", "run a catalog scenario, or a topology with a fault schedule (replays generated failures)")
    r.add_argument("scenario", nargs="?", help="catalog scenario name (see `bfh run --list`)")
    r.add_argument("--list", action="store_true", help="list the catalog scenarios")
    r.add_argument(
        "--topology",
        default=None,
        help="topology file or built-in name (default: the scenario's own, e.g. pair-fleet for a fleet "
        "on one pair; without a scenario: pair)",
    )
    r.add_argument("--schedule", default=None, help="schedule file (JSON/YAML)")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--json", action="store_true", help="print the outcome as JSON (catalog scenarios)")
    r.add_argument("--agent-cmd", default=None, help="agent command template with {config} {workload} {log}")
    r.add_argument("--backend", default="local", choices=["local", "docker", "swarm"])
    own = "default: the scenario's own; without a scenario"
    r.add_argument("--count", type=positive(int), default=None, help=f"messages to publish ({own} 300)")
    r.add_argument("--rate", type=positive(float), default=None, help=f"messages per second ({own} 10)")
    r.add_argument(
        "--publisher-timeout",
        type=positive(int),
        default=None,
        help=f"mb.publisher.timeout in s ({own} 900)",
    )
    r.add_argument("--reports", default="reports")
    r.add_argument("--gate", default=None, choices=["all", "agent"], help=RUN_GATE_HELP)
    r.add_argument("--fleet", type=positive(int), default=None, help=FLEET_HELP)
    r.add_argument(
        "--fleet-status",
        type=positive(int),
        default=None,
        help="status events each fleet member publishes (default 30, fewer past 33 members: about "
        "1,000 in all; docs/fleet.md)",
    )
    r.add_argument(
        "--fleet-pack",
        type=int,
        default=None,
        help="fleet members per process for the harness's own agent (0: one process each; "
        "default: one process each up to 100 members, past that spread over the cores, at most 50; "
        "docs/fleet.md)",
    )
    r.add_argument("--rounds", type=positive(int), default=1, help=ROUNDS_HELP)
    _unknown_args(r)
    _scorecard_args(r)

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
    v.add_argument("--parallel", type=positive(int), default=None, help="runs at once (default: by size)")
    v.add_argument("--junitxml", default=None, help="write one JUnit test case per matrix cell here")
    v.add_argument("--backend", default="local", choices=["local", "docker", "swarm"])
    v.add_argument("--agent-cmd", default=None, help="agent command template with {config} {workload} {log}")
    v.add_argument("--seed", type=int, default=1)
    v.add_argument("--reports", default="reports")
    v.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    v.add_argument("--gate", default=None, choices=["all", "agent"], help=GATE_HELP + "; default: all")
    v.add_argument("--fleet", type=positive(int), default=None, help=FLEET_HELP)
    v.add_argument("--rounds", type=positive(int), default=1, help=ROUNDS_HELP + " (each row N times)")
    _scorecard_args(v)


def _scorecard_args(p: argparse.ArgumentParser) -> None:
    """The scorecard every `bfh run` and `bfh validate` writes (docs/compare.md)."""
    p.add_argument(
        "--scorecard",
        default=None,
        help="write the scorecard (every round's promises and measures) here "
        "(default: REPORTS/scorecard.json; none: not written)",
    )
    p.add_argument("--agent-version", default="", help="the agent release's version, kept in the scorecard")


def _add_operations(add: Add) -> None:
    """up, down, status, judge, report, topology, compose, images."""

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

    ag = add("agent", "check an agent adapter against docs/agent-contract.md (about a minute); exit 0/1/2")
    ag.add_argument("action", choices=["check"])
    ag.add_argument(
        "agent_command", metavar="CMD", help="agent command template with {config} {workload} {log}"
    )
    ag.add_argument(
        "--protocol",
        default="mqtt",
        choices=["mqtt", "stomp", "openwire"],
        help="the protocol the agent speaks (its workload, mb.urls); acks are read over mqtt and stomp",
    )
    ag.add_argument("--contract-only", action="store_true", help="skip the verdict (no Spark, no behaviour)")
    ag.add_argument("--json", action="store_true", help="print the findings as JSON on stdout")
    ag.add_argument("--reports", default="reports")
    ag.add_argument("--seed", type=int, default=1)

    jp = add("judge", "judge reconciled run folders from disk (every promise; no Spark)")
    jp.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    jp.add_argument("--gates", default=None, help="comma-separated promises to gate (default: the run's)")
    jp.add_argument("--json", action="store_true", help="print the verdict table as JSON")
    jp.add_argument(
        "--gate",
        default=None,
        choices=["all", "agent"],
        help=GATE_HELP + "; default: the gate the run was judged with",
    )

    ex = add("explain", "one message's journey through the brokers, hop by hop, and its blame; exit 0/2")
    ex.add_argument("run_dir", metavar="RUN_DIR")
    ex.add_argument(
        "msg_id", metavar="MSG_ID", help="the payload's msg_id (the HTML report links each anomaly)"
    )
    ex.add_argument("--json", action="store_true", help="print the journey as JSON")

    cp = add("compare", "is NEW worse at failing over than OLD? per entry, measure and promise; exit 0/1/2")
    side = "a scorecard (bfh-scorecard/1), a run folder or a folder of run folders"
    cp.add_argument("old", metavar="OLD", help=side)
    cp.add_argument("new", metavar="NEW", help=side)
    cp.add_argument("--json", default=None, metavar="PATH", help="the comparison as JSON (-: stdout)")
    cp.add_argument("--junitxml", default=None, metavar="PATH", help="one JUnit case per entry and measure")
    cp.add_argument("--html", default=None, metavar="PATH", help="a page plotting both sides per measure")

    rp = add("report", "render RUN_DIR/report.html and summary.md from a reconciled run")
    rp.add_argument("run_dir")
    rp.add_argument("--json", action="store_true")

    t = add("topology", "validate, show or list topologies")
    t.add_argument("action", choices=["validate", "show", "list"])
    t.add_argument("file", nargs="?", default=None, help="topology file or built-in name (validate, show)")

    c = add("compose", "write a Docker Compose file (and its conf dir) for a topology")
    c.add_argument("topology", help="topology file or built-in name")
    c.add_argument("--out", default="compose", help="folder for <name>.yml and conf/<name>/")
    c.add_argument("--client-port", type=port, default=21000, help="first published client port")
    c.add_argument("--api-port", type=port, default=8474, help="published fault-proxy API port")

    im = add("images", "build the Docker images from Debian packages (cached by recipe hash)")
    im.add_argument("action", choices=["build", "list"])
    im.add_argument("names", nargs="*", help="activemq, faultproxy, member (default: all)")
    im.add_argument("--force", action="store_true", help="rebuild even if the recipe's tag exists")
