"""The interface area: input rules (what a device must refuse) and capabilities (a device held to what it
declares, both ways).

It imports ``stats``, ``cases`` and ``core``; no other area of ``checks``.
"""

from specsim.conformance.core.groups import Group

INPUT_RULES = Group("input-rules", "specsim.conformance.checks.interface.input_rules:input_rules_group")
CAPABILITIES = Group("capabilities", "specsim.conformance.checks.interface.capabilities:capabilities_group")
