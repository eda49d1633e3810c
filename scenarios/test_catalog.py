"""The conformance catalog (harness/catalog/scenarios.py): every entry run against real brokers, the fault
proxy, the agent (the reference agent unless --bfh-agent-cmd-only) and the Spark reconciliation, and judged
by harness.verdict. A failure lists every broken promise with its evidence.

Select with the entries' tags: `-k masterslave`, `-k network`, `-k partition`, `-k security`,
`-k protocols`; an entry's own promise is its `what` (`bfh run --list`).

The test itself is the pytest plugin's (harness/pytest_plugin/conformance/test_catalog.py), so
another repository that runs `pytest --bfh-agent-cmd ...` gets the same items, marks and verdicts.
"""

from harness.pytest_plugin.conformance.test_catalog import test_scenario

__all__ = ["test_scenario"]
