"""`bfh up/down/status`, `bfh topology`, `bfh compose`, `bfh images` and `bfh fault-proxy`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.markup import escape

from harness.cli.common import err, error


def cmd_up(args: argparse.Namespace) -> int:
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


def cmd_down(args: argparse.Namespace) -> int:
    from harness.cli.supervisor import down

    st = down(Path(args.reports))
    if args.json:
        print(json.dumps({"stopped": bool(st), "run_dir": (st or {}).get("run_dir")}))
    else:
        print(f"stopped {st.get('topology')} (run folder {st.get('run_dir')})" if st else "nothing was up")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from harness.cli.supervisor import read_state

    st = read_state(Path(args.reports))
    _print_state(st, args.json)
    return 0 if st and st.get("alive") and st.get("status") == "up" else 3


def cmd_fault_proxy(rest: list[str]) -> int:
    from harness.faultproxy.server import main as server_main

    return server_main(rest)


def cmd_topology(args: argparse.Namespace) -> int:
    from harness.topology import builtin_names, load_topology

    if args.action == "list":
        print("\n".join(builtin_names()))
        return 0
    if args.file is None:
        error(f"bfh topology {args.action} needs a topology file or built-in name (`bfh topology list`)")
        return 2
    topo = load_topology(args.file)
    if args.action == "show":
        print(json.dumps(topo.redacted(), indent=2))
    else:
        from harness.deploy.brokerconf import check_rendered

        check_rendered(topo)  # what a run renders, parsed: validate fails when a run would
        config_warnings(topo)
        path_warnings(topo)
        err.print(f"[green]ok[/] {args.file}: {len(topo.groups)} group(s), {len(topo.bridges)} bridge(s)")
    return 0


def path_warnings(topology: Any) -> None:
    """The delivery paths ActiveMQ cannot route as the topology requires, and the traffic families
    its bridges' filters block (predicted, no broker): warnings grouped by cause, then a line per
    family and one for the group pairs."""
    from harness.topology.paths import grouped_warnings, predict, predict_traffic

    preds, flows = predict(topology), predict_traffic(topology)
    for w in grouped_warnings(preds) + grouped_warnings(
        [p for p in flows if p.must != "deliver" or not p.routable]
    ):
        err.print(f"[yellow]warning: {escape(w)}[/]", soft_wrap=True, highlight=False)
    for fam in dict.fromkeys(p.family for p in flows):
        mine = [p for p in flows if p.family == fam and p.must == "deliver" and p.source != p.target]
        bad = [p for p in mine if not p.routable]
        eg = ", ".join(f"{p.source} → {p.target}" for p in bad[:3]) + (", ..." if len(bad) > 3 else "")
        line = f"traffic {fam} ({flows[[p.family for p in flows].index(fam)].topic}): "
        if mine:
            line += f"{len(mine) - len(bad)} of {len(mine)} flows between groups routable (predicted)"
        else:  # one group, or the family need not cross: nothing for a bridge to route
            line += "no flow between groups must deliver"
        err.print(line + (f"; blocked: {eg}" if bad else ""), highlight=False, soft_wrap=True)
    need = [p for p in preds if p.must == "deliver"]
    routed = sum(p.routable for p in need)
    paths = "none must deliver"
    if need:
        paths = f"{routed} of {len(need)} that must deliver are routable (predicted)"
    err.print(f"paths: {paths}", highlight=False)


def config_warnings(topology: Any) -> None:
    """Warnings of the deployment files a topology imports (`config:`; errors stop the load)."""
    from harness.topology.confcheck import check, warnings

    for w in warnings(check(topology)):
        err.print(f"[yellow]{escape(w.render())}[/]", soft_wrap=True, highlight=False)


def cmd_images(args: argparse.Namespace) -> int:
    from harness.deploy import images

    try:
        if args.action == "list":
            for name, recipe in images.recipes().items():  # the member: its base plus the project's layer
                print(f"{name:12} {images.member_tag() if name == 'member' else recipe.tag}")
            return 0
        for name, (tag, built, secs) in images.build_all(args.names or None, force=args.force).items():
            err.print(f"[green]{'built' if built else 'cached'}[/] {name}: {tag} ({secs:.1f}s)")
    except images.ImageError as e:
        err.print(f"[red]error:[/] {escape(str(e))}", soft_wrap=True, highlight=False)
        return 2
    return 0


def cmd_compose(args: argparse.Namespace) -> int:
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
