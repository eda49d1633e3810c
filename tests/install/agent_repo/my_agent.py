"""An agent team's agent, as tests/install/test_plugin.py copies it into a temp repository: the
installed package's reference agent, or with `--defect NAME` one of its defect agents.

    python my_agent.py [--defect resend_acked] --config C --workload W --log L
"""

from __future__ import annotations

import runpy
import sys


def main() -> None:
    args = sys.argv[1:]
    module = "agent_under_test.reference"
    if args[:1] == ["--defect"]:
        module, args = f"agent_under_test.defects.{args[1]}", args[2:]
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
