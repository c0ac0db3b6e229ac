"""The testing toolkit, public for vendors as for us: batch builders, the
margin-aware comparison with the reference, hypothesis strategies, and (in
``specsim.stats``) the calibrated statistics."""
