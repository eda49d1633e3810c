"""`bfh agent check` (and `pytest --bfh-agent-check`): an agent adapter against the agent contract
(docs/agent-contract.md) in about a minute, before the suite.

rules.py is the contract's rules as data; logcheck.py the record rules over a message log (pure);
tap.py and acks.py the log against the acks the broker's side saw; process.py the agent's exit;
check.py the run (the one run loop) and the outcome; report.py its two sections.
"""

from harness.agentcheck.check import CheckResult, check_agent
from harness.agentcheck.findings import BEHAVIOUR, CONTRACT, Finding, contract_line
from harness.agentcheck.rules import RULES, Rule

__all__ = ["BEHAVIOUR", "CONTRACT", "RULES", "CheckResult", "Finding", "Rule", "check_agent", "contract_line"]
