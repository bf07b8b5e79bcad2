"""Writers: each takes the Report and returns file contents (writers.py maps each Format to
its writer); output.py puts them on disk."""

from __future__ import annotations

from enum import StrEnum


class MdLayout(StrEnum):
    """report.md's layout (--md)."""

    COMPACT = "compact"  # key facts open, the rest in closed <details> sections, for pull requests
    FULL = "full"  # every section open


MD_LAYOUTS = tuple(m.value for m in MdLayout)


class Format(StrEnum):
    MD = "md"
    JSON = "json"
    CSV = "csv"
    HTML = "html"
    NCU = "ncu"  # ncu_plan.sh and ncu_targets.json: the Nsight Compute plan

    @staticmethod
    def parse(text: str) -> tuple[Format, ...]:
        from nsys_llm_explainer.errors import UsageError

        out = []
        for part in (p.strip().lower() for p in text.split(",")):
            if not part:
                continue
            try:
                out.append(Format(part))
            except ValueError:
                valid = ", ".join(f.value for f in Format)
                raise UsageError(
                    f"--format: unknown format {part!r} (choose from {valid})"
                ) from None
        if not out:
            raise UsageError("--format: no format given")
        return tuple(dict.fromkeys(out))


# Every format, the default of --format and Report.write(): "md,json,csv,html,ncu".
ALL_FORMATS = ",".join(f.value for f in Format)
