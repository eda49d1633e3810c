"""Seeded-defect agents: the reference agent with exactly one defect each.

Each module runs with the reference agent's command line
(`python -m agent_under_test.defects.<name> --config {config} --workload {workload} --log {log}`)
and its docstring names the defect, where it comes from, and the scenario that must catch it.
`DEFECTS` maps each name to a one-line summary (docs/agent-semantics.md has the table).
`REGRESSIONS` are kept apart: they keep every promise, so no gate fails them; they are worse at
failing over than the reference, for `bfh compare` to flag (docs/compare.md, issue 43).
"""

DEFECTS: dict[str, str] = {
    "qos0_clean_session": "QoS 0 and clean sessions: messages published during a broker switch are lost",
    "publisher_timeout_x1000": "mb.publisher.timeout multiplied by 1000: never drops, publishes pile up",
    "first_url_only": "no failover: only the first URL of mb.urls is ever used",
    "publish_gives_up_early": "drops a publish as soon as its first attempt finds no broker",
    "auth_tight_loop": "reconnects in a tight loop, no backoff, when credentials are rejected",
    "no_connect_timeout": "no connect timeout (and the PCA's 60 s keepalive): stalls on a black-holed broker",
    "resend_acked": "resends messages the broker already acknowledged (duplicates)",
    "shared_connection": "all subscriptions share one connection: one broken topic breaks all",
    "subscribed_early": "logs `subscribed` before the broker confirmed (the PCA's flag at SUBSCRIBE)",
    "heartbeat_liveness": "notices a silent broker only on a 5 s heartbeat with a 15 s window",
    "naive_durable_reconnect": "durable MQTT CONNECTs without a probe: a thawed master steals their links",
    "never_resubscribes": "a subscription whose connection was lost never reconnects",
    "gives_up_first_pass": "the publisher gives up after its first failed pass over mb.urls",
    "subscribed_on_send": "logs `subscribed` as it sends SUBSCRIBE (with CONNECT), before any answer",
    "lockstep_retry": "retries on every 0.1 s clock tick, no backoff or jitter: a fleet storms in lock-step",
    "swallows_messages": "its receive handler drops one message in eleven unlogged; the client still acks it",
    "silent_listener_death": "the first subscription's listener dies silently after ten messages, never back",
    "claims_durable": "logs `durable: true` and connects with clean sessions: nothing kept while away",
    "combined": "QoS 0, clean sessions, timeout x1000, no connect timeout, slow liveness, early subscribed",
}

REGRESSIONS: dict[str, str] = {
    "slow_backoff": "keeps every promise, backs off 3x slower (0.3 s doubling to 3 s): slower recovery",
    "eager_retry": "keeps every promise, retries twice as often (0.05 s doubling to 0.5 s), within bounds",
}


def module_name(defect: str) -> str:
    return f"agent_under_test.defects.{defect}"


def command(defect: str) -> str:
    """The agent command template for a defect agent or a seeded regression."""
    if defect not in DEFECTS and defect not in REGRESSIONS:
        raise KeyError(f"unknown defect {defect!r}; known: {', '.join([*DEFECTS, *REGRESSIONS])}")
    return f"{{python}} -m {module_name(defect)} --config {{config}} --workload {{workload}} --log {{log}}"
