"""L4: the mutant zoo. Each mutant is a correct device with one known bug of the field planted in it; every
one must be killed by the check its entry names, and every correct device must pass (``specsim mutants``)."""
