"""The reference agent (`python -m agent_under_test.reference`); see docs/agent-semantics.md."""

from agent_under_test.reference.agent import Backoff, Publisher, ReferenceAgent, Subscriber

__all__ = ["Backoff", "Publisher", "ReferenceAgent", "Subscriber"]
