"""Engine proposers for the seeds' platforms (seeds 001, 002): universal draft (TLI) and PTD."""

from specsim.engine_ext.adapters import Float32Host
from specsim.engine_ext.proposers import PtdProposer, UniversalDraftProposer

__all__ = ["UniversalDraftProposer", "PtdProposer", "Float32Host"]
