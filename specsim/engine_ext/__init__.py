"""Engine proposers for the seeds' platforms (seeds 001, 002): universal draft (TLI) and PTD."""

from specsim.engine_ext.factory import make_platform_proposer
from specsim.engine_ext.proposers import PtdProposer, UniversalDraftProposer

__all__ = ["UniversalDraftProposer", "PtdProposer", "make_platform_proposer"]
