"""Guard a long benchmark run: warn about, or abort, runs whose numbers would be wrong.

    python benchmarks/monitor.py [--results FILE] [--hang-after S] [--ollama URL] [--allow MODEL ...]
                                 [--target MODEL] [--genome PATH] [--on-problem warn|abort]
                                 [--interval S] [--report FILE] -- <command...>

Before the command starts and while it runs, it checks for:

  dual-load   a model outside the allow-list resident in Ollama beside the target model
              (GET {ollama}/api/ps): two models share the GPU, so timings and even quality
              are not those of the target alone. Checked when --ollama, --target or --allow is given.
  hung        the results file has not grown (size or mtime) for --hang-after seconds.
  contamination
              the genome changed under the run (PRAGMA data_version, the file's / WAL's mtime,
              or the meta table's generation): another process wrote to it, so the run did not
              measure one state. Note that /context calls record co-activation (a write): watch a
              genome the benchmark itself does not query through /context, or expect this.

--on-problem warn (default) prints the problem to stderr and lets the run finish; abort stops
the command and its whole process tree (psutil; works on Windows too). The dual-load check
also runs before the command starts: with abort, the command is never started.

Exit code: 0 clean run; 1 the command failed (no problem seen); 3 hung; 4 dual-load;
5 contamination (the first problem seen decides); 2 bad arguments; 130 interrupted.
"""

from __future__ import annotations

import _checkout  # noqa: F401  (this checkout's helix_context, not an installed one)

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))  # helix_context from this checkout when it is not installed

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_HUNG, EXIT_DUAL_LOAD, EXIT_CONTAMINATED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 5, 130
PROBLEM_CODES = {"hung": EXIT_HUNG, "dual_load": EXIT_DUAL_LOAD, "contamination": EXIT_CONTAMINATED}


def say(message: str) -> None:
    print(f"[monitor] {message}", file=sys.stderr, flush=True)


# ── Ollama: resident models ──


@dataclass(frozen=True)
class Resident:
    name: str
    size: int
    size_vram: int


def ollama_resident(url: str, timeout_s: float = 3.0) -> list[Resident]:
    """GET {url}/api/ps; raises OSError / ValueError when Ollama is not there or answers nonsense."""
    with urllib.request.urlopen(url.rstrip("/") + "/api/ps", timeout=timeout_s) as response:
        data = json.loads(response.read().decode("utf-8"))
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list):
        raise ValueError("answer has no 'models' list")
    out = []
    for item in models:
        if isinstance(item, dict):
            out.append(Resident(str(item.get("name") or item.get("model") or "?"), int(item.get("size") or 0),
                                int(item.get("size_vram") or 0)))
    return out


def model_matches(name: str, pattern: str) -> bool:
    """'llama3' matches 'llama3:latest' and 'llama3:8b'; 'llama3:8b' matches only itself."""
    name, pattern = name.lower(), pattern.lower()
    if name == pattern:
        return True
    if ":" not in pattern:
        return name.split(":", 1)[0] == pattern
    if pattern.endswith(":latest"):
        return name == pattern[: -len(":latest")]
    return False


def dual_load(resident: list[Resident], target: str | None, allow: list[str]) -> list[Resident]:
    """Models resident beside the target that are neither the target nor allowed.

    Without a target, every resident model outside the allow-list counts.
    With a target that is not resident, nothing shares the GPU with it yet: no problem.
    """
    allowed = [*allow, *([target] if target else [])]
    if target and not any(model_matches(r.name, target) for r in resident):
        return []
    return [r for r in resident if not any(model_matches(r.name, a) for a in allowed)]


# ── genome: change markers ──


