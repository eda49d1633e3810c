"""Agents under test: the launch contract (agent.conf, workload.json) and the fleet workload."""
