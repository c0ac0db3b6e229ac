"""What a check group declares where it lives: its name, the function that runs it and its time limit.

An area of ``checks`` declares its groups in its package (``checks/<area>/__init__.py``); ``run.registry``
lists them in run order, one line each. Adding a group touches its area and that one line.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_TIMEOUT_S = 600.0
"""An isolated group's time limit unless it declares its own."""


@dataclass(frozen=True)
class Group:
    """One check group.

    - ``name``: as reports, waiver files and ``--groups`` name it (``"L1-injected"``).
    - ``run``: ``"module:function"``, the function ``run(device, ctx) -> list[CheckResult]``; resolved only when
      the group runs, so a missing module is that group's ``error``, never an import failure of the suite.
    - ``timeout_s``: its limit in an isolated run (``--group-timeout`` overrides every group's).
    - ``statistical``: whether it spends α: its tests are in the run-wide plan (``stats.plan.GROUPS``).
    """

    name: str
    run: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    statistical: bool = False
