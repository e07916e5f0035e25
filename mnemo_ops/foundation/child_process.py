"""The one child-process boundary: ``python -m MODULE`` with a JSON request, JSON lines back.

Why children at all: importing Mnemosyne has side effects that follow the environment (it
initialises a database at its default path and seeds a ``config.yaml``), and one process must not
open one database with two SQLite libraries (apsw's and Python's ``sqlite3``, docs/contracts.md).
So work through Mnemosyne's API, and a checkpoint taken inside a job holding Mnemosyne connections,
run in a child process. Every such launch goes through this module, both sides.

The protocol (version 1):

- Request: one JSON document on the child's stdin. The parent writes it to a private temporary
  file that becomes stdin (a file, not a pipe: however large, it can never stall the parent on a
  child that does not read it).
- Answer: JSON lines on the child's stdout, each an object with a ``kind``:
  ``{"kind": "progress", "data": ...}`` any number of times (each reaches the parent's
  `on_progress` as it comes), then one ``{"kind": "result", "data": ...}`` or
  ``{"kind": "error", "error": "Type: message"}`` (a handler exception, as one line; its
  traceback goes to stderr). Success is a result and exit status 0; anything else raises
  `ChildProcessFailed`.
- Clean stdout: before the request is read, `child_main` moves the real stdout to a private,
  non-inherited descriptor and points descriptor 1 (and so ``print``, C libraries and grandchildren)
  at stderr. Mnemosyne prints banners and warnings; they land in stderr. A stdout line that is not a
  JSON object with a string ``kind`` (printed before `child_main` ran, e.g. at import) is noise: the
  parent skips it and keeps the last few for the error message. A line that claims a known kind but
  is malformed, or any message after the result or error, is a protocol failure.
- stderr goes to a private temporary file (a chatty child never fills a pipe and stalls); its last
  lines are kept (`ChildProcessFailed.stderr_tail`) and the last one is named in the error.
- Process group: the child starts in a session of its own. On a timeout, or an exception in the
  parent while it waits (the job's manifest timeout, an interrupt), the whole group gets SIGTERM,
  then SIGKILL after `kill_grace_s`, and the child is reaped, so no grandchild survives it. After a
  normal exit the group gets SIGKILL too (whatever the child left running dies with it). The group
  is signalled before the child is reaped: until then its id cannot be reused by another process.
- The other direction: a child dies with its parent. In its own session it would not get a kill of
  the job's process group, so `child_main` arms Linux's parent-death signal (SIGKILL) and exits at
  once when the parent is already gone (its pid comes in ``MNEMO_OPS_CHILD_PARENT_PID``, removed
  from the child's environment). A job killed with ``kill -9`` takes its child along (not the
  child's own children: none of ours has any).
- File descriptors: subprocess's ``close_fds`` default is kept: a child never inherits the writer
  lock's descriptor (a child outliving the job would otherwise hold the lock) or any other.
- Environment: `environment` (default: this process's), plus ``PYTHONUNBUFFERED=1`` so what a child
  printed before a kill is in the stderr tail. Mnemosyne's variables come from
  ``database.mnemosyne_api.mnemosyne_environment``, never from here.
- Another interpreter: `python` runs ``PYTHON -m MODULE`` (it must find mnemo-ops, e.g. through
  ``PYTHONPATH``). With `standalone`, the interpreter lacks mnemo-ops (an upgrade candidate's venv,
  ``eval run --python``): the module's file is copied into a private folder beside a stand-in
  ``mnemo_ops`` package holding only this module and what it imports (`STANDIN_FILES`), plus the
  module's own companions the caller names (`standalone_files`: the modules of a child split by
  concern), and run by path with ``PYTHONPATH``/``PYTHONHOME`` removed. Such a module (and this one)
  imports only the standard library, its own third-party packages, this module and those
  companions, in Python 3.10 syntax.

A child module looks like::

    from mnemo_ops.foundation.child_process import child_main, send_progress

    def handle(request):
        for item in request["items"]:
            ...
            send_progress({"done": item})
        return {"count": len(request["items"])}

    if __name__ == "__main__":
        child_main(handle)

and its parent: ``run_child("mnemo_ops.x.child", {"items": [...]}, timeout=600)``.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

from mnemo_ops.foundation.errors import MnemoOpsError

PARENT_PID_VARIABLE = "MNEMO_OPS_CHILD_PARENT_PID"
PROGRESS, RESULT, ERROR = "progress", "result", "error"
KINDS = (PROGRESS, RESULT, ERROR)
KILL_GRACE_S = 5.0
"""How long a child has to end after SIGTERM before its group gets SIGKILL."""
STDERR_TAIL_BYTES = 8192
STDERR_TAIL_LINES = 10
NOISE_KEPT = 5
SHOWN_CHARACTERS = 300
"""A line quoted in an error is cut to this length (a result line can be megabytes long)."""
STANDIN_FILES = (
    "__init__.py",
    "foundation/__init__.py",
    "foundation/exit_codes.py",
    "foundation/errors.py",
    "foundation/child_process.py",
)
"""This module and what it imports, relative to the ``mnemo_ops`` folder: the stand-in package a
standalone child imports."""
PR_SET_PDEATHSIG = 1


class ChildProcessFailed(MnemoOpsError):
    """A child process failed: it could not start, timed out, exited badly, reported an error or
    broke the protocol. The message is one line naming the module, what happened and the last
    stderr line; the parts are attributes for callers that word their own message."""

    def __init__(
        self,
        module: str,
        what: str,
        *,
        reason: str,
        returncode: int | None = None,
        error: str | None = None,
        stderr_tail: tuple[str, ...] = (),
        noise: tuple[str, ...] = (),
        context: str | None = None,
    ):
        self.module = module
        self.what = what
        self.reason = reason  # start | timeout | error | signal | exit | protocol
        self.returncode = returncode
        self.error = error
        self.stderr_tail = stderr_tail
        self.noise = noise
        self.context = context
        message = f"{module} {what}"
        last = stderr_tail[-1] if stderr_tail else None
        if last and last not in message:  # a reported error is usually the traceback's last line
            message += f"; stderr: {last}"
        if context:
            message = f"{context}: {message}"
        super().__init__(message)

    def with_context(self, context: str) -> ChildProcessFailed:
        """The same failure, its message led by what the parent was doing (``Mnemosyne sleep``)."""
        return ChildProcessFailed(
            self.module,
            self.what,
            reason=self.reason,
            returncode=self.returncode,
            error=self.error,
            stderr_tail=self.stderr_tail,
            noise=self.noise,
            context=f"{context}: {self.context}" if self.context else context,
        )


# ------------------------------------------------------------------------------------ parent side


def run_child(
    module: str,
    request: Any,
    *,
    timeout: float | None,
    environment: Mapping[str, str] | None = None,
    python: str | Path | None = None,
    standalone: bool = False,
    standalone_files: Sequence[str] = (),
    cwd: str | Path | None = None,
    on_progress: Callable[[Any], None] | None = None,
    kill_grace_s: float = KILL_GRACE_S,
) -> Any:
    """Run ``python -m MODULE`` with `request`; return the data of its result message.

    `timeout` (seconds, None for no limit; every caller says which) bounds the whole run, start to
    exit. `environment` is the child's whole environment (default: this process's). `python` is the
    interpreter (default: this one); `standalone` runs the module's file under an interpreter
    without mnemo-ops (module docstring), its stand-in package holding `standalone_files` too
    (paths relative to the ``mnemo_ops`` folder). `on_progress(data)` is called in this thread for each
    progress message. Raises ChildProcessFailed on any failure, with the process group ended.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    with contextlib.ExitStack() as stack:
        request_file = stack.enter_context(tempfile.TemporaryFile())
        request_file.write(json.dumps(request).encode("utf-8"))
        request_file.seek(0)
        stderr_file = stack.enter_context(tempfile.TemporaryFile())
        child_environment = dict(os.environ if environment is None else environment)
        child_environment["PYTHONUNBUFFERED"] = "1"
        child_environment[PARENT_PID_VARIABLE] = str(os.getpid())
        interpreter = str(python or sys.executable)
        if standalone:
            folder = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="mnemo-ops-child-"))
            )
            command = [interpreter, str(_standalone_copy(module, folder, standalone_files))]
            for name in ("PYTHONPATH", "PYTHONHOME"):  # that interpreter sees only its own packages
                child_environment.pop(name, None)
        else:
            command = [interpreter, "-m", module]
        try:
            process = subprocess.Popen(
                command,
                stdin=request_file,
                stdout=subprocess.PIPE,
                stderr=stderr_file,
                env=child_environment,
                cwd=None if cwd is None else str(cwd),
                start_new_session=True,  # its own process group, ended as a whole
                close_fds=True,  # the default, said out loud: the writer lock is never inherited
            )
        except OSError as error:
            raise ChildProcessFailed(module, f"could not start: {error}", reason="start") from None
        messages = _Messages(on_progress)
        exited = False
        violation = None
        try:
            try:
                exited = _read_messages(process.stdout, messages, deadline) and _wait_exit(
                    process.pid, deadline
                )
            except _ProtocolViolation as problem:
                violation = str(problem)
        finally:
            _end_group(process, gently=not exited, grace_s=kill_grace_s)
            process.stdout.close()
        return _outcome(
            module,
            process.returncode,
            messages,
            timeout=None if exited or violation else timeout,
            violation=violation,
            stderr_tail=_tail(stderr_file),
        )


