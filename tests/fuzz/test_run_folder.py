"""Issue 34, the run folder: `bfh judge` / `bfh report` on a real reconciled run folder whose
evidence was removed, replaced or altered. Every input gives a one-line error (exit 2) or a correct
result; never a traceback, never PASS on foreign or missing evidence, nothing rewritten first.

One run folder per module: a synthetic history (spark_analysis.testing.synth) with a run record,
reconciled once by Spark, judged PASS, reported and sealed (harness.contracts.manifest). Each case works on
a copy. `FUZZ_EXAMPLES` sets the examples per property (default 40).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import time
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main as cli
from harness.contracts import manifest
from harness.verdict import judge

pytestmark = pytest.mark.spark

RUN = "20990101-000000-fuzz"
OTHER = "20990101-000001-other"
GATES = ["at_least_once", "integrity", "no_downgrade", "policy", "faults_applied", "non_vacuous"]
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "40"))
CASES = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
TRIED: dict[str, int] = {}


def _count(name: str) -> None:
    TRIED[name] = TRIED.get(name, 0) + 1


@pytest.fixture(scope="module", autouse=True)
def _report_cases() -> Any:
    yield
    print(f"\nrun-folder fuzz cases tried: {TRIED}")


# -- the run folder -----------------------------------------------------------------------------
def _run_record(t0: float) -> dict[str, Any]:
    url = "127.0.0.1:1883"
    conf = {"mb.urls": url, "mb.publisher.timeout": "900"}
    subs = [{"topic": "t/#", "qos": 1, "durable": True}, {"topic": "t/+", "qos": 1, "durable": True}]
    pubs = [{"topic": "t/x", "qos": 1, "count": 40, "rate_per_s": 10.0}]
    return {
        "run": RUN,
        "agents": [
            {"name": "sub", "conf": conf, "workload": {"subscriptions": subs, "publications": []}},
            {"name": "pub", "conf": conf, "workload": {"subscriptions": [], "publications": pubs}},
        ],
        "scenario": {"name": "fuzz", "what": "issue 34", "gates": GATES, "params": {}},
        "schedule": {
            "seed": 1,
            "settle_s": 1,
            "steps": [{"at": 1, "fault": "latency", "target": "pair-1-mqtt"}],
        },
        "links": [
            {
                "name": "pair-1-mqtt",
                "listen": url,
                "upstream": "127.0.0.1:1",
                "kind": "client",
                "broker": "pair-1",
            }
        ],  # fmt: skip
        "brokers": {"pair-1": {"group": "pair"}},
        "observations": {
            "masters": {"pair": "pair-1"},
            "agents_launched_ts": {"sub": t0, "pub": t0},
            "agents_stopped_ts": {"sub": t0 + 30, "pub": t0 + 30},
            "agent_exit": {"sub": 0, "pub": 0},
            "agents_exited_early": [],
            "nemesis_errors": [],
            "stalled": False,
        },
    }


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reconciled, judged (PASS), reported and sealed run folder."""
    from harness.report.html import render_report
    from spark_analysis.reconcile import reconcile
    from spark_analysis.testing.synth import Fault, History, Msg, Sub

    d = tmp_path_factory.mktemp("runs") / RUN
    t0 = time.time() - 600
    subs = [Sub("sub", "t/#", t0 + 0.5), Sub("sub", "t/+", t0 + 0.5)]
    msgs = [
        Msg(
            f"m-{i:03d}",
            "pub",
            "t/x",
            1,
            t0 + 1 + i * 0.1,
            "acknowledged",
            receipts={0: [t0 + 1.05 + i * 0.1], 1: [t0 + 1.06 + i * 0.1]},
        )  # fmt: skip
        for i in range(40)
    ]
    fault = Fault("f001-latency", t0 + 2, t0 + 3, fault="latency", target="pair-1-mqtt")
    History(RUN, subs, msgs, faults=[fault]).write(d)
    (d / "run.json").write_text(json.dumps(_run_record(t0), indent=2))
    reconcile([d])
    v = judge(d)
    assert v.verdict == "pass", v.message()
    render_report(d)
    manifest.write(d)
    return d


