"""How much work each piece of ``p4gen verify`` may take: counted in solver work, never in time.

A verdict bounded by time depends on the machine's load: the same plan could
be refuted on an idle machine and not proved on a busy one.  So every bound
here counts work, which is the same on every run of the same input:

* :data:`QUERY_RLIMIT`: Z3's resource count (``rlimit``) per proof query:
  an induction unit's query, a fixed-point query, the bitmap word-split
  lemma.  The heaviest query of the three base models takes about 2 million
  units; the default leaves a hundred times that;
* :data:`FEASIBLE_RLIMIT`: per query that asks whether a path through the
  decision table can be taken at all (a path not ruled out is kept);
* :data:`SEARCH_STEPS`: transitions per counterexample search (one
  transition: one case of one event evaluated from one state,
  :mod:`p4gen.verify.explore`).

``p4gen verify --budget F`` multiplies the query and search budgets by F
(:class:`Budget`).  A verdict a budget cut short says so and names it.
"""

from __future__ import annotations

from dataclasses import dataclass

QUERY_RLIMIT = 200_000_000
FEASIBLE_RLIMIT = 50_000_000
SEARCH_STEPS = 4_000_000


@dataclass(frozen=True)
class Budget:
    """Every piece's work budget: ``scale`` (``--budget``) times the defaults."""
    scale: float = 1.0

    @property
    def query_rlimit(self) -> int:
        """Z3 resource units per proof query."""
        return int(QUERY_RLIMIT * self.scale)

    @property
    def search_steps(self) -> int:
        """Transitions per counterexample search."""
        return int(SEARCH_STEPS * self.scale)

    def text(self) -> str:
        return (f"rlimit {self.query_rlimit:,} per query, {self.search_steps:,} transitions per search"
                + (f" (--budget {self.scale:g})" if self.scale != 1 else ""))