def _standalone_copy(module: str, folder: Path, companions: Sequence[str] = ()) -> Path:
    """Copy `module`'s file and the stand-in package (with `companions`) into `folder`; return the
    copy to run."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise ChildProcessFailed(module, "could not start: no such source file", reason="start")
    package = Path(__file__).resolve().parents[1]
    for relative in (*STANDIN_FILES, *companions):
        target = folder / "mnemo_ops" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(package / relative, target)
    # Run by path, its folder first on sys.path: nothing beside it shadows an import (run in place,
    # engines/mnemosyne.py would shadow the mnemosyne package), and mnemo_ops is the stand-in.
    script = folder / Path(spec.origin).name
    shutil.copyfile(spec.origin, script)
    return script


class _ProtocolViolation(Exception):
    """A line that claims to be a message but is not one (the text says what)."""


class _Messages:
    """What the child said so far."""

    def __init__(self, on_progress: Callable[[Any], None] | None):
        self.on_progress = on_progress
        self.result: Any = None
        self.has_result = False
        self.error: str | None = None
        self.noise: collections.deque[str] = collections.deque(maxlen=NOISE_KEPT)

    def take(self, raw: bytes) -> None:
        """Handle one stdout line."""
        text = raw.decode("utf-8", "replace").strip()
        if not text:
            return
        try:
            message = json.loads(text)
        except ValueError:
            message = None
        if not isinstance(message, dict) or not isinstance(message.get("kind"), str):
            self.noise.append(_shown(text))
            return
        kind = message["kind"]
        if self.has_result or self.error is not None:
            raise _ProtocolViolation(f"a message after the last one: {_shown(text)}")
        if kind == PROGRESS and "data" in message:
            if self.on_progress is not None:
                self.on_progress(message["data"])
        elif kind == RESULT and "data" in message:
            self.result, self.has_result = message["data"], True
        elif kind == ERROR and isinstance(message.get("error"), str):
            self.error = " ".join(message["error"].split()) or "an error without a message"
        else:
            raise _ProtocolViolation(_shown(text))


def _read_messages(stream: IO[bytes], messages: _Messages, deadline: float | None) -> bool:
    """Read stdout to its end, handing each line to `messages`; False when the deadline passed."""
    descriptor = stream.fileno()
    pending = bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(descriptor, selectors.EVENT_READ)
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            if not selector.select(remaining):
                continue
            chunk = os.read(descriptor, 1 << 16)
            if not chunk:
                messages.take(bytes(pending))
                return True
            searched = len(pending)
            pending.extend(chunk)
            while (end := pending.find(b"\n", searched)) >= 0:
                line = bytes(pending[:end])
                del pending[: end + 1]
                searched = 0
                messages.take(line)


def _wait_exit(pid: int, deadline: float | None) -> bool:
    """Wait for the child to exit without reaping it (its pid keeps the group id reserved);
    False when the deadline passed first."""
    delay = 0.001
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # already reaped: nothing left to wait for
            return True
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return False
        time.sleep(delay if remaining is None else min(delay, remaining))
        delay = min(delay * 2, 0.05)


def _signal_group(group: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, number)


def _end_group(process: subprocess.Popen, gently: bool, grace_s: float) -> None:
    """End the child's whole process group and reap the child (see the module docstring)."""
    if gently:
        _signal_group(process.pid, signal.SIGTERM)
        _wait_exit(process.pid, time.monotonic() + grace_s)
    _signal_group(process.pid, signal.SIGKILL)
    process.wait()