@pytest.fixture
def legacy(sealed: Path, tmp_path: Path) -> Path:
    """The same folder as a run from before manifests: no manifest.json, run.json unmarked."""
    d = _copy(sealed, tmp_path)
    return _unseal(d)


def _unseal(d: Path) -> Path:
    (d / manifest.MANIFEST).unlink()
    run = json.loads((d / "run.json").read_text())
    run.pop("manifest", None)
    (d / "run.json").write_text(json.dumps(run, indent=2))
    return d


def _copy(src: Path, root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for p in root.iterdir():
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    return Path(shutil.copytree(src, root / src.name, symlinks=True))


def bfh(*args: str) -> tuple[int, str, str]:
    """`bfh ...` in this process (no interpreter start per case); a traceback fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = cli.main(list(args))
        except SystemExit as e:
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


def one_line_error(code: int, err: str) -> bool:
    """Exit 2 and one `error:` line (beside, for a folder from before manifests, its warning)."""
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith("warning:")]
    return code == 2 and len(lines) == 1 and lines[0].startswith("error:")


def outputs(d: Path) -> dict[str, bytes]:
    return {p: (d / p).read_bytes() for p in ("analysis/summary.json", "report.html", "summary.md")}


# -- mutations ----------------------------------------------------------------------------------
def _lines(p: Path) -> list[str]:
    return [x for x in p.read_text().splitlines() if x.strip()]


def _append(p: Path, rec: dict[str, Any]) -> None:
    with p.open("a") as f:
        f.write(json.dumps(rec) + "\n")


def _last_record(p: Path) -> dict[str, Any]:
    return json.loads(_lines(p)[-1])


def _replace(p: Path, how: str) -> None:
    if p.is_dir():
        shutil.rmtree(p)
    else:
        p.unlink()
    if how == "dir":
        p.mkdir()
    elif how == "fifo":
        os.mkfifo(p)
    elif how == "symlink-dir":
        p.symlink_to(p.parent)


def _set(doc: Any, path: list[Any], value: Any) -> Any:
    if not path:
        return value
    *head, last = path
    node = doc
    for k in head:
        node = node[k]
    node[last] = value
    return doc


HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _key_paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _key_paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            out += _key_paths(v, (*prefix, i))
    return out


OPS = ("remove", "dir", "fifo", "empty", "truncate", "flip", "foreign", "ms", "nan", "inf", "rerun", "json")


def mutate(d: Path, rel: str, op: str, data: st.DataObject) -> None:
    """Apply `op` to the run folder's file `rel` (ops that do not fit the file fall back to a flip)."""
    p = d / rel
    is_log = rel.endswith(".jsonl")
    is_json = rel.endswith(".json")
    if op in ("foreign", "ms", "nan", "inf", "rerun") and not is_log:
        op = "json" if is_json else "flip"
    if op == "json" and not is_json:
        op = "flip"
    if op == "remove":
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    elif op in ("dir", "fifo"):
        _replace(p, op)
    elif op == "empty":
        p.write_bytes(b"")
    elif op == "truncate":
        raw = p.read_bytes()
        p.write_bytes(raw[: data.draw(st.integers(0, max(len(raw) - 1, 0)), label="cut")])
    elif op == "flip":
        raw = bytearray(p.read_bytes())
        if not raw:
            raw = bytearray(b"x")
        else:
            i = data.draw(st.integers(0, len(raw) - 1), label="at")
            raw[i] = (raw[i] + data.draw(st.integers(1, 255), label="by")) % 256
        p.write_bytes(bytes(raw))
    elif op == "foreign":  # another run's records appended to this run's log
        _append(p, {**_last_record(p), "run": OTHER})
    elif op in ("ms", "nan", "inf"):
        rec = _last_record(p)
        ts = {"ms": rec["ts"] * 1000, "nan": float("nan"), "inf": float("inf")}[op]
        _append(p, {**rec, "ts": ts})
    elif op == "rerun":  # the whole log is another run's
        p.write_text(p.read_text().replace(f'"run":"{RUN}"', f'"run":"{OTHER}"').replace(
            f'"run": "{RUN}"', f'"run": "{OTHER}"'))  # fmt: skip
    elif op == "json":
        doc = json.loads(p.read_text())
        keys = _key_paths(doc)
        if not keys:
            p.write_text(json.dumps(data.draw(HOSTILE, label="doc")))
            return
        path = data.draw(st.sampled_from(keys), label="key")
        p.write_text(json.dumps(_set(doc, list(path), data.draw(HOSTILE, label="value"))))


def evidence_of(d: Path) -> list[str]:
    return sorted(json.loads((d / manifest.MANIFEST).read_text())["files"])


def _reconciled_part(raw: bytes) -> Any:
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    return {k: v for k, v in doc.items() if k not in manifest.JUDGE_KEYS} if isinstance(doc, dict) else doc


# -- properties ---------------------------------------------------------------------------------
@CASES
@given(data=st.data())
def test_sealed_folder_with_altered_evidence_is_an_error(
    sealed: Path, tmp_path_factory: Any, data: Any
) -> None:
    """A sealed run folder with one piece of evidence removed, replaced or altered: `bfh judge` and
    `bfh report` give one `error:` line, exit 2, and rewrite nothing (summary.json, report.html)."""
    d = _copy(sealed, tmp_path_factory.getbasetemp() / "sealed-case")
    files = evidence_of(d)
    rel = data.draw(st.sampled_from(files), label="file")
    op = data.draw(st.sampled_from(OPS), label="op")
    before = (d / rel).read_bytes()
    mutate(d, rel, op, data)
    _count(f"sealed:{op}")
    kept = outputs(d) if rel not in ("analysis/summary.json",) else None
    code, out, err = bfh(data.draw(st.sampled_from(["judge", "report"]), label="cmd"), str(d))
    assert "Traceback" not in err
    after = d / rel
    unchanged = after.is_file() and not after.is_symlink() and after.read_bytes() == before
    if rel == "analysis/summary.json" and after.is_file() and not unchanged:
        raw = after.read_bytes()
        same = _reconciled_part(raw) == _reconciled_part(before) and _reconciled_part(raw) is not None
        if same:  # only the judge's own keys changed: re-judged, the same verdict
            assert code == 0, err
            return
    if unchanged:  # e.g. a JSON value set to what it was
        assert code == 0, err
        return
    assert one_line_error(code, err), (rel, op, code, err)
    assert "PASS" not in err and "pass" not in out.lower()
    if kept is not None:
        assert outputs(d) == kept, "nothing rewritten before the evidence was checked"


LEGACY_DETECTED = (
    ("run.json", "remove"),
    ("faults.jsonl", "remove"),
    ("agents/pub/messages.jsonl", "remove"),
    ("agents/sub/messages.jsonl", "remove"),
    ("agents/pub/messages.jsonl", "empty"),
    ("analysis/summary.json", "remove"),
    ("agents/pub/messages.jsonl", "foreign"),
    ("agents/sub/messages.jsonl", "foreign"),
    ("agents/pub/messages.jsonl", "rerun"),
    ("agents/sub/messages.jsonl", "rerun"),
    ("agents/sub/messages.jsonl", "ms"),
    ("agents/pub/messages.jsonl", "nan"),
    ("agents/sub/messages.jsonl", "inf"),
    ("agents/pub/messages.jsonl", "fifo"),
    ("agents/sub/messages.jsonl", "dir"),
    ("faults.jsonl", "fifo"),
    ("run.json", "dir"),
    ("analysis/summary.json", "fifo"),
)


@CASES
@given(data=st.data())
def test_legacy_folder_never_passes_on_foreign_or_missing_evidence(
    sealed: Path, tmp_path_factory: Any, data: Any
) -> None:
    """A folder from before manifests: judged as before (one warning line), but foreign, missing
    or mistimed evidence is never a PASS; any other mutation gives a verdict or one error line."""
    d = _unseal(_copy(sealed, tmp_path_factory.getbasetemp() / "legacy-case"))
    if data.draw(st.booleans(), label="known"):
        rel, op = data.draw(st.sampled_from(LEGACY_DETECTED), label="case")
        detected = True
    else:
        files = sorted(
            p.relative_to(d).as_posix()
            for p in d.rglob("*")
            if p.is_file() and "events.parquet" not in p.parts
        )
        rel, op = data.draw(st.sampled_from(files), label="file"), data.draw(st.sampled_from(OPS), label="op")
        detected = False
    mutate(d, rel, op, data)
    _count(f"legacy:{'known' if detected else 'any'}")
    code, out, err = bfh("judge", str(d))
    assert "Traceback" not in err
    lines = [x for x in err.splitlines() if x.strip()]
    warned = [x for x in lines if x.startswith("warning:")]
    assert len(warned) <= 1
    rest = [x for x in lines if not x.startswith("warning:")]
    assert code in (0, 1, 2)
    if code == 2 and rest and rest[0].startswith("error:"):
        assert len(rest) == 1, err
    if detected:
        assert code != 0, (rel, op, err)
        assert not any(x.startswith("PASS") for x in rest)


# -- the examples of issue 34 -------------------------------------------------------------------
def _summary(d: Path) -> dict[str, Any]:
    """summary.json with the judge's verdict.json over it."""
    from harness.verdict.judge import judged_summary

    return judged_summary(d)


def _edit_json(p: Path, fn: Callable[[dict[str, Any]], Any]) -> None:
    doc = json.loads(p.read_text())
    fn(doc)
    p.write_text(json.dumps(doc, indent=2))


def test_the_sealed_folder_passes_and_rejudging_keeps_the_seal(sealed: Path, tmp_path: Path) -> None:
    d = _copy(sealed, tmp_path)
    for _ in range(2):  # the judge's own writes (summary.json's verdict, report.html) are not evidence
        code, _, err = bfh("judge", str(d))
        assert code == 0 and "PASS" in err and "warning" not in err, err
    code, _, err = bfh("report", str(d))
    assert code == 0, err
    m = json.loads((d / manifest.MANIFEST).read_text())
    assert m["run"] == RUN and m["counts"]["acknowledged"] == 40 and m["counts"]["receipts"] == 80
    assert {"run.json", "faults.jsonl", "agents/pub/messages.jsonl", "analysis/summary.json"} <= set(
        m["files"]
    )
    assert m["files"]["agents/pub/messages.jsonl"]["records"] == 80
    assert all(len(e["sha256"]) == 64 for e in m["files"].values())


def test_legacy_folder_is_judged_with_one_warning(legacy: Path) -> None:
    code, _, err = bfh("judge", str(legacy))
    assert code == 0, err
    assert len([x for x in err.splitlines() if x.startswith("warning:")]) == 1 and "manifest" in err


@pytest.mark.parametrize("sealed_run", [True, False], ids=["sealed", "legacy"])
def test_missing_run_json_is_an_error(sealed: Path, tmp_path: Path, sealed_run: bool) -> None:
    d = _copy(sealed, tmp_path) if sealed_run else _unseal(_copy(sealed, tmp_path))
    (d / "run.json").unlink()
    code, _, err = bfh("judge", str(d))
    assert one_line_error(code, err) and "run.json" in err, err


def test_summary_counts_what_the_logs_do_not_hold(legacy: Path) -> None:
    """summary.json counts 40 acknowledged and 80 receipts; the logs hold no sent/received record."""
    for log in legacy.glob("agents/*/messages.jsonl"):
        keep = [x for x in _lines(log) if json.loads(x)["event"] not in ("sent", "received")]
        log.write_text("".join(x + "\n" for x in keep))
    code, _, err = bfh("judge", str(legacy))
    assert code == 1 and "BROKEN evidence" in err and "40 acknowledged" in err, err
    assert _summary(legacy)["verdict"] == "fail"


def test_summary_of_another_run_is_an_error(sealed: Path, tmp_path: Path) -> None:
    for d in (_copy(sealed, tmp_path / "s"), _unseal(_copy(sealed, tmp_path / "l"))):
        _edit_json(d / "analysis" / "summary.json", lambda s: s.update(run=OTHER))
        code, _, err = bfh("judge", str(d))
        assert one_line_error(code, err) and "foreign evidence" in err, err


def test_every_record_of_another_run_never_passes(legacy: Path) -> None:
    for log in legacy.glob("agents/*/messages.jsonl"):
        log.write_text(log.read_text().replace(f'"run":"{RUN}"', f'"run":"{OTHER}"'))
    code, _, err = bfh("judge", str(legacy))
    assert code == 1 and "BROKEN evidence" in err and OTHER in err, err
    check = next(c for c in _summary(legacy)["checks"] if c["promise"] == "evidence")
    assert check["status"] == "fail" and check["count"] >= 160


def test_another_runs_log_appended_is_foreign_not_blamed(legacy: Path) -> None:
    """Another run's log appended to this run's: its records are not counted (no `lost` blamed on
    the agent from them); the evidence check names them."""
    pub = legacy / "agents" / "pub" / "messages.jsonl"
    other = [
        {**json.loads(x), "run": OTHER, "msg_id": "o-" + json.loads(x)["msg_id"]}
        for x in _lines(pub)
        if "msg_id" in json.loads(x)
    ]
    with pub.open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in other)
    code, _, err = bfh("judge", str(legacy))
    assert code == 1 and "BROKEN evidence" in err and "record(s) of another run" in err, err
    s = _summary(legacy)
    assert s["broken"] == ["evidence"], s["broken"]


