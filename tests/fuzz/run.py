"""Run one fuzz case through memsim's console entry point and judge the outcome.

Each command runs as ``memsim.cli.main.entry()`` would in its own process: by default in a forked
child of the fuzzer (cheap: everything is already imported) whose stdout and stderr go to
files, so that a segfault or a hang costs one case, not the campaign. The contract checked:
exit 0, or exit 2 with exactly one line ``memsim: error: ...`` on stderr and nothing left in
``--out`` (no half-written folder, no ``.out.*`` temporary beside it).

A command is bounded twice (``Limits``): by the CPU time it uses, which a loaded machine does
not stretch, and by the wall clock, which it does. Past either it is stopped and its class
names where it was stuck; the campaign decides whether a wall-clock timeout is a failure.
"""
from __future__ import annotations

import faulthandler
import json
import math
import os
import re
import resource
import select
import signal
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import memsim
from memsim.core.errors import MemsimError

from . import vocab

MEMSIM_DIR = Path(memsim.__file__).resolve().parent
TIMEOUT, CPU = "timeout", "cpu limit"  # the classes of a command stopped by the wall clock, by its CPU time
WARNING = re.compile(r"^(.+?):(\d+): (\w*Warning): ")
FRAME = re.compile(r'File "(.+?)", line (\d+) in (\S+)')
ORCHESTRATION = ("cli/main.py", "cli/step.py", "cli/sweeps.py", "cli/serve.py", "cli/capacity.py", "run/api.py",
                 "run/generation.py", "sweep/runner.py")


@dataclass(frozen=True)
class Limits:
    """What one command may take: wall-clock seconds, CPU seconds and the address space it may
    reach, in bytes (each 0: no limit)."""
    wall_s: float = 0
    cpu_s: float = 0
    memory_bytes: int = 0


@dataclass
class Outcome:
    rc: int | None = None  # exit code; negative: killed by that signal; None: past the wall-clock limit
    stdout: str = ""
    stderr: str = ""
    exception: dict | None = None  # an uncaught exception: type, message, location, traceback tail
    swallowed: list = field(default_factory=list)  # exceptions a sweep turned into a row's error
    skipped: str = ""
    seconds: float = 0.0
    cpu_exceeded: bool = False  # stopped past the CPU-time limit


def location(tb) -> str:
    """``memsim/path.py:LINE function`` of the last memsim frame (else the last frame)."""
    frames = traceback.extract_tb(tb)
    ours = [f for f in frames if Path(f.filename).resolve().is_relative_to(MEMSIM_DIR)]
    return _short(*(ours or frames)[-1][:3]) if frames else "?"


def _short(filename: str, line, func: str) -> str:
    path = Path(filename).resolve()
    if path.is_relative_to(MEMSIM_DIR):
        name = "memsim/" + path.relative_to(MEMSIM_DIR).as_posix()
    else:
        parts = path.parts
        name = "/".join(parts[parts.index("site-packages") + 1:]) if "site-packages" in parts else path.name
    return f"{name}:{line} {func}"


def _exception_info(exc: BaseException) -> dict:
    return {"type": type(exc).__name__, "message": str(exc)[:300], "location": location(exc.__traceback__),
            "traceback": "".join(traceback.format_exception(exc))[-3000:]}


def _sweep_points(args: list[str]) -> int | None:
    """How many points ``memsim sweep ARGS`` would run, or None where that cannot be told."""
    from memsim.sweep import runner as sweep

    items = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--set"]
    try:
        listed = sweep.read_sweep_file(Path(args[args.index("--sweep") + 1]))[1] if "--sweep" in args else {}
        return sweep.size(sweep.parse_sweeps(items, known=listed))
    except BaseException:  # the real run reports it
        return None


