"""The spec layer: typed, frozen specs read from YAML with file:line errors.

* :mod:`~sim.spec.chip`, :mod:`~sim.spec.dataflow_spec`, :mod:`~sim.spec.model_spec`,
  :mod:`~sim.spec.stack_spec` - the pydantic schemas (``extra="forbid"``, units in key names);
  the chip schema's parts are :mod:`~sim.spec.spec_base` (the shared base and field helpers),
  :mod:`~sim.spec.compute_spec`, :mod:`~sim.spec.memory_spec` and :mod:`~sim.spec.mapping_spec`,
  all re-exported by :mod:`~sim.spec.chip`;
* :mod:`~sim.spec.loader` - YAML with line numbers, ``--set`` overrides, one error listing every problem
  (its parts :mod:`~sim.spec.yaml_reader`, :mod:`~sim.spec.overrides` and
  :mod:`~sim.spec.validation_errors`, all re-exported by :mod:`~sim.spec.loader`);
* :mod:`~sim.spec.catalog` - where shipped and user data files are found; :mod:`~sim.spec.registry` - chips by name;
* :mod:`~sim.spec.dtypes` - number formats; :mod:`~sim.spec.dram_technology` - JEDEC speed-bin tables.

Imports only :mod:`sim.errors`.
"""
from sim.spec.chip import (DATAFLOWS, SCHEMA_VERSION, AreaSpec, ArraySpec, ChipSpec, CoresSpec, DramLevel, EnergySpec,
                           InterconnectSpec, MemoryLevel, MemorySpec, NocSpec, RegistersLevel, RuntimeSpec, SramLevel,
                           SramPartition, VectorUnitSpec, resolve_rate_class)
from sim.spec.loader import apply_overrides, load_model, parse_override, read_yaml, validate
from sim.spec.registry import ARCH_DIR_ENV, chips_dir, list_chips, load_chip, resolve_chip_path

__all__ = [
    "SCHEMA_VERSION", "DATAFLOWS",
    "ChipSpec", "CoresSpec", "ArraySpec", "VectorUnitSpec",
    "MemorySpec", "MemoryLevel", "RegistersLevel", "SramLevel", "SramPartition", "DramLevel",
    "NocSpec", "EnergySpec", "AreaSpec", "RuntimeSpec", "InterconnectSpec",
    "resolve_rate_class",
    "read_yaml", "apply_overrides", "parse_override", "validate", "load_model",
    "ARCH_DIR_ENV", "chips_dir", "list_chips", "resolve_chip_path", "load_chip",
]
