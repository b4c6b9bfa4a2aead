"""The per-directory time table printed after a run (tests/suite_time.py), on made-up reports."""

from __future__ import annotations

from types import SimpleNamespace

from tests.model_time import DECODE, Cost, ModelTime
from tests.suite_time import by_directory, directory_of


def test_phases_are_summed_per_directory_and_decode_is_charged_to_its_tests() -> None:
    def report(nodeid: str, when: str, duration: float) -> SimpleNamespace:
        return SimpleNamespace(nodeid=nodeid, when=when, duration=duration)

    reports = [
        report("tests/adapter/test_a.py::test_one", "setup", 3.0),
        report("tests/adapter/test_a.py::test_one", "call", 1.0),
        report("tests/adapter/test_a.py::test_one", "teardown", 0.5),
        report("tests/adapter/test_b.py::test_two[x]", "call", 2.0),
        report("tests/stacks/test_c.py::test_three", "call", 10.0),
        report("tests/test_docs.py::test_four", "call", 0.25),
        SimpleNamespace(nodeid="", when=None, duration=99.0),  # a warning or a collect report: not a test phase
    ]
    model_time = ModelTime()
    with model_time.test("tests/adapter/test_b.py::test_two[x]"):
        model_time.charge(100, 1.5)
    model_time.charge(5, 7.0)  # outside any test: in no directory
    lines = by_directory(reports, model_time)
    assert [line.split() for line in lines] == [
        ["directory", "tests", "seconds", "decode", "s"],
        ["tests/stacks", "1", "10.0", "0.0"],
        ["tests/adapter", "2", "6.5", "1.5"],
        ["tests", "1", "0.2", "0.0"],
        ["all", "4", "16.8", "1.5"],
    ]
    assert directory_of("tests/adapter/test_a.py::test_one[a/b]") == "tests/adapter"


def test_each_phase_carries_its_own_decode_and_the_reports_add_up_to_what_was_spent() -> None:
    """What a worker charged reaches the printing process on the reports alone: each phase's report carries what was
    spent since the previous phase of the same test, never twice."""
    spent = ModelTime()
    reports = []
    for when, tokens, seconds in (("setup", 300, 3.0), ("call", 20, 0.5), ("teardown", 0, 0.0)):
        with spent.test("tests/adapter/test_a.py::test_one"):
            if tokens:
                spent.charge(tokens, seconds)
        share = spent.take("tests/adapter/test_a.py::test_one")
        reports.append(
            SimpleNamespace(
                nodeid="tests/adapter/test_a.py::test_one",
                when=when,
                duration=1.0,
                user_properties=[(DECODE, [share.tokens, share.seconds])] if share.tokens else [],
            )
        )
    assert [r.user_properties for r in reports] == [[(DECODE, [300, 3.0])], [(DECODE, [20, 0.5])], []]
    gathered = ModelTime.from_reports(reports)
    assert gathered.by_test == {"tests/adapter/test_a.py::test_one": Cost(320, 3.5)}
    assert by_directory(reports, gathered)[-1].split() == ["all", "1", "3.0", "3.5"]
