"""Standalone reproductions of real deviations found in the field's samplers (docs/field.md): each imports
the engine and torch only, never this project, runs against the engine's installed package the way its
maintainers would run it, prints expected vs got and exits 1 while the deviation is present. ``specsim
field`` embeds them in its upstream reports (``specsim.field.upstream``). Where vLLM is not installed,
``on_vllm_members`` runs the vLLM ones unchanged on the pinned wheel's members."""
