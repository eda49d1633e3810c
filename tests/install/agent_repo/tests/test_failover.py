"""The team's own failover test, on the harness plugin's fixtures (tests/install/test_plugin.py
runs it in a temp repository that only pip-installed the package)."""

from __future__ import annotations


def test_my_agent_follows_the_slave(bfh_env, bfh_faults):
    assert len(bfh_env.urls.split(",")) == 2, bfh_env.urls  # both members, through the fault proxy
    bfh_env.start_agent(count=80, rate=10)  # the --bfh-agent-cmd agent
    assert bfh_env.wait_sent(20), "the agent sent nothing"
    takeover_s = bfh_faults.kill(f"master:{bfh_env.group}")
    assert takeover_s is not None, "no member took over"
    verdict = bfh_env.judge()  # heal, settle, stop, reconcile (Spark), judge
    assert verdict.ok, verdict.message("kill -9 the master under my agent")
