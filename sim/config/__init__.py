"""Configuration: typed, frozen specs read from YAML with line-accurate errors."""
from .chip import (
    DATAFLOWS,
    SCHEMA_VERSION,
    AreaSpec,
    ArraySpec,
    ChipSpec,
    CoresSpec,
    DramLevel,
    EnergySpec,
    InterconnectSpec,
    MemoryLevel,
    MemorySpec,
    NocSpec,
    RegistersLevel,
    RuntimeSpec,
    SramLevel,
    SramPartition,
    VectorUnitSpec,
    resolve_rate_class,
)
from .loader import apply_overrides, load_model, parse_override, read_yaml, validate
from .registry import ARCH_DIR_ENV, check_files, chips_dir, list_chips, load_chip, resolve_chip_path

__all__ = [
    "SCHEMA_VERSION", "DATAFLOWS",
    "ChipSpec", "CoresSpec", "ArraySpec", "VectorUnitSpec",
    "MemorySpec", "MemoryLevel", "RegistersLevel", "SramLevel", "SramPartition", "DramLevel",
    "NocSpec", "EnergySpec", "AreaSpec", "RuntimeSpec", "InterconnectSpec",
    "resolve_rate_class",
    "read_yaml", "apply_overrides", "parse_override", "validate", "load_model",
    "ARCH_DIR_ENV", "chips_dir", "list_chips", "resolve_chip_path", "load_chip", "check_files",
]
