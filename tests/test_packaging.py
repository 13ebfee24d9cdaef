"""The package metadata in the current format: an SPDX license expression and its file."""

from __future__ import annotations

import pathlib
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_license_is_an_spdx_expression_with_its_file():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    files = project["project"]["license-files"]
    assert files and all((ROOT / f).is_file() for f in files)
    assert "Apache License" in (ROOT / files[0]).read_text()
    assert not any(c.startswith("License ::") for c in project["project"]["classifiers"])
    requires = project["build-system"]["requires"]
    assert any(r.startswith("setuptools>=77") for r in requires)  # PEP 639 support
