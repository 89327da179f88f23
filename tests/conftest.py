"""Hypothesis profiles.

``make test`` (so CI) runs the ``deterministic`` profile: every run draws the same
examples, so a stop fails on what changed, never on a newly drawn edge case. Plain
``pytest`` keeps Hypothesis' default, a fresh random search each run, remembering
failures in ``.hypothesis/``: that is how to look for new edge cases.
"""

from hypothesis import settings

settings.register_profile("deterministic", derandomize=True, database=None)