def _execute(args: list[str], max_points: int) -> Outcome:
    """Run ``memsim ARGS`` as the console script does; the caller has redirected stdout and stderr."""
    import memsim.run.api
    from memsim.cli.main import entry

    out = Outcome()
    if max_points and args[:1] == ["sweep"]:
        n = _sweep_points(args)
        if n is not None and n > max_points:
            out.skipped = f"sweep of {n} points"
            out.rc = 0
            return out
    simulate = memsim.run.api.simulate

    def watched(*a, **k):  # a sweep records every failure as a row: catch the ones that are not user errors
        try:
            return simulate(*a, **k)
        except MemsimError:
            raise
        except Exception as exc:
            out.swallowed.append(_exception_info(exc))
            raise

    if args[:1] == ["sweep"]:
        memsim.run.api.simulate = watched
    sys.argv = ["memsim", *args]
    try:
        entry()
        out.rc = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            out.rc = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            out.rc = 1
    except BaseException as exc:  # what Python would print before exiting with 1
        traceback.print_exc()
        out.exception = _exception_info(exc)
        out.rc = 1
    finally:
        memsim.run.api.simulate = simulate
    return out


def _default_warnings() -> None:
    """The warning filters of a fresh interpreter, whatever the fuzzer's (pytest's) are."""
    warnings.resetwarnings()
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__", append=True)
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.filterwarnings("ignore", category=category, append=True)


def _redirect(folder: Path):
    sys.stdout.flush()
    sys.stderr.flush()
    out = open(folder / ".fuzz-stdout", "w", encoding="utf-8", errors="backslashreplace")
    err = open(folder / ".fuzz-stderr", "w", encoding="utf-8", errors="backslashreplace")
    return out, err


def run_forked(args: list[str], folder: Path, limits: Limits, max_points: int = 0) -> Outcome:
    start = time.monotonic()
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(read_end)
            os.chdir(folder)
            out, err = _redirect(folder)
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            sys.stdout, sys.stderr = out, err
            faulthandler.enable(file=err)
            faulthandler.register(signal.SIGUSR1, file=err)
            if limits.cpu_s:  # SIGXCPU at the limit (faulthandler: where it is), SIGKILL a second later
                faulthandler.register(signal.SIGXCPU, file=err, chain=False)
                resource.setrlimit(resource.RLIMIT_CPU, (math.ceil(limits.cpu_s), math.ceil(limits.cpu_s) + 1))
            if limits.memory_bytes:
                resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
            _default_warnings()
            outcome = _execute(args, max_points)
            out.flush()
            err.flush()
            os.write(write_end, json.dumps({"exception": outcome.exception, "swallowed": outcome.swallowed,
                                            "skipped": outcome.skipped}).encode())
            os._exit(outcome.rc if 0 <= outcome.rc < 256 else 1)
        except BaseException:
            os._exit(99)
    os.close(write_end)
    chunks, deadline, timed_out = [], start + limits.wall_s if limits.wall_s else math.inf, False
    while True:
        ready, _, _ = select.select([read_end], [], [], None if deadline == math.inf else
                                    max(0.0, deadline - time.monotonic()))
        if not ready:
            timed_out = True
            os.kill(pid, signal.SIGUSR1)  # faulthandler: where is it stuck?
            time.sleep(0.3)
            os.kill(pid, signal.SIGKILL)
            break
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    _, status, usage = os.wait4(pid, 0)
    outcome = Outcome(rc=None if timed_out else os.waitstatus_to_exitcode(status))
    outcome.cpu_exceeded = bool(limits.cpu_s) and outcome.rc in (-signal.SIGXCPU, -signal.SIGKILL) and \
        usage.ru_utime + usage.ru_stime >= limits.cpu_s
    if chunks:
        extra = json.loads(b"".join(chunks))
        outcome.exception, outcome.swallowed, outcome.skipped = extra["exception"], extra["swallowed"], extra["skipped"]
    return _collect(outcome, folder, start)


class CaseTimeout(BaseException):
    """Raised by SIGALRM (wall clock) or SIGPROF (CPU time) in the in-process mode; a
    BaseException so that ``except Exception`` lets it by."""