def _tail(stderr_file: IO[bytes]) -> tuple[str, ...]:
    """The last non-empty lines of what the child wrote to stderr."""
    size = stderr_file.seek(0, os.SEEK_END)
    stderr_file.seek(max(0, size - STDERR_TAIL_BYTES))
    text = stderr_file.read().decode("utf-8", "replace")
    lines = [_shown(line.strip()) for line in text.splitlines() if line.strip()]
    if size > STDERR_TAIL_BYTES and lines:
        lines = lines[1:]  # the first line read may be cut
    return tuple(lines[-STDERR_TAIL_LINES:])


def _shown(text: str) -> str:
    return text if len(text) <= SHOWN_CHARACTERS else text[:SHOWN_CHARACTERS] + "..."


def _outcome(
    module: str,
    returncode: int,
    messages: _Messages,
    *,
    timeout: float | None,
    violation: str | None,
    stderr_tail: tuple[str, ...],
) -> Any:
    """The result, or the one error that says what went wrong."""

    def failed(what: str, reason: str) -> ChildProcessFailed:
        return ChildProcessFailed(
            module,
            what,
            reason=reason,
            returncode=returncode,
            error=messages.error,
            stderr_tail=stderr_tail,
            noise=tuple(messages.noise),
        )

    if violation is not None:
        raise failed(f"sent a bad message: {violation}", "protocol")
    if timeout is not None:
        raise failed(f"timed out after {timeout:g} s (its process group was killed)", "timeout")
    if messages.error is not None:
        raise failed(f"failed: {messages.error}", "error")
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        raise failed(f"was killed by signal {name}", "signal")
    if returncode != 0:
        after = " after its result" if messages.has_result else ""
        raise failed(f"exited with status {returncode}{after}", "exit")
    if not messages.has_result:
        noise = f" (stdout: {messages.noise[-1]})" if messages.noise else ""
        raise failed(f"exited with status 0 without a result{noise}", "exit")
    return messages.result


