"""How a setting is declared: once, as a pydantic field that also carries its help, its panel, its option names and
its config-file keys. `setting` writes that declaration; `declared` reads it back for every place that needs it (the
options of `edsb run` and `edsb check-model`, the keys a config file takes, the Inspect tasks' parameters, the hints
of a refused resume)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any, cast, get_args, get_origin

import annotated_types
from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonDict
from pydantic_core import PydanticUndefined

# The key of a field's `json_schema_extra` that holds what is not pydantic's own.
_KEY = "edsb"
RUN, CHECK_MODEL = "run", "check-model"


class Group(StrEnum):
    """The groups of a run's settings, in the order `edsb run --help` shows them as panels."""

    MODEL = "Model"
    SELECTION = "Selection"
    GENERATION = "Generation"
    SAMPLER = "Sampler and sandbox"
    LIMITS = "Limits"
    OUTPUT = "Output"


def setting(
    default: Any = PydanticUndefined,
    *,
    help: str,
    group: Group,
    metavar: str | None = None,
    option: str | None = None,
    keys: Iterable[str] = (),
    commands: Iterable[str] = (RUN,),
    task: bool = False,
    in_file: bool = True,
    identity: bool = False,
    **bounds: Any,
) -> Any:
    """A field of the settings tree. `help` may name `{default}` and `{choices}`; `option` is the flag (default
    `--field-name`; a `--no-` flag turns a default-true field off); `keys` are older config-file spellings; `task`
    makes it a parameter of the Inspect tasks; `in_file: False` keeps it out of config files; `identity` makes it
    part of a run's identity (it changes what a run produces: a directory resumes only with the same value).
    `bounds` are pydantic's (`ge`, `gt`, `le`, `default_factory`), which the command line enforces as well."""
    extra = {
        "group": str(group),
        "metavar": metavar,
        "option": option,
        "keys": list(keys),
        "commands": list(commands),
        "task": task,
        "in_file": in_file,
        "identity": identity,
    }
    return Field(default, description=help, json_schema_extra={_KEY: cast(JsonDict, extra)}, **bounds)


@dataclass(frozen=True)
class Declared:
    """One declared setting as its readers see it; `name` is its field, `path` where it sits in the tree."""

    name: str
    path: tuple[str, ...]
    info: FieldInfo

    @property
    def _extra(self) -> dict[str, Any]:
        extra = self.info.json_schema_extra
        assert isinstance(extra, dict)
        meta = extra[_KEY]
        assert isinstance(meta, dict)
        return meta

    @property
    def group(self) -> Group:
        return Group(self._extra["group"])

    @property
    def option(self) -> str:
        return self._extra["option"] or "--" + self.name.replace("_", "-")

    @property
    def negated(self) -> bool:
        """A `--no-` flag that sets its field to false."""
        return self.option.startswith("--no-")

    @property
    def metavar(self) -> str | None:
        return self._extra["metavar"]

    @property
    def commands(self) -> tuple[str, ...]:
        return tuple(self._extra["commands"])

    @property
    def task_name(self) -> str | None:
        """Its name as an Inspect task parameter (the field's for a `--no-` flag), None if it is not one."""
        if not self._extra["task"]:
            return None
        return self.name if self.negated else self.option.removeprefix("--").replace("-", "_")

    @property
    def in_file(self) -> bool:
        return bool(self._extra["in_file"])

    @property
    def identity(self) -> bool:
        return bool(self._extra["identity"])

    @property
    def keys(self) -> tuple[str, ...]:
        """Every config-file key that sets it, with `-` or `_` alike: the field, the option, older names."""
        names = (self.name, self.option.removeprefix("--"), *self._extra["keys"])
        return tuple(dict.fromkeys(spelling for n in names for spelling in (n.replace("-", "_"), n.replace("_", "-"))))

    @property
    def default(self) -> Any:
        return self.info.get_default(call_default_factory=True)

    def bound(self, kind: type[annotated_types.BaseMetadata]) -> Any:
        """The field's `ge`, `gt` or `le` (None: unbounded)."""
        found = [item for item in self.info.metadata if isinstance(item, kind)]
        return getattr(found[0], kind.__name__.lower()) if found else None

    @property
    def help(self) -> str:
        """The help text with its default and choices filled in."""
        text = self.info.description or ""
        return text.format(default=shown(self.default), choices=one_of(self.choices) if self.choices else "")

    @property
    def choices(self) -> type[Enum] | None:
        """The enum a value (or each value of a list) is one of."""
        for kind in _bare(self.info.annotation):
            if isinstance(kind, type) and issubclass(kind, Enum):
                return kind
        return None


def _bare(annotation: Any) -> Iterator[Any]:
    """The types inside `X | None` and `list[X]`."""
    if get_origin(annotation) is None:
        yield annotation
        return
    for arg in get_args(annotation):
        yield from _bare(arg)


def declared(model: type[BaseModel], path: tuple[str, ...] = ()) -> dict[str, Declared]:
    """Every declared setting of a settings model and of the settings models in it, by field name."""
    found: dict[str, Declared] = {}
    for name, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            found.update(declared(kind, (*path, name)))
        elif isinstance(info.json_schema_extra, dict) and _KEY in info.json_schema_extra:
            found[name] = Declared(name, (*path, name), info)
    return found


def shown(value: Any) -> str:
    """A default as a help text shows it: `0.1`, `0-2`, `none`, `on`."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        run = (
            len(value) > 2 and all(isinstance(v, int) for v in value) and value == list(range(value[0], value[-1] + 1))
        )
        return f"{value[0]}-{value[-1]}" if run else ",".join(str(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def one_of(choices: Iterable[Enum | str]) -> str:
    """Choices as words a help text can wrap between (`table, markdown or html`), never mid-word."""
    names = [str(c.value if isinstance(c, Enum) else c) for c in choices]
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]


def spellings(*models: type[BaseModel]) -> dict[str, tuple[Declared, bool]]:
    """Every key that sets a declared setting of these models (the field, the option, older names; `-` or `_`),
    with whether the key says the opposite of the field (`no_cache` sets `cache`)."""
    found: dict[str, tuple[Declared, bool]] = {}
    for model in models:
        for setting_ in declared(model).values():
            flag = setting_.option.removeprefix("--").replace("-", "_")
            for key in setting_.keys:
                found[key] = (setting_, setting_.negated and key.replace("-", "_") == flag)
    return found
