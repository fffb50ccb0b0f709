"""Find and load model descriptions (``workloads/*.yaml``) by name or path."""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import sim.spec.catalog as catalog
from sim.errors import ConfigError, ConfigProblem, ModelSpecError, UnknownNameError, WorkloadError
from sim.spec.loader import LimitError, YamlDoc, apply_overrides, load_model, validate
from sim.spec.model_spec import ModelSpec

ENV_WORKLOAD_DIR = catalog.KINDS["models"].env_var


def workloads_dir() -> Path:
    """The shipped folder of model YAML files (``workloads/``); names are also looked up in
    ``$SIM_WORKLOAD_DIR`` and the user folder first (:func:`sim.spec.catalog.search_dirs`)."""
    return catalog.shipped_dir("models")


def list_models() -> list[str]:
    """Names of the model descriptions in every searched folder (``$SIM_WORKLOAD_DIR``, the user
    folder, :func:`workloads_dir`), sorted."""
    return catalog.names("models")


#: how model edits are named in error messages (``sim run --model-set``, ``run_llm(model_set=...)``,
#: a sweep workload's ``model_set:``)
MODEL_SET_FLAG = "--model-set"


def _normalise_overrides(overrides) -> dict[str, Any] | list[str] | None:
    """``overrides`` as :func:`sim.spec.loader.apply_overrides` takes them: a mapping of dotted
    keys, or a list of ``key=value`` strings (one string alone is a list of one)."""
    if overrides is None:
        return None
    if isinstance(overrides, str):
        return [overrides]
    if isinstance(overrides, Mapping):
        return {str(k): v for k, v in overrides.items()}
    if isinstance(overrides, (list, tuple)):
        return list(overrides)
    raise ModelSpecError(ConfigProblem(MODEL_SET_FLAG, 0, "", "model edits must be a mapping {key: value} or a "
                                       f"list of 'key=value' strings, got {type(overrides).__name__}"))


def load_model_spec(name_or_path: str | Path | ModelSpec,
                    overrides: Mapping[str, Any] | list[str] | str | None = None) -> ModelSpec:
    """Load a :class:`ModelSpec` by name (``"llama3-8b"``) or by path to a YAML file, or edit
    one already loaded.

    ``overrides`` are ``{"dotted.key": value}`` or ``["key=value", ...]`` edits (the
    ``sim run --model-set`` syntax: values read as YAML) applied before validation (e.g.
    ``{"num_layers": 2}``).  An invalid file or edit raises
    :class:`~sim.errors.ModelSpecError` (a ConfigError naming the file, line and key, with a
    did-you-mean for a misspelt key, that is also a WorkloadError); an unknown name raises
    :class:`~sim.errors.UnknownNameError` listing the known ones.
    """
    overrides = _normalise_overrides(overrides)
    if not isinstance(name_or_path, (str, os.PathLike, ModelSpec)):
        raise WorkloadError(f"a model is a name from workloads/, a YAML path or a ModelSpec, got {name_or_path!r}")
    try:
        if isinstance(name_or_path, ModelSpec):
            if not overrides:
                return name_or_path
            doc = YamlDoc(name_or_path.model_dump(mode="python"), {}, f"model {name_or_path.name}")
            return validate(ModelSpec, apply_overrides(doc, overrides, MODEL_SET_FLAG))
        text = str(name_or_path)
        path = Path(text)
        looks_like_path = path.suffix in (".yaml", ".yml") or os.sep in text or "/" in text
        if looks_like_path or path.is_file():
            return load_model(ModelSpec, path, overrides, MODEL_SET_FLAG)
        found = catalog.find("models", text)
        if found is not None:
            return load_model(ModelSpec, found, overrides, MODEL_SET_FLAG)
    except (ModelSpecError, LimitError):
        raise   # a file over the loader's limits stays a LimitError
    except ConfigError as exc:
        raise ModelSpecError(exc.problems, header=exc.header) from None
    raise UnknownNameError("model", text, list_models())


#: the prompt of a run given none (``sim run``, :func:`sim.apps.inference.run_llm`), where
#: the model's context allows it
DEFAULT_PROMPT_LEN = 2048


def run_max_tokens(phase: str, prompt_len: int, context_len: int | None = None, new_tokens: int = 128,
                   draft_tokens: int = 0) -> int:
    """The longest sequence a run reaches: a decode step's cached context (``context_len``,
    default the prompt) plus its token and drafts; a prefill's cached prefix plus its prompt;
    a generation's prefill plus its ``new_tokens``."""
    if phase == "decode":
        return (int(context_len) if context_len is not None else int(prompt_len)) + int(draft_tokens) + 1
    past = int(context_len or 0)
    return past + int(prompt_len) + (int(new_tokens) if phase == "generate" else 0)


def default_prompt_len(spec: ModelSpec, phase: str, new_tokens: int = 128, draft_tokens: int = 0,
                       context_len: int | None = None) -> int:
    """The prompt tokens of a run that names none: :data:`DEFAULT_PROMPT_LEN`, or the most
    the model's ``max_context`` leaves room for beside what the run adds to the sequence
    (:func:`run_max_tokens` with no prompt; a decode step's prompt is its context, so a
    given ``context_len`` does not count there).  So ``sim run CHIP tiny`` runs on a
    2,048-token model with its default 128 new tokens (a 1,920-token prompt) instead of
    failing on its context."""
    extra = run_max_tokens(phase, 0, None if phase == "decode" else context_len, new_tokens, draft_tokens)
    return max(1, min(DEFAULT_PROMPT_LEN, int(spec.max_context) - extra))
