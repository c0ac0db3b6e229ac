"""Standalone reproductions of real deviations found in the field's samplers (docs/field.md): each runs
against the engine's installed package, the way its maintainers would run it."""
