"""Marks the ported cases the emulator is known to get wrong (``EMULATOR_GAPS`` of
rabbitmq_suite/__init__.py) as strict xfails, for their emulator parametrizations only (ids
with ``emulator-3.10`` or ``emulator-4.0``): the same test must still pass on the real
servers, and XPASSes (fails) once the emulator is fixed, so that the entry is removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.contract.rabbitmq_suite import EMULATOR_GAPS

HERE = Path(__file__).parent


def gap_reasons(item: pytest.Item) -> list[str]:
    """The EMULATOR_GAPS entries naming ``item``: ``module.py::test`` (any parametrization)
    or ``module.py::test[fragment]`` (a parametrization whose id contains ``fragment``), for
    an emulator parametrization of a test collected in this folder (the hook sees the whole
    session)."""
    path = Path(str(item.fspath))
    callspec = getattr(item, "callspec", None)
    if path.parent != HERE or callspec is None or "emulator-" not in callspec.id:
        return []
    function = getattr(item, "originalname", None) or item.name.split("[", 1)[0]
    reasons = []
    for key, reason in EMULATOR_GAPS.items():
        module, _, test = key.partition("::")
        name, _, fragment = test.partition("[")
        fragment = fragment.removesuffix("]")
        if (module, name) == (path.name, function) and fragment in callspec.id:
            reasons.append(reason)
    return reasons


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        reasons = gap_reasons(item)
        if reasons:
            reason = "emulator gap: " + " / ".join(reasons)
            item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
