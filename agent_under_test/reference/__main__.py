"""python -m agent_under_test.reference --config {config} --workload {workload} --log {log}"""

from __future__ import annotations

import sys

from agent_under_test.reference.agent import ReferenceAgent
from agent_under_test.reference.cli import main

if __name__ == "__main__":
    sys.exit(main("agent_under_test.reference", ReferenceAgent))