class GenomeWatch:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = None
        try:
            from helix_context.genome import portable_sql

            self._markers = portable_sql.change_markers
            self.conn = portable_sql.open_readonly(str(path))
        except Exception as exc:  # no helix_context importable, or not a database: mtimes still work
            say(f"genome {path}: reading change markers failed ({exc}); watching file times only")
        self.baseline = self.state()

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = {}
        for suffix in ("", "-wal"):
            p = self.path.with_name(self.path.name + suffix)
            try:
                st = p.stat()
                # opening a WAL genome creates an empty -wal: only a WAL with frames in it means a write
                state[f"file{suffix}"] = (st.st_mtime_ns, st.st_size) if st.st_size or not suffix else None
            except OSError:
                state[f"file{suffix}"] = None
        if self.conn is not None:
            try:
                state.update(self._markers(self.conn))
            except Exception as exc:  # busy or locked for a moment: keep the last values
                state["read_error"] = str(exc)
        return state

    def changes(self) -> list[str]:
        now = self.state()
        changed = []
        for key, before in self.baseline.items():
            if key == "read_error" or key not in now:
                continue
            if now[key] != before:
                changed.append(f"{key} {before} -> {now[key]}")
        return changed

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


# ── the child's process tree ──


def start(command: list[str]) -> subprocess.Popen:
    kwargs: dict[str, Any] = {}
    if os.name == "nt":
        kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]  # Windows only
    else:
        kwargs["start_new_session"] = True  # Ctrl-C in the terminal reaches us, and we stop the tree
    return subprocess.Popen(command, **kwargs)


def kill_tree(pid: int, grace_s: float = 3.0) -> list[int]:
    """Terminate a process and all its descendants, then kill what is left. Returns the pids stopped."""
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return []
    try:
        procs = [*root.children(recursive=True), root]
    except psutil.NoSuchProcess:
        procs = [root]
    for p in procs:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _gone, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=grace_s)
    return [p.pid for p in procs]


# ── the watch loop ──


@dataclass
class Report:
    command: list[str]
    on_problem: str
    events: list[dict[str, Any]] = field(default_factory=list)
    exit_code: int = EXIT_OK
    child_exit: int | None = None
    aborted: bool = False
    started: bool = False
    seconds: float = 0.0

    def problem(self, kind: str, detail: str) -> bool:
        """Record a problem; True when it is new (first of its kind)."""
        first = not any(e["kind"] == kind for e in self.events)
        self.events.append({"at": time.time(), "kind": kind, "detail": detail})
        if self.exit_code == EXIT_OK:
            self.exit_code = PROBLEM_CODES[kind]
        return first


def check_ollama(args: argparse.Namespace, report: Report, warned: dict[str, bool]) -> str | None:
    try:
        resident = ollama_resident(args.ollama)
    except (OSError, ValueError) as exc:
        if not warned.get("ollama"):
            say(f"cannot read {args.ollama}/api/ps ({exc}); dual-load not checked until it answers")
            warned["ollama"] = True
        return None
    warned["ollama"] = False
    extra = dual_load(resident, args.target, args.allow)
    if not extra:
        return None
    names = ", ".join(f"{r.name} ({r.size_vram / 2**30:.1f} GiB VRAM)" for r in extra)
    beside = f"beside {args.target}" if args.target else "outside the allow-list"
    return f"dual-load: {names} resident {beside}"