def test_missing_fault_log_is_an_error(sealed: Path, tmp_path: Path) -> None:
    d = _unseal(_copy(sealed, tmp_path))
    (d / "faults.jsonl").unlink()
    code, _, err = bfh("judge", str(d))
    assert one_line_error(code, err) and "faults.jsonl" in err, err


@pytest.mark.parametrize("text", ["{not json\n", "garbage\n\x00\n", '{"event": "fault_start"}\n'])
def test_an_unparsable_fault_log_is_an_error_as_a_missing_one(legacy: Path, text: str) -> None:
    """With the manifest removed, a faults.jsonl holding no fault record is as good as missing:
    cannot judge, never a verdict that blames the agent."""
    (legacy / "faults.jsonl").write_text(text)
    code, out, err = bfh("judge", str(legacy))
    assert one_line_error(code, err) and "faults.jsonl" in err and "cannot judge" in err, err
    assert "first_available" not in out + err


def test_fault_without_its_end_fails_faults_applied(legacy: Path) -> None:
    log = legacy / "faults.jsonl"
    log.write_text("".join(x + "\n" for x in _lines(log) if '"fault_end"' not in x))
    code, _, err = bfh("judge", str(legacy))
    assert code == 1 and "BROKEN faults_applied" in err and "never ended" in err, err


