"""A second agent on a different client stack: stomp.py's own host-list failover.

`python -m agent_under_test.stomp_hostlist --config {config} --workload {workload} --log {log}`

It shares nothing with the reference agent's transports, threads or publisher: only the config
parser and the message-log writer. It exists to show the agent contract (docs/agent-contract.md)
is real: the same scenarios run it unchanged (STOMP workloads only).

Failover is stomp.py's: one `stomp.Connection12` is given the whole `mb.urls` list
(`prefer_localhost=False`, so list order is kept) and its transport walks the hosts in order with
its own capped, jittered backoff until a TCP connection succeeds. TCP acceptance is not broker
availability (a proxy, or a dying broker, accepts and then closes), so when the STOMP handshake on
host *i* fails the adapter hands stomp.py the rest of the list after *i*; after the last host it
sleeps and starts again from the head. The publisher is synchronous: one message at a time, SEND
with a receipt, retried until `mb.publisher.timeout` from its first attempt.
"""

from agent_under_test.stomp_hostlist.agent import HostListAgent

__all__ = ["HostListAgent"]
