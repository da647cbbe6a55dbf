"""Arena, ratings, sweeps, GTP and analysis engines (to come)."""
