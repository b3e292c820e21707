"""Human lines for `helix export` / `helix import` (the CLI prints them; --json prints the dict)."""

from __future__ import annotations

from typing import Any


def _export_lines(s: dict[str, Any]) -> str:
    return (f"exported {s['genes']} indexed chunks ({s['retired_genes']} retired, {s['with_embeddings']} with embeddings, "
            f"{s['spans']} spans), {s['files']} files, {s['symbols']} symbols, {s['links']} co-activation links, "
            f"{s['sources']} sources, {s['sessions']} sessions, {s['activity']} activity rows, "
            f"{s['vector_changes']} vector changes to {s['path']} ({s['bytes']} bytes, "
            f"sha256 {s['payload_sha256'][:12]}…)\n"
            "roots (paths travel relative to these; remap them on import with --remap NAME=FOLDER): "
            + (", ".join(f"{r['name']}={r['path']}" for r in s["roots"]) or "none"))


def format_summary(summary: dict[str, Any]) -> str:
    if "payload_sha256" in summary:
        return _export_lines(summary)
    g, f, k = summary["genes"], summary["files"], summary["links"]
    if summary["dry_run"]:
        head = "dry run, nothing written: " + ("the import would change the genome" if summary["would_change"]
                                               else "the import would change nothing")
    else:
        head = "imported: the genome changed" if summary["changed"] else "imported: nothing to change"
    if summary.get("converted_from"):
        head += f" (converted from export format {summary['converted_from']})"
    sym, ses, act = summary["symbols"], summary["sessions"], summary["activity"]
    lines = [
        f"{head} (strategy {summary['strategy']})",
        f"chunks    new {g['new']}, skipped {g['skipped']}, overwritten {g['overwritten']}"
        + (f", outdated {g['outdated']} (of files this index holds in a newer version)" if g.get("outdated") else "")
        + f"; spans added {summary['spans_added']}",
        f"files     new {f['new']}, skipped {f['skipped']}, overwritten {f['overwritten']}",
        f"symbols   new {sym['new']}, kept {sym['kept']}, dangling {sym['dangling']}"
        + (f", outdated {sym['outdated']}" if sym.get("outdated") else ""),
        f"links     new {k['new']}, updated {k['updated']}, kept {k['kept']}, dangling {k['dangling']}",
        f"sessions  new {ses['new']}, updated {ses['updated']}, kept {ses['kept']}; "
        f"activity new {act['new']}, kept {act['kept']}",
    ]
    for root in summary["roots"]:
        where = (f"refused: {root['refused']}" if root["refused"]
                 else "kept as the team's shared name" if root.get("shared") else f"-> {root['local']}")
        lines.append(f"root {root['name']} (was {root['exported']}) {where}")
    if summary["sources_added"]:
        lines.append("sources added (a running backend indexes and watches them now, a stopped one when it starts): "
                     + ", ".join(summary["sources_added"]))
    if summary.get("to_reembed"):
        lines.append(f"vectors   {summary['to_reembed']} chunks hold vectors of another embedding model than this "
                     f"genome's ({summary['vector_model']}): a running backend re-embeds them within a minute, "
                     "a stopped one when it starts")
    if summary.get("vectors_left_out"):
        left, again = summary["vectors_left_out"], summary["embedded_again"]
        lines.append(f"vectors   {left} chunks came with another embedding model's vectors than this team genome's "
                     f"({summary['vector_model']}): " + (f"{again} embedded again with it" if again else
                                                         "not embedded here (no model, or not the team's): "
                                                         "POST /admin/kv-backfill on a team backend embeds them"))
    refused = summary["refused"]
    if refused["total"]:
        lines.append(f"refused {refused['total']} record(s): "
                     + "; ".join(f"{n} × {why}" for why, n in refused["by_reason"].items()))
        lines.extend(f"  {r['record']} {r['id']}: {r['reason']}" for r in refused["records"])
    for outcome, ids in summary["examples"].items():
        if ids:
            lines.append(f"e.g. {outcome}: " + ", ".join(ids))
    return "\n".join(lines)