def run_inprocess(args: list[str], folder: Path, limits: Limits, max_points: int = 0) -> Outcome:
    start, cwd = time.monotonic(), os.getcwd()
    saved = sys.stdout, sys.stderr, sys.argv, warnings.filters[:]

    def alarm(signum, frame):
        raise CaseTimeout(CPU if signum == signal.SIGPROF else TIMEOUT)

    previous = {sig: signal.signal(sig, alarm) for sig in (signal.SIGALRM, signal.SIGPROF)}
    out, err = _redirect(folder)
    try:
        os.chdir(folder)
        sys.stdout, sys.stderr = out, err
        _default_warnings()
        signal.setitimer(signal.ITIMER_REAL, limits.wall_s)
        signal.setitimer(signal.ITIMER_PROF, limits.cpu_s)
        outcome = _execute(args, max_points)
        if outcome.exception and outcome.exception["type"] == "CaseTimeout":
            cpu = outcome.exception["message"] == CPU
            outcome = Outcome(rc=-signal.SIGXCPU if cpu else None, cpu_exceeded=cpu)
    except CaseTimeout as exc:
        outcome = Outcome(rc=-signal.SIGXCPU if str(exc) == CPU else None, cpu_exceeded=str(exc) == CPU)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        out.close()
        err.close()
        sys.stdout, sys.stderr, sys.argv, warnings.filters[:] = saved
        os.chdir(cwd)
    return _collect(outcome, folder, start)


def _collect(outcome: Outcome, folder: Path, start: float) -> Outcome:
    for name, attr in ((".fuzz-stdout", "stdout"), (".fuzz-stderr", "stderr")):
        path = folder / name
        if path.exists():
            setattr(outcome, attr, path.read_text(encoding="utf-8", errors="backslashreplace"))
            path.unlink()
    outcome.seconds = time.monotonic() - start
    return outcome


def _not_finite(summary: Path) -> list[str]:
    """The keys of ``summary.json`` whose value is NaN or +-Infinity (garbage accepted as input)."""
    bad: list[str] = []

    def walk(value, key: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{key}.{k}" if key else str(k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{key}[{i}]")
        elif isinstance(value, float) and not math.isfinite(value):
            bad.append(f"{key}={value}")

    walk(json.loads(summary.read_text()), "")
    return bad[:5]


def _shape(line: str) -> str:
    """An error line without its particulars (paths, numbers, quoted values), to group by."""
    line = line.removeprefix("memsim: error: ")
    line = re.sub(r"\S*/\S*", "PATH", line)
    line = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", line)
    return re.sub(r"\d+", "N", line)[:70]


def _words(text: str) -> str:
    """The plain words of an error (no paths, quoted values or field names), to group by."""
    text = re.sub(r"\S*/\S*|'[^']*'|\"[^\"]*\"|\[[^\]]*\]", " ", text.removeprefix("memsim: error: "))
    return " ".join(re.findall(r"(?<![^\s(:,])[A-Za-z]{3,}(?![^\s):,.])", text)[:8])


def output_paths(args: list[str], folder: Path) -> list[tuple[str, Path]]:
    """The ``--out`` folder and ``-o`` file of a command, as (option, path); relative to ``folder``.
    As click does, the last of a repeated option counts; an empty one asks for no output."""
    last = {}
    for i, a in enumerate(args[:-1]):
        if a in ("--out", "-o", "--output"):
            last["-o" if a == "--output" else a] = args[i + 1]
    return [(opt, (folder / value).resolve()) for opt, value in last.items() if value]


def snapshot(folder: Path) -> set[Path]:
    return {p.resolve() for p in folder.rglob("*")} | {folder.resolve()}


