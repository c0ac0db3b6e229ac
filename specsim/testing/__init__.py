"""Cases, public for vendors as for us: batch and tree builders, the edges of SPEC, sampler parameters,
bad inputs, hypothesis strategies and the seeds every case derives from. What judges a case's output
is ``specsim.judge``."""
