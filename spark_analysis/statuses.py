"""The names of the reconciliation's classes (a leaf: every stage and the Markdown summary read them).

docs/reconciliation.md defines each one.
"""

from __future__ import annotations

#: a (message, subscription) pair's status
STATUSES = ("ok", "duplicated", "lost", "missed", "dropped_expected", "ghost", "in_doubt_missing")
#: receipts on a subscription that did not expect the message
EXTRA_STATUSES = ("extra", "misrouted")
#: statuses shown as anomalies (everything but ok)
ANOMALY_STATUSES = tuple(s for s in STATUSES + EXTRA_STATUSES if s != "ok")
#: why a ghost (a receipt of a message the publisher did not see acknowledged) was one
GHOST_KINDS = ("timeout", "dropped_other", "in_doubt")
#: a message's state (publisher's view)
STATES = ("acknowledged", "dropped", "in_doubt", "unexpected")
#: the delivery guarantee a pair is judged by
GUARANTEES = ("at-least-once", "best-effort")
#: every pair status (a pair of a message no publisher attempted is `unexpected`), in the order of
#: their codes in the job's internal pairs table
PAIR_STATUSES = (*STATUSES, *EXTRA_STATUSES, "unexpected")