@pytest.mark.parametrize("ts", [None, "nan", "inf", "-inf"], ids=["ms", "nan", "inf", "-inf"])
def test_a_bad_timestamp_is_malformed_not_a_crash(legacy: Path, ts: str | None) -> None:
    """One `ts` in milliseconds (the report's timeline asked for 8 GB), NaN or inf: counted as
    malformed by the evidence check, the report renders, exit 1 (never a crash, never PASS)."""
    log = legacy / "agents" / "sub" / "messages.jsonl"
    rec = _last_record(log)
    rec["ts"] = rec["ts"] * 1000 if ts is None else float(ts)
    _append(log, rec)
    for cmd in ("judge", "report"):
        code, _, err = bfh(cmd, str(legacy))
        assert "Traceback" not in err
        assert code == (1 if cmd == "judge" else 0), err
    check = next(c for c in _summary(legacy)["checks"] if c["promise"] == "evidence")
    assert check["status"] == "fail" and "window" in check["detail"]
    assert (legacy / "report.html").stat().st_size < 2_000_000


@pytest.mark.parametrize(
    "where,edit,says",
    [
        ("run.json", lambda r: r.update(scenario=None), None),  # null scenario: the default gates
        ("run.json", lambda r: r.update(scenario="fuzz"), "`scenario`"),
        ("run.json", lambda r: r["observations"].update(agent_exit=[0]), "agent_exit"),
        ("analysis/summary.json", lambda s: s["totals"].update(acknowledged="40"), "totals.acknowledged"),
        ("analysis/summary.json", lambda s: s.update(totals="many"), "`totals`"),
    ],
    ids=["scenario-null", "scenario-string", "agent-exit-list", "string-total", "string-totals"],
)
def test_bad_values_are_one_line(legacy: Path, where: str, edit: Any, says: str | None) -> None:
    _edit_json(legacy / where, edit)
    code, _, err = bfh("judge", str(legacy))
    assert "Traceback" not in err
    if says is None:
        assert code in (0, 1), err
    else:
        assert one_line_error(code, err) and says in err, err


