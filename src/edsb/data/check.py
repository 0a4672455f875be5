"""`edsb data check`: every benchmark file parsed into its model, checksums compared with the pinned manifest."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from edsb.data.benchmark import Benchmark
from edsb.data.manifest import OPTIONAL_FILES, sha256_file, verify_tree
from edsb.data.models import SCENES
from edsb.errors import DataError


@dataclass
class DataReport:
    root: Path
    cases: int = 0
    cases_by_tag: dict[str, int] = field(default_factory=dict)
    objects: dict[str, int] = field(default_factory=dict)
    descriptions: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_data(benchmark: Benchmark) -> DataReport:
    """Validate everything the benchmark reads; collect one line per problem instead of stopping at the first."""
    report = DataReport(root=benchmark.root)
    try:
        cases = benchmark.cases
        report.cases = len(cases)
        for case in cases.values():
            for tag in case.tags:
                report.cases_by_tag[tag] = report.cases_by_tag.get(tag, 0) + 1
    except DataError as exc:
        report.problems.append(str(exc))
    for scene in SCENES:
        for load in (benchmark.scene_bounds, benchmark.grid_settings):
            try:
                load(scene)
            except DataError as exc:
                report.problems.append(str(exc))
        try:
            report.objects[scene] = len(benchmark.object_records(scene))
        except DataError as exc:
            report.problems.append(str(exc))
        count = len(benchmark.description_files(scene))
        report.descriptions[scene] = count
        if count == 0:
            report.problems.append(f"{benchmark.scene_dir(scene)}: no pre-generated narrative descriptions")
    # Checksums last: a parse error above is the more useful message for the same file.
    already = {line.split(":", 1)[0] for line in report.problems}
    for line in verify_tree(benchmark.root):
        if line.split(":", 1)[0] in already:
            continue
        if line.endswith("missing"):
            report.problems.append(line)
        else:
            report.modified.append(line)
    for name, expected in OPTIONAL_FILES.items():
        path = benchmark.root / name
        if path.is_file() and sha256_file(path) != expected:
            report.modified.append(f"{path}: sha256 differs from the pinned manifest (modified or corrupt)")
    return report
