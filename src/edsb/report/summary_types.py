"""The typed summary of a run: what `summary.json` holds, what `results.json` gives per variant after its run card,
and what every renderer reads (tables, figures, the HTML page), as attributes rather than string keys.

A field a variant does not have (the rates of a variant with no judged run) keeps its default and is left out of the
JSON, as the summary has always been written: dump with `exclude_unset=True`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from edsb.scoring.metrics import TOTAL


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CellResult(_Strict):
    """One cell of the paper's tables: a variant's runs of one tag at one distraction level (or `Total`)."""

    runs: int
    passes: int
    errors: int
    success_rate: float = Field(description="mean of passed, rounded to 2 decimals as the paper does")
    error_rate: float
    execution_rate: float = Field(description="1 - error rate, rounded to 2 decimals")
    prompt_tokens: float = Field(description="mean per run, an errored run counting 0 (the paper's convention)")
    completion_tokens: float
    success_interval: tuple[float, float] = Field(description="Wilson 95% interval, 4 decimals")
    execution_interval: tuple[float, float]


class CaseCounts(_Strict):
    """A case's judged runs in one variant."""

    runs: int
    passes: int
    errors: int


class Power(_Strict):
    """The power of a paired comparison of success against another run of this design (docs/statistics.md)."""

    alpha: float
    power: float
    note: str | None = Field(description="why the figures are missing (None when they are not)")
    cases: int
    cells: int = Field(description="case × level cells run")
    repeats: int = Field(description="the most runs of one cell")
    runs: int
    design_effect: float | None
    intra_case_correlation: float | None
    minimum_detectable_difference: float | None = Field(description="at this run's design (None: not estimable)")
    by_repeats: dict[str, float | None] = Field(description="repeats per cell -> minimum detectable difference")


class SamplerCell(_Strict):
    """The judged PI runs of one distraction level (or `Total`) and the failures that are sampler misses."""

    sampler: str = Field(description="the sampler(s) that placed positions, `/`-joined (`-`: none got that far)")
    runs: int
    failures: int
    errors: int = Field(description="execution errors (no failure: the row says so)")
    sampler_misses: int = Field(description="failures the optimal sampler would have passed")


class ModuleTokens(_Strict):
    prompt: int
    completion: int
    # Written only where the provider reported them, so a summary reads as it did before.
    cached: int = Field(
        default=0, exclude_if=lambda count: count == 0, description="of the prompt tokens, those read from the cache"
    )
    cache_write: int = Field(
        default=0, exclude_if=lambda count: count == 0, description="of the prompt tokens, those written to the cache"
    )


class Tokens(_Strict):
    """Every token the variant's runs used, incomplete runs included."""

    total_prompt: int
    total_completion: int
    by_module: dict[str, ModuleTokens] = Field(description="narrator, event_parser -> tokens")
    mean_prompt_every_run: float = Field(description="mean over every judged run, errored ones included")
    mean_completion_every_run: float
    billed_usd: float | None = Field(
        default=None, exclude_if=lambda value: value is None, description="what the provider billed, where it says"
    )


class VariantSummary(_Strict):
    """A variant's results: the summary of `edsb report` (statistics, power, tokens, reasons, per case). `runs`,
    `incomplete` and `incomplete_kinds` are always there, the others when the variant has judged runs (the
    incomplete reasons: when some run is incomplete)."""

    runs: int = Field(description="judged runs")
    incomplete: int
    incomplete_kinds: dict[str, int]
    incomplete_reasons: dict[str, int] = Field(default={}, description="what incomplete runs said, most frequent first")
    incomplete_reasons_other_runs: int = Field(default=0, description="incomplete runs with a reason left out")
    success_rate: float | None = None
    execution_rate: float | None = None
    success_interval: tuple[float, float] | None = None
    execution_interval: tuple[float, float] | None = None
    success_se_clustered: float | None = Field(default=None, description="CR1, clustered by case (None: one case)")
    execution_se_clustered: float | None = None
    by_tag: dict[str, CellResult] = Field(default={}, description="tag -> its cell over every level")
    by_distraction: dict[str, CellResult] = Field(default={}, description="level -> its cell over every tag")
    cells: dict[str, dict[str, CellResult]] = Field(
        default={}, description="tag (Total, OA, RC, SS, PI) -> distraction level (Total, 0, 1, 2) -> cell"
    )
    by_case: dict[str, CaseCounts] = Field(default={}, description="case id -> its judged runs")
    pass_hat_k: dict[str, float | None] = Field(default={}, description="k -> pass^k, for k up to the repeats run")
    power: Power | None = None
    error_kinds: dict[str, int] = Field(default={}, description="execution errors by kind")
    error_reasons: dict[str, int] = Field(default={}, description="`<kind>: <message>` -> runs, most frequent first")
    error_reasons_other_runs: int = 0
    failure_reasons: dict[str, int] = Field(default={}, description="the judge's reason -> runs, most frequent first")
    failure_reasons_other_runs: int = 0
    pi_sampler: dict[str, SamplerCell] = Field(default={}, description="PI level (and Total) -> sampler misses")
    tokens: Tokens | None = None

    @property
    def total(self) -> CellResult | None:
        """The cell over every tag and level (None without judged runs)."""
        return self.cells.get(TOTAL, {}).get(TOTAL)


class SummaryConfig(_Strict):
    """What `edsb run` records in summary.json about itself."""

    model: str
    runs_planned: int
    perturb: int | None = Field(default=None, description="the perturbation seed, when not 0")


class RunSummary(_Strict):
    """The summary of a run directory: every variant's, in the paper's order; a perturbed run's label; notes for
    the reader (a torn line left out); and, in summary.json, what `edsb run` planned."""

    variants: dict[str, VariantSummary]
    perturbation: str | None = None
    notes: list[str] = []
    config: SummaryConfig | None = None

    def to_json(self) -> dict[str, object]:
        """The summary as summary.json holds it: fields a run does not have are left out."""
        return self.model_dump(mode="json", exclude_unset=True)
