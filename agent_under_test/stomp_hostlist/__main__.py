"""python -m agent_under_test.stomp_hostlist --config {config} --workload {workload} --log {log}"""

from __future__ import annotations

import sys

from agent_under_test.reference.cli import main
from agent_under_test.stomp_hostlist.agent import HostListAgent

if __name__ == "__main__":
    sys.exit(main("agent_under_test.stomp_hostlist", HostListAgent))
