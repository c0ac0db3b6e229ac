"""The simulated engine: toy models, paged KV, scheduler, proposers, keyed drafting, metrics.

See ``docs/engine.md`` for the step loop, the invariants and the seeding contract.
"""

from specsim.engine.engine import Engine, EngineError, StepOutput
from specsim.engine.metrics import SpecDecodeMetrics
from specsim.engine.models import ModelPositionError, ToyLM
from specsim.engine.proposers import DraftModelProposer, EagleProposer, NgramProposer, top1_propose
from specsim.engine.scheduler import SchedulerConfig
from specsim.engine.state import Request, SamplingParams, Status

__all__ = ["Engine", "EngineError", "StepOutput", "SpecDecodeMetrics", "ToyLM", "ModelPositionError",
           "DraftModelProposer", "EagleProposer", "NgramProposer", "top1_propose", "SchedulerConfig",
           "Request", "SamplingParams", "Status"]
