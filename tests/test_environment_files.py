"""environment.yml (conda, Binder) and pyproject.toml (pip) must describe the same environment."""

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parent.parent
# Packages whose conda-forge name differs from the PyPI name.
CONDA_TO_PYPI = {"pytorch": "torch"}


def pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def parse_conda(spec: str) -> tuple[str, SpecifierSet]:
    # conda specs such as "numpy>=1.24" read the same as PEP 440 for the forms this file uses.
    requirement = Requirement(spec)
    return CONDA_TO_PYPI.get(requirement.name, requirement.name), requirement.specifier


def environment():
    data = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda, pip = {}, {}
    for entry in data["dependencies"]:
        if isinstance(entry, dict):
            for line in entry["pip"]:
                if not line.startswith("-"):
                    requirement = Requirement(line)
                    pip[requirement.name] = requirement.specifier
        else:
            name, spec = parse_conda(entry)
            conda[name] = spec
    return data, conda, pip


def test_same_packages_and_same_bounds():
    declared = {Requirement(r).name: Requirement(r).specifier
                for r in pyproject()["project"]["dependencies"]}
    _, conda, pip = environment()
    listed = {k: v for k, v in {**conda, **pip}.items() if k not in ("python", "pip")}
    assert set(listed) == set(declared), (
        f"only in pyproject.toml: {sorted(set(declared) - set(listed))}; "
        f"only in environment.yml: {sorted(set(listed) - set(declared))}"
    )
    for name, spec in declared.items():
        assert listed[name] == spec, f"{name}: pyproject {spec} vs environment.yml {listed[name]}"


def test_no_package_is_listed_twice():
    _, conda, pip = environment()
    assert not set(conda) & set(pip)


def test_python_bound_matches_requires_python():
    _, conda, _ = environment()
    assert conda["python"] == SpecifierSet(pyproject()["project"]["requires-python"])


def test_environment_installs_the_course_package_from_conda_forge():
    data, _, _ = environment()
    assert data["channels"] == ["conda-forge"]
    pip_lines = next(e["pip"] for e in data["dependencies"] if isinstance(e, dict))
    assert "-e ." in pip_lines


def test_dependencies_are_ranges_not_pins():
    for text in pyproject()["project"]["dependencies"]:
        requirement = Requirement(text)
        operators = {spec.operator for spec in requirement.specifier}
        if requirement.name == "pyrealb":  # its output (the corpus) depends on the version
            assert operators == {"=="}
        else:
            assert ">=" in operators and "==" not in operators, text
