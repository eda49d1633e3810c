"""The nemesis: runs a schedule's steps at their times against an environment's faults.

Each step runs on its own thread (a kill waits for the takeover without delaying later steps) and
applies its fault through the environment's `Faults` (harness/faults/apply.py: roles resolved when
the step runs); a step with a duration stops it (heals) when it ends; `heal_everything` ends the
schedule.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from harness.faults.apply import Faults
from harness.faults.schedule import Schedule, Step


@dataclass
class StepOutcome:
    step: Step
    targets: list[str] = field(default_factory=list)
    started: float | None = None
    error: str | None = None


class Nemesis:
    def __init__(self, faults: Faults, schedule: Schedule) -> None:
        self.faults = faults
        self.schedule = schedule
        self.outcomes: list[StepOutcome] = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.last_step_end: float | None = None  # monotonic time the last step finished (healed)

    # -- running -------------------------------------------------------------------------------
    def start(self, t0: float | None = None) -> None:
        t0 = t0 if t0 is not None else time.monotonic()
        for step in self.schedule.sorted_steps():
            outcome = StepOutcome(step)
            self.outcomes.append(outcome)
            th = threading.Thread(
                target=self._run_step,
                args=(step, outcome, t0),
                daemon=True,
                name=f"nemesis-{step.fault}-{step.at}",
            )
            self._threads.append(th)
            th.start()

    def _sleep_until(self, when: float) -> bool:
        while not self._stop.is_set():
            left = when - time.monotonic()
            if left <= 0:
                return True
            self._stop.wait(min(left, 0.2))
        return False

    def _run_step(self, step: Step, outcome: StepOutcome, t0: float) -> None:
        if not self._sleep_until(t0 + step.at):
            return
        try:
            outcome.started = time.monotonic() - t0
            outcome.targets = self.faults.resolve(step.target)  # roles resolved as the step runs
            self._apply(step, outcome.targets, t0)
        except Exception as e:  # a step that cannot run is reported, not fatal to the run
            outcome.error = f"{type(e).__name__}: {e}"
        finally:
            with self._lock:
                self.last_step_end = max(self.last_step_end or 0.0, time.monotonic())

    def _apply(self, step: Step, targets: list[str], t0: float) -> None:
        handle = self.faults.start(step.fault, targets, step.fault_params())
        if step.duration is not None and self._sleep_until(t0 + step.ends_at):
            self.faults.stop(handle)

    def done(self) -> bool:
        """Every step has run (and healed itself, when it has a duration)."""
        return all(not th.is_alive() for th in self._threads)

    def wait(self, timeout: float | None = None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        for th in self._threads:
            th.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def heal_everything(self) -> None:
        """Stop pending steps, end every open fault and bring every stopped broker back."""
        self._stop.set()
        self.wait(timeout=90)
        self.faults.restore()

    def errors(self) -> list[str]:
        return [
            f"step {o.step.fault}@{o.step.at}s {o.step.target}: {o.error}" for o in self.outcomes if o.error
        ]