# ------------------------------------------------------------------------------------- child side

_protocol: IO[bytes] | None = None


def send_progress(data: Any) -> None:
    """Send a progress message to the parent (from the handler `child_main` runs).

    Outside a child started by `child_main` (a handler called directly, in a test) it does nothing.
    """
    if _protocol is not None:
        _send({"kind": PROGRESS, "data": data})


def child_main(handler: Callable[[Any], Any]) -> NoReturn:
    """The child's whole life: die with the parent, keep stdout for the protocol, read the request,
    send ``handler(request)`` as the result (or its exception as an error), exit 0 (or 1)."""
    global _protocol
    _die_with_parent()
    _protocol = _claim_stdout()
    try:
        request = json.loads(sys.stdin.buffer.read())  # bytes: UTF-8 whatever the locale
        result = handler(request)
    except Exception as error:  # the parent turns it into its one-line error
        traceback.print_exc(file=sys.stderr)
        _send({"kind": ERROR, "error": f"{type(error).__name__}: {error}"})
        _finish(1)
    _send({"kind": RESULT, "data": result})
    _finish(0)


def _send(message: dict[str, Any]) -> None:
    assert _protocol is not None
    # default=str: a summary may hold dates or paths; the parent wants their text.
    _protocol.write((json.dumps(message, default=str) + "\n").encode("utf-8"))
    _protocol.flush()


def _finish(status: int) -> NoReturn:
    sys.stdout.flush()
    sys.stderr.flush()
    raise SystemExit(status)


def _claim_stdout() -> IO[bytes]:
    """Keep the real stdout for the protocol alone; everything else written to it goes to stderr."""
    sys.stdout.flush()
    protocol = os.dup(1)  # not inheritable (Python's default): grandchildren never get it
    os.dup2(2, 1)
    return os.fdopen(protocol, "wb")


def _die_with_parent() -> None:
    """Arm Linux's parent-death signal; exit now when the parent that started us is already gone."""
    expected = os.environ.pop(PARENT_PID_VARIABLE, None)
    if expected is None:  # run by hand: there is no parent to follow
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the check below still covers a gone parent
        pass
    if os.getppid() != int(expected):
        raise SystemExit(1)
