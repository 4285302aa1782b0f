"""axe-core in a Playwright page: the serious and critical accessibility violations it finds.

axe-core comes from the npm registry, verified by its published integrity
(``course_lib.course.web_assets.AXE_CORE``), and is injected into the page by the test, so no
page of the site loads it."""

from __future__ import annotations

from course_lib.course.web_assets import AXE_CORE, npm_folder

BLOCKING = ("serious", "critical")


def axe_violations(page, *, exclude: tuple[str, ...] = ()) -> list[str]:
    """Run axe-core (WCAG 2 A and AA rules) on ``page``; one line per serious or critical
    violation: the rule, its impact, and up to three of the elements it names."""
    page.add_script_tag(path=str(npm_folder(AXE_CORE) / "axe.min.js"))
    result = page.evaluate(
        """(exclude) => axe.run({include: [document], exclude: exclude.map((s) => [s])},
               {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]},
                resultTypes: ["violations"]})""", list(exclude))
    found = []
    for violation in result["violations"]:
        if violation["impact"] in BLOCKING:
            targets = [", ".join(node["target"]) for node in violation["nodes"][:3]]
            found.append(f"{violation['id']} ({violation['impact']}, "
                         f"{len(violation['nodes'])} elements): {targets}")
    return found
