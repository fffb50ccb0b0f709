"""Costs that are pure functions of a chip and results: energy and area tables
(:mod:`~sim.model.cost.energy`) and the power / DVFS model (:mod:`~sim.model.cost.power`)."""
