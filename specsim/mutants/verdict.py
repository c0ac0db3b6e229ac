"""One judgement of a mutant or of a correct subject: killed or not, by which check, after which groups.

Shared by the device zoo's runner (``specsim.mutants.runner``) and the mutant families
(``specsim.mutants.families``, ``specsim.mutants.grammar``), so that none of them imports another
for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from specsim.conformance.core.results import CheckResult


@dataclass
class Verdict:
    name: str
    bug: str
    models: str
    killed: bool
    killer: CheckResult | None
    groups_run: list
    seconds: float
    family: str = "device"   # specsim.mutants.families: "device" is the zoo, judged by the conformance suite
    note: str = ""           # a family's word on its named check (appended to the evidence)

    def evidence(self) -> str:
        if self.killer is None:
            return self.note
        k = self.killer
        if k.p_value is not None:
            said = f"p={k.p_value:.3g} <= alpha={k.alpha:.3g}"
        else:
            said = (k.detail.splitlines() or [""])[0][:160]
        return f"{said}; {self.note}" if self.note else said

    def to_json(self) -> dict:
        return {"name": self.name, "family": self.family, "bug": self.bug, "models": self.models, "killed": self.killed,
                "killer": self.killer.to_json() if self.killer else None, "evidence": self.evidence(),
                "groups_run": self.groups_run, "seconds": round(self.seconds, 2)}