@pytest.mark.parametrize("kind", ["fifo", "dir"])
def test_a_fifo_or_directory_in_place_of_a_log_is_one_line(sealed: Path, tmp_path: Path, kind: str) -> None:
    for d in (_copy(sealed, tmp_path / "s"), _unseal(_copy(sealed, tmp_path / "l"))):
        _replace(d / "agents" / "sub" / "messages.jsonl", kind)
        t = time.monotonic()
        for cmd in ("judge", "report"):
            code, _, err = bfh(cmd, str(d))
            assert one_line_error(code, err) and ("FIFO" in err or "directory" in err), err
        assert time.monotonic() - t < 30, "never blocked on the FIFO"


def test_a_read_only_run_folder_is_one_line(legacy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """(The tests run as root, where chmod does not stop a write: the write is refused instead.)"""
    real = Path.write_text

    def refuse(self: Path, *a: Any, **kw: Any) -> int:
        if legacy in self.parents:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *a, **kw)

    monkeypatch.setattr(Path, "write_text", refuse)
    before = outputs(legacy)
    code, _, err = bfh("judge", str(legacy))
    assert one_line_error(code, err) and "Permission denied" in err, err
    assert outputs(legacy) == before


def test_a_crashing_checker_is_unknown_exit_2(legacy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.verdict.checks import PROMISES, Promise

    def boom(v: Any) -> Any:
        raise ValueError("a value no checker expected")

    monkeypatch.setitem(PROMISES, "at_least_once", Promise("at_least_once", "raises", boom))
    code, _, err = bfh("judge", str(legacy))
    assert code == 2 and "UNKNOWN at_least_once" in err and "PASS" not in err, err
    assert _summary(legacy)["verdict"] == "unknown"


def test_a_crashing_report_is_exit_2_and_leaves_no_stale_report(
    legacy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.report import html as reporting

    def boom(d: Any, width: int = 960) -> Any:
        raise MemoryError("8 GB")

    monkeypatch.setattr(reporting, "timeline_svg", boom)
    assert (legacy / "report.html").exists()
    code, _, err = bfh("report", str(legacy))
    assert one_line_error(code, err) and "MemoryError" in err, err
    assert not (legacy / "report.html").exists(), "no report.html left showing the old verdict"
    code, _, err = bfh("judge", str(legacy))
    assert code == 2 and "report not rendered" in err


def test_judge_judges_every_folder_and_exits_with_the_worst(sealed: Path, tmp_path: Path) -> None:
    bad = _copy(sealed, tmp_path / "a")
    (bad / "run.json").unlink()
    good = _copy(sealed, tmp_path / "b")
    failing = _unseal(_copy(sealed, tmp_path / "c"))
    sub = failing / "agents" / "sub" / "messages.jsonl"
    _append(sub, {**_last_record(sub), "run": OTHER})
    code, out, err = bfh("judge", str(bad), str(good), str(failing), "--json")
    assert code == 2, err
    rows = json.loads(out)
    assert [r["verdict"] for r in rows] == ["error", "pass", "fail"]
    code, _, err = bfh("judge", str(good), str(failing))
    assert code == 1 and "PASS" in err and "FAIL" in err
