"""What ``course site`` and ``course slides`` print: where the output is, what it took."""

from __future__ import annotations

import time


def publish_cli(args) -> int:
    if args.command == "site":
        from course_lib.course.site import build_site

        report = build_site(args.profile, rerun=args.rerun)
        ran = {number: s for number, s in report.executed.items() if s is not None}
        print(f"[site] executed {len(ran)} lesson(s) in the {args.profile} profile"
              + (": " + ", ".join(f"{n} {s:.0f} s" for n, s in ran.items()) if ran else
                 " (all reused from the cache)"))
        print(f"[site] built in {report.build_s:.0f} s, {report.size_bytes / 2**20:.1f} MiB, "
              f"no reference to another host. Open {report.html / 'index.html'}")
        return 0
    from course_lib.course.slides import build_slides

    start = time.perf_counter()
    out = build_slides(args.profile, args.lessons or None)
    print(f"[slides] built in {time.perf_counter() - start:.0f} s. Open {out / 'index.html'}")
    return 0