def run(args: argparse.Namespace) -> Report:
    report = Report(command=args.command, on_problem=args.on_problem)
    abort = args.on_problem == "abort"
    watch_ollama = bool(args.ollama_given or args.target or args.allow)
    warned: dict[str, bool] = {}
    started_at = time.monotonic()

    if watch_ollama:
        problem = check_ollama(args, report, warned)
        if problem:
            report.problem("dual_load", problem)
            say(("ABORT before start: " if abort else "WARNING: ") + problem)
            if abort:
                report.aborted = True
                return report

    genome = GenomeWatch(Path(args.genome)) if args.genome else None
    results = Path(args.results) if args.results else None

    def results_state() -> tuple[int, int] | None:
        try:
            st = results.stat()  # type: ignore[union-attr]  # only called when --results was given
            return st.st_size, st.st_mtime_ns
        except OSError:
            return None

    child = start(args.command)
    report.started = True
    say(f"started pid {child.pid}: {' '.join(args.command)}")
    last_results = results_state() if results else None
    last_growth = time.monotonic()
    next_ollama = time.monotonic() + args.ollama_interval
    try:
        while True:
            try:
                code = child.wait(timeout=args.interval)
            except subprocess.TimeoutExpired:
                code = None
            if code is not None:
                report.child_exit = code
                break
            now = time.monotonic()
            problem: tuple[str, str] | None = None
            if results is not None:
                current = results_state()
                if current != last_results:
                    last_results, last_growth = current, now
                elif now - last_growth >= args.hang_after:
                    problem = ("hung", f"hung: {results} has not grown for {now - last_growth:.0f} s "
                                       f"(--hang-after {args.hang_after:g})")
            if problem is None and genome is not None:
                changed = genome.changes()
                if changed:
                    problem = ("contamination", f"contamination: genome {genome.path} changed during the run "
                                                f"({'; '.join(changed)})")
                    genome.baseline = genome.state()  # report each further change once
            if problem is None and watch_ollama and now >= next_ollama:
                next_ollama = now + args.ollama_interval
                found = check_ollama(args, report, warned)
                if found:
                    problem = ("dual_load", found)
            if problem is not None:
                kind, detail = problem
                first = report.problem(kind, detail)
                if abort:
                    say(f"ABORT: {detail}; stopping the command's process tree")
                    kill_tree(child.pid)
                    report.child_exit = child.wait()
                    report.aborted = True
                    break
                if first or kind == "contamination":
                    say(f"WARNING: {detail}")
                if kind == "hung":
                    last_growth = now  # warn again only after another full --hang-after
    except KeyboardInterrupt:
        say("interrupted: stopping the command's process tree")
        kill_tree(child.pid)
        report.child_exit = child.wait()
        report.exit_code = EXIT_INTERRUPTED
    finally:
        if genome is not None:
            genome.close()
    report.seconds = round(time.monotonic() - started_at, 3)
    if report.exit_code == EXIT_OK and report.child_exit not in (0, None):
        report.exit_code = EXIT_FAILED
    return report


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" in argv:
        split = argv.index("--")
        own, command = argv[:split], argv[split + 1:]
    else:
        own, command = argv, []
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", help="the file the benchmark appends results to (hang check)")
    parser.add_argument("--hang-after", type=float, default=300.0, metavar="S",
                        help="seconds without results growth that count as hung (default 300)")
    parser.add_argument("--ollama", metavar="URL", help="Ollama base URL (default http://127.0.0.1:11434)")
    parser.add_argument("--allow", nargs="*", default=[], metavar="MODEL",
                        help="models allowed to be resident beside the target")
    parser.add_argument("--target", metavar="MODEL", help="the model the benchmark measures")
    parser.add_argument("--genome", metavar="PATH", help="genome.db to watch for writes during the run")
    parser.add_argument("--on-problem", choices=("warn", "abort"), default="warn")
    parser.add_argument("--interval", type=float, default=1.0, metavar="S", help="check period (default 1 s)")
    parser.add_argument("--ollama-interval", type=float, default=5.0, metavar="S",
                        help="how often /api/ps is polled during the run (default 5 s)")
    parser.add_argument("--report", metavar="FILE", help="write what happened as JSON")
    args = parser.parse_args(own)
    if not command:
        parser.error("give the command to run after --, e.g. monitor.py --results out.jsonl -- python bench.py")
    if args.hang_after <= 0 or args.interval <= 0 or args.ollama_interval <= 0:
        parser.error("--hang-after, --interval and --ollama-interval must be positive")
    args.command = command
    args.ollama_given = args.ollama is not None
    args.ollama = args.ollama or "http://127.0.0.1:11434"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    if args.report:
        Path(args.report).write_text(json.dumps(report.__dict__, indent=2), encoding="utf-8")
    kinds = sorted({e["kind"] for e in report.events})
    if report.exit_code == EXIT_OK:
        say(f"clean run: exit 0 in {report.seconds:.1f} s")
    elif report.exit_code == EXIT_FAILED:
        say(f"the command failed with exit {report.child_exit} (no problem seen by the monitor)")
    elif report.exit_code == EXIT_INTERRUPTED:
        say("interrupted")
    else:
        how = "aborted" if report.aborted else "finished with warnings"
        say(f"{how}: {', '.join(kinds)} (exit {report.exit_code}; command exit {report.child_exit}); "
            "do not trust these numbers")
    return report.exit_code


def _on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # stop the child's tree on the way out, as for Ctrl-C


if __name__ == "__main__":
    if os.name != "nt":
        signal.signal(signal.SIGTERM, _on_sigterm)
    raise SystemExit(main())