def judge(args: list[str], o: Outcome, folder: Path, before: set[Path]) -> list[tuple[str, str]]:
    """The failures of one command as (class, detail); empty when it kept the contract."""
    cmd = " ".join(args[:2]) if args[:1] == ["import"] else (args[0] if args else "")
    failures = []
    if o.rc is None or o.cpu_exceeded:
        # faulthandler's dump, most recent call first. A hang is named by the outermost frame in the
        # pipeline (what was asked), as the innermost one depends on when the limit struck.
        frames = [f for f in FRAME.findall(o.stderr) if Path(f[0]).resolve().is_relative_to(MEMSIM_DIR)]
        outer = [f for f in frames if not Path(f[0]).as_posix().endswith(ORCHESTRATION)] or frames
        where = f" in {_short(outer[-1][0], '', outer[-1][2]).replace(': ', ' ')}" if outer else ""
        stuck = f"stuck at {_short(*frames[0])}" if frames else "no stack"
        if o.cpu_exceeded:
            return [(f"{CPU}{where} (memsim {cmd})", f"more CPU time than the case's limit; {stuck}")]
        return [(f"{TIMEOUT}{where} (memsim {cmd})", f"no exit within the case timeout; {stuck}")]
    if o.rc < 0:
        return [(f"killed by signal {-o.rc} (memsim {cmd})", o.stderr[-500:])]
    lines = o.stderr.split("\n")[:-1] if o.stderr.endswith("\n") else o.stderr.split("\n") if o.stderr else []
    # only "\n" ends a line: a terminal prints "\x85" or "\u2028" inside the one line
    lines = [line for line in lines if not line.startswith("memsim: warning: ")]  # input that runs, with a word
    if any("internal error, please report it" in line for line in lines):  # the CLI's safety net caught a bug
        failures.append((f"internal error (memsim {cmd}): {_words(lines[0])}", o.stderr[-300:]))
    for line in lines:
        m = WARNING.match(line)
        if m:
            failures.append((f"{m.group(3)} at {_short(m.group(1), m.group(2), '')}".strip(), line[:300]))
    if o.exception:
        failures.append((f"{o.exception['type']} at {o.exception['location']}", o.exception["message"]))
    elif o.rc not in (0, 2):
        last = _shape(lines[-1]) if lines else ""
        failures.append((f"exit code {o.rc} (memsim {cmd}): {last}", o.stderr[-300:]))
    elif o.rc == 2 and (len(lines) != 1 or not lines[0].startswith("memsim: error: ")):
        if not failures:
            failures.append((f"exit 2 with {len(lines)} stderr lines (memsim {cmd}): {_words(o.stderr)}",
                             o.stderr[-300:]))
    elif o.rc == 0 and lines and not failures:
        failures.append((f"stderr output with exit 0 (memsim {cmd})", o.stderr[-300:]))
    for exc in o.swallowed:
        failures.append((f"sweep point: {exc['type']} at {exc['location']}", exc["message"]))
    for opt, path in output_paths(args, folder):
        if path in before:
            continue
        temps = sorted(p.name for p in path.parent.glob(f".{path.name}.*")) if path.parent.is_dir() else []
        if temps:
            failures.append((f"temporary left beside {opt} (memsim {cmd})", ", ".join(temps)))
        if o.rc != 0 and path.exists():
            what = sorted(p.name for p in path.iterdir()) if path.is_dir() else "a file"
            error = _shape(lines[-1]) if lines else ""
            failures.append((f"{opt} written despite exit {o.rc} (memsim {cmd}): {error}", f"{path.name}: {what}"))
        if o.rc == 0 and opt == "--out" and args[0] == "run" and not {"-h", "--help", "--version"} & set(args):
            missing = [n for n in vocab.run_outputs() if not (path / n).is_file()]
            if missing:
                failures.append((f"exit 0 but --out lacks files (memsim {cmd})", ", ".join(missing)))
            elif _not_finite(path / "summary.json"):
                failures.append((f"exit 0 but summary.json holds NaN or Infinity (memsim {cmd})",
                                 ", ".join(_not_finite(path / "summary.json"))))
    return failures
