"""pyproject's bounds on Inspect AI's dependencies: inspect-ai requires boto3 and s3fs without bounds while capping
what they must agree with (aiobotocore pins botocore to a narrow window, boto3 moves in step with botocore; inspect-ai
caps fsspec, s3fs moves in step with fsspec). Unbounded, pip downloads every newer release of both to find the last
that fits; the bounds must close exactly that gap for the installed inspect-ai and aiobotocore."""

from __future__ import annotations

import tomllib
from importlib.metadata import requires, version

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests.support.data import REPO

EXTRAS = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]


def requirement_of(package: str, dependency: str) -> SpecifierSet:
    """What the installed `package` requires of `dependency` (outside its extras)."""
    for text in requires(package) or []:
        requirement = Requirement(text)
        if requirement.name == dependency and requirement.marker is None:
            return requirement.specifier
    raise AssertionError(f"{package} does not require {dependency}")


def ceiling(specifier: SpecifierSet) -> tuple[Version, bool]:
    """The upper bound of a specifier set and whether it is inclusive (`<=`)."""
    (bound,) = [spec for spec in specifier if spec.operator in ("<", "<=")]
    return Version(bound.version), bound.operator == "<="


def admits_above(specifier: SpecifierSet, limit: Version, inclusive: bool) -> bool:
    """Whether `specifier` lets in a version beyond the limit `limit` (`<= limit` if inclusive, else `< limit`)."""
    top, top_inclusive = ceiling(specifier)
    return top > limit or (top == limit and top_inclusive and not inclusive)


@pytest.mark.parametrize("extra", ["inspect", "dev"])
def test_boto3_and_s3fs_stay_where_inspect_ai_lets_them(extra: str) -> None:
    bounds = {Requirement(text).name: Requirement(text).specifier for text in EXTRAS[extra]}
    # boto3 X.Y.Z needs botocore X.Y.Z or later: its ceiling is aiobotocore's on botocore
    botocore = ceiling(requirement_of("aiobotocore", "botocore"))
    assert not admits_above(bounds["boto3"], *botocore), (bounds["boto3"], botocore)
    # s3fs X pins fsspec X: its ceiling is inspect-ai's on fsspec
    fsspec = ceiling(requirement_of("inspect_ai", "fsspec"))
    assert not admits_above(bounds["s3fs"], *fsspec), (bounds["s3fs"], fsspec)
    # and the releases installed now satisfy them
    assert version("boto3") in bounds["boto3"] and version("s3fs") in bounds["s3fs"]
