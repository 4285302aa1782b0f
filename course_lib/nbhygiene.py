"""The policy for committed notebooks, checked by the tests and applied by
``course clean-notebooks``.

Committed notebooks carry no outputs and no execution counts (learners produce their own; the
repository stays small and diffs stay readable), declare the course kernel, and keep only the
metadata the course uses: notebook-level ``kernelspec`` and ``language_info.name``, cell-level
``tags`` and ``nbgrader`` (and Jupyter's ``editable``/``deletable``/``jupyter`` view flags).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from course_lib import KERNEL_NAME

KERNELSPEC = {
    "name": KERNEL_NAME,
    "display_name": "Python (attention course)",
    "language": "python",
}
LANGUAGE_INFO = {"name": "python"}
NOTEBOOK_METADATA_KEYS = {"kernelspec", "language_info"}
CELL_METADATA_KEYS = {"tags", "nbgrader", "editable", "deletable", "jupyter"}


def problems(nb: Any) -> list[str]:
    """Every way ``nb`` (an nbformat NotebookNode) breaks the policy; empty when clean."""
    found = []
    if nb.get("nbformat") != 4:
        found.append(f"nbformat is {nb.get('nbformat')}, expected 4")
    metadata = nb.get("metadata", {})
    extra = set(metadata) - NOTEBOOK_METADATA_KEYS
    if extra:
        found.append(f"notebook metadata has stray keys {sorted(extra)}")
    if dict(metadata.get("kernelspec", {})) != KERNELSPEC:
        found.append(f"kernelspec is {dict(metadata.get('kernelspec', {}))}, expected {KERNELSPEC}")
    if dict(metadata.get("language_info", LANGUAGE_INFO)) != LANGUAGE_INFO:
        found.append(f"language_info should be {LANGUAGE_INFO} (no version details)")
    for index, cell in enumerate(nb.get("cells", [])):
        where = f"cell {index} ({cell.get('cell_type')})"
        stray = set(cell.get("metadata", {})) - CELL_METADATA_KEYS
        if stray:
            found.append(f"{where} has stray metadata {sorted(stray)}")
        if cell.get("cell_type") == "code":
            if cell.get("outputs"):
                found.append(f"{where} has outputs")
            if cell.get("execution_count") is not None:
                found.append(f"{where} has an execution count")
        if not "".join(cell.get("source", "")).strip():
            found.append(f"{where} is empty")
    return found


def clean(nb: Any) -> Any:
    """Bring ``nb`` in line with the policy (in place) and return it. Empty cells are dropped."""
    nb["metadata"] = {"kernelspec": dict(KERNELSPEC), "language_info": dict(LANGUAGE_INFO)}
    nb["cells"] = [cell for cell in nb["cells"] if "".join(cell.get("source", "")).strip()]
    for cell in nb["cells"]:
        cell["metadata"] = {k: v for k, v in cell.get("metadata", {}).items()
                            if k in CELL_METADATA_KEYS}
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    return nb


def notebook_paths(paths: list[str | Path]) -> list[Path]:
    """Every ``.ipynb`` under the given files and folders, checkpoints skipped, sorted."""
    found: set[Path] = set()
    for path in map(Path, paths):
        candidates = [path] if path.is_file() else path.rglob("*.ipynb")
        found.update(p for p in candidates
                     if p.suffix == ".ipynb" and ".ipynb_checkpoints" not in p.parts)
    return sorted(found)


def clean_files(paths: list[str | Path]) -> list[Path]:
    """Clean every notebook under ``paths`` in place; returns the ones that changed."""
    import nbformat

    changed = []
    for path in notebook_paths(paths):
        nb = nbformat.read(path, as_version=4)
        if problems(nb):
            nbformat.write(clean(nb), path)
            changed.append(path)
    return changed
