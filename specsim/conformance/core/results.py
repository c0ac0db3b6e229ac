"""Check results: statuses, not booleans (Khronos CTS, array-api-tests).

Every check of every layer returns ``CheckResult`` objects; the runner writes
them to ``conformance.json`` (``schema_version`` below) and the reports read
only that JSON.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

SCHEMA_VERSION = 1

Status = Literal["pass", "fail", "not_supported", "error"]
STATUSES = ("pass", "fail", "not_supported", "error")


@dataclass
class CheckResult:
    """One check's outcome.

    ``name`` is stable and unique (waivers and reports key on it), e.g.
    ``"L1/injected/full/float32/case-17"``. ``layer`` is one of ``L0`` … ``L4``.
    Statistical checks also fill ``p_value``, ``alpha``, ``n``, ``statistic``,
    ``detectable_tv`` and ``seed``; anything else goes in ``extra``.

    ``waiver``: set only on a ``fail`` or ``error`` that a vendor's waiver file covers
    (``specsim conform --waivers``): ``{"check", "reason", "link", "source"}``. The status
    stays what the check found; the verdict (SPEC §10) says what the waiver changes.
    """

    name: str
    layer: str
    status: Status
    detail: str = ""
    p_value: float | None = None
    alpha: float | None = None
    n: int | None = None
    statistic: float | None = None
    detectable_tv: float | None = None
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    waiver: dict[str, str] | None = None

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status: must be one of {STATUSES}, got {self.status!r}")
        if self.waiver is not None and self.status not in ("fail", "error"):
            raise ValueError(f"waiver: only a fail or error can be waived; {self.name} is {self.status!r}")

    def to_json(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None and v != {}}

    @classmethod
    def from_json(cls, d: dict) -> "CheckResult":
        return cls(**d)


def passed(results: list[CheckResult]) -> bool:
    """No check failed or errored (``not_supported`` is not a failure). Not the verdict: a device
    that declares nothing, or whose evidence never ran, meets it. The gate is SPEC §10's verdict,
    ``specsim.conformance.run.runner.verdict_of``."""
    return not any(r.status in ("fail", "error") for r in results)
