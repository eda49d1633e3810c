"""Verdict power: every seeded-defect agent must fail the scenario that targets its defect, with a
failure that names the violated promise. The reference agent passing the same scenarios is the
other half (test_masterslave.py, test_security.py)."""

from __future__ import annotations

import pytest

from agent_under_test.defects import command as defect_command
from harness.runner import RunError
from scenarios import test_masterslave as ms
from scenarios.support import scenario_runner

# defect -> (the scenario that must catch it, words the failure must contain)
MATRIX = {
    "qos0_clean_session": (ms.test_kill_master_no_loss, "lost"),
    "first_url_only": (ms.test_kill_master_no_loss, "kill -9 of the master"),
    "publish_gives_up_early": (ms.test_kill_master_no_loss, "dropped"),
    "resend_acked": (ms.test_kill_master_no_loss, "duplicat"),
    "publisher_timeout_x1000": (ms.test_both_down_longer_than_publisher_timeout_drops_exactly, "dropped"),
    "no_connect_timeout": (ms.test_first_available_ordering, "connect timeout|stalled"),
    "shared_connection": (
        ms.test_one_connection_cut_others_keep_flowing,
        "disturbed several roles|connection per subscription",
    ),
}


@pytest.mark.masterslave
@pytest.mark.broker
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("defect", sorted(MATRIX))
def test_defect_agent_is_caught(defect, reports_root, backend_kind, scenario_record):
    """Promise of the suite: the defect agent fails its scenario, and the failure names the promise."""
    scenario, words = MATRIX[defect]
    run = scenario_runner(reports_root, backend_kind, defect_command(defect), scenario_record)
    with pytest.raises((AssertionError, RunError)) as caught:
        scenario(run)
    message = str(caught.value)
    assert any(w in message.lower() for w in words.split("|")), (
        f"{defect} failed, but not for its defect: {message[:1500]}"
    )
