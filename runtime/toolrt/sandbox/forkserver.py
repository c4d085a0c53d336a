"""The fork server: a single-threaded process that forks, sandboxes and execs each tool process.

toolrt itself is threaded (worker threads, the event loop), so it must not run Python between fork
and exec (`preexec_fn`). Instead it starts this server once, as `python -I -S forkserver.py FD`
(standard library only, so it starts in milliseconds and no project file can shadow an import), and
sends it one request per process over a UNIX socket, with the child's stdin, stdout, stderr and a
private status channel attached as descriptors. For each request the server forks; the child, in
a process that has only ever had one thread, then:

1. starts a new session (its own process group, which toolrt kills whole on timeout) and asks for
   SIGKILL when the server dies (the server is single-threaded: its one thread is the parent the
   kernel watches), checking the server was still there once asked;
2. joins the mount namespace where the protected paths are read-only bind mounts, and the network
   namespace with only a downed loopback, when asked (both made once by a short-lived holder child and
   kept, as is each Landlock ruleset: a new namespace per process would cost milliseconds); with a
   `cover` (absent protected names of the project root made unwritable, `kernel.cover_absent`), a mount
   namespace for this process alone instead: an overlay caches what it looked up, so none is shared;
   the next one is made after this request is answered, and each is closed (unmounted) once its
   process has ended and the server is idle; with a minimal `/dev`, a devpts of its own on `/dev/pts`
   (in a copy of a kept namespace) and a ruleset of its own granting it (`devices.own_terminals`);
3. enforces the Landlock ruleset it was sent (inherited by everything it starts, across setsid,
   nohup and double forks; a Landlocked process cannot undo mounts);
4. installs the seccomp filter that refuses `socket(AF_UNIX)` (see `seccomp`), or with a socket
   allow-list the supervised one, whose listener it sends back first (toolrt's `supervisor` answers it);
5. makes a PID namespace and forks its init, which execs the program, while this process stays as the
   program's stand-in until the init exits (see `_wait_for_init`); the init is the program: when it
   ends, everything it started ends; it asks for SIGKILL when the stand-in dies, so a killed server
   takes every namespace with it;
6. drops every capability (bounding, ambient, effective, permitted, inheritable);
7. closes every other descriptor and execs the program.

The stand-in reports its init's pid (`I<pid>` on the report pipe) and the server holds a pidfd of
it: whenever a stand-in ends, the server SIGKILLs its init (a killed stand-in's init may have left
the process group with `setsid` and cleared its parent-death signal). When toolrt closes the control
socket, or dies (the kernel closes it), the server SIGKILLs the process group of every child still
running, and each init, and exits once they are reaped: nothing outlives toolrt.

Unprivileged processes need a user namespace for steps 2 and 3; the server enters one at start (its
own uid and gid mapped to themselves, so files keep their owners) when it cannot unshare without.

Status channel, server → client, one line each: `P<pid>` once the program is running (carrying the
proxy listener of a request with `proxy_net`, made in the process's own network namespace, then the
seccomp listener of a request with `supervise_unix`), or
`E<errno> <step>` when it could not start; then `X<code>` when it exits (negative: killed by that
signal). A request is `<length:4 bytes big-endian><JSON>` on the same channel.
"""

from __future__ import annotations

import fcntl
import json
import os
import selectors
import signal
import socket
import stat
import struct
import sys
from collections.abc import Callable
from typing import Any

if __package__:
    from . import kernel, launch_request, loopback, seccomp
else:  # run by path under `python -I -S`, outside the package
    import kernel  # type: ignore[no-redef,import-not-found]
    import launch_request  # type: ignore[no-redef,import-not-found]
    import loopback  # type: ignore[no-redef,import-not-found]
    import seccomp  # type: ignore[no-redef,import-not-found]

__all__ = ["main"]

_REQUEST_TIMEOUT = 10.0


def _probe(flags: int) -> bool:
    """Can a child of ours unshare these namespaces (and make its mounts private)?"""
    pid = os.fork()
    if pid == 0:
        try:
            kernel.unshare(flags)
            if flags & kernel.CLONE_NEWNS:
                kernel.make_mounts_private()
        except BaseException:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _capabilities() -> dict[str, object]:
    """Find what this kernel lets us do, entering a user namespace when that is what it takes."""
    userns = False
    wanted = kernel.CLONE_NEWNS | kernel.CLONE_NEWNET
    if not _probe(wanted):
        uid, gid = os.geteuid(), os.getegid()
        try:
            kernel.unshare(kernel.CLONE_NEWUSER)
            kernel.map_user(uid, gid)
            userns = True
        except OSError:
            pass
    mount = _probe(kernel.CLONE_NEWNS)
    net = _probe(kernel.CLONE_NEWNET)
    pid = _probe(kernel.CLONE_NEWPID)
    return {"abi": kernel.landlock_abi(), "mount": mount, "net": net, "userns": userns, "pid": pid}


def _read_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError("request cut short")
        data += chunk
    return data


class _Kept:
    """Namespaces and Landlock rulesets the server keeps for reuse (see `toolrt.sandbox.namespaces`, the
    thread launcher's twin): a namespace is made once by a short-lived holder child and held by an fd."""

    def __init__(self) -> None:
        self.spares: dict[tuple[object, ...], int] = {}
        """Covered mount namespaces made ahead, one per key, each for one process."""
        self.wanted: tuple[tuple[object, ...], tuple[object, ...], dict[str, object]] | None = None
        """The spare to make once the current request is answered."""
        self.mounts: dict[tuple[object, ...], int] = {}
        self.bases: dict[tuple[object, ...], int] = {}
        """Namespaces each covered one is copied from (`launch_request.cover_base_key` → fd)."""
        self.net: int | None = None
        self.rulesets: dict[tuple[object, ...], int] = {}
        """Rules and their paths' identities (`LandlockRules.key`) → ruleset fd."""
        self.templates: dict[tuple[object, ...], kernel.RuleTemplate] = {}
        """The same keys → the rules' template, for requests that each need a ruleset of their own."""

    def _made_by_holder(
        self,
        flags: int,
        mounts: tuple[object, ...] | None,
        kind: str,
        cover: dict[str, object] | None = None,
        *,
        base: int | None = None,
        build: Callable[[], None] | None = None,
    ) -> int:
        """A namespace of `kind`, made by a child that unshares `flags` (after joining `base`, a mount
        namespace to copy) and then runs `build`, or makes `mounts` (and the `cover` of a single-use one)."""
        ready_read, ready_write = os.pipe()
        done_read, done_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(ready_read)
            os.close(done_write)
            try:
                if base is not None:
                    kernel.setns(base, kernel.CLONE_NEWNS)
                kernel.unshare(flags)
                if build is not None:
                    build()
                elif mounts is not None:
                    if base is None:
                        kernel.make_mounts_private()
                    if cover is not None:
                        covered = cover["cover"]
                        kernel.covered_mounts(mounts, covered, lower=base is None, dev=base is None)  # type: ignore[arg-type]
                    else:
                        kernel.make_mounts(mounts, dev=base is None)
                os.write(ready_write, b"1")
                os.read(done_read, 1)  # stay alive until the server holds the namespace
            except BaseException as error:  # what went wrong reaches the caller, not a bare "failed"
                os.write(ready_write, f"{getattr(error, 'errno', None) or 0} {error}".encode()[:512])
            finally:
                os._exit(0)
        os.close(ready_write)
        os.close(done_read)
        try:
            answer = os.read(ready_read, 512)
            if answer != b"1":
                code, _, why = answer.decode(errors="replace").partition(" ")
                number = int(code) if code.isdigit() else 0
                raise OSError(number, f"could not make a {kind} namespace: {why or 'its maker ended without a word'}")
            return os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            os.close(ready_read)
            os.close(done_write)
            os.waitpid(pid, 0)

    def mount(
        self,
        read_only: list[str],
        masks: dict[str, object] | None,
        dev: bool,
        pinned: list[str],
        writable: list[str] | None = None,
    ) -> int:
        key = launch_request.mount_key(read_only, masks, dev, pinned, writable)
        if key not in self.mounts:
            if len(self.mounts) >= 16:
                os.close(self.mounts.pop(next(iter(self.mounts))))
            self.mounts[key] = self._made_by_holder(kernel.CLONE_NEWNS, key, "mnt")
        return self.mounts[key]

    def covered(
        self,
        read_only: list[str],
        masks: dict[str, object] | None,
        dev: bool,
        cover: object,
        pinned: list[str],
        writable: list[str] | None = None,
    ) -> int:
        """A single-use mount namespace with the absent protected names covered (a spare when there is one)."""
        key = launch_request.mount_key(read_only, masks, dev, pinned, writable)
        full = (key, repr(cover), kernel.identity_key([str(cover["root"])]))  # type: ignore[index]
        spec = {"cover": cover, "masks": masks}
        fd = self.spares.pop(full, None)
        if fd is None:
            fd = self._covered(key, spec)
        self.wanted = (full, key, spec)
        return fd

    def _covered(self, key: tuple[object, ...], spec: dict[str, object]) -> int:
        """A covered namespace, copied from its kept base where one can serve (see `kernel.cover_base`)."""
        cover: Any = spec["cover"]
        if not launch_request.base_usable(cover):
            return self._made_by_holder(kernel.CLONE_NEWNS, key, "mnt", spec)
        base_key = launch_request.cover_base_key(key, cover)
        base = self.bases.get(base_key)
        if base is None:
            if len(self.bases) >= 4:
                os.close(self.bases.pop(next(iter(self.bases))))
            dev = bool(key[0])
            build = lambda: kernel.cover_base(dev, cover)  # noqa: E731
            base = self.bases[base_key] = self._made_by_holder(kernel.CLONE_NEWNS, None, "mnt", build=build)
        return self._made_by_holder(kernel.CLONE_NEWNS, key, "mnt", spec, base=base)

    def make_spare(self) -> None:
        """Make the spare the last covered request asked for (after that request was answered)."""
        if self.wanted is None:
            return
        full, key, spec = self.wanted
        self.wanted = None
        if full in self.spares:
            return
        try:
            fd = self._covered(key, spec)
        except OSError:
            return  # the next request makes its own, and reports what fails
        if len(self.spares) >= 4:
            os.close(self.spares.pop(next(iter(self.spares))))
        self.spares[full] = fd

    def network(self) -> int:
        if self.net is None:
            self.net = self._made_by_holder(kernel.CLONE_NEWNET, None, "net")
        return self.net

    def ruleset(self, rules: kernel.LandlockRules) -> int:
        key = rules.key()
        hit = self.rulesets.get(key)
        if hit is not None:
            return hit
        if len(self.rulesets) >= 64:
            os.close(self.rulesets.pop(next(iter(self.rulesets))))
        self.rulesets[key] = kernel.build_ruleset(rules)
        return self.rulesets[key]

    def own_ruleset(self, rules: kernel.LandlockRules) -> int:
        """A new ruleset for one child to add its own rules to, from a kept template (close it after the fork)."""
        key = rules.key()
        template = self.templates.get(key)
        if template is None:
            if len(self.templates) >= 64:
                self.templates.pop(next(iter(self.templates))).close()
            template = self.templates[key] = kernel.RuleTemplate(rules)
        return template.build()

    def prepare(self, request: dict[str, object]) -> tuple[int | None, int | None, int | None]:
        """(mount namespace, network namespace, ruleset) fds for a request; built before the fork, so
        that what is kept outlives the child."""
        read_only = [str(p) for p in request.get("read_only", ())]  # type: ignore[attr-defined]
        pinned = [str(p) for p in request.get("pinned", ())]  # type: ignore[attr-defined]
        masks = launch_request.request_masks(request)
        rules = launch_request.landlock_rules(request)
        writable = launch_request.request_writable(request)
        mounts: int | None = None
        landlock: int | None = None
        if rules is not None:  # with a minimal /dev, one of the child's own: it adds its devpts (`_child`)
            landlock = self.own_ruleset(rules) if request.get("dev") else self.ruleset(rules)
        try:
            if request.get("cover"):
                mounts = self.covered(read_only, masks, bool(request.get("dev")), request["cover"], pinned, writable)
            elif launch_request.wants_mounts(request):
                mounts = self.mount(read_only, masks, bool(request.get("dev")), pinned, writable)
            return mounts, self.network() if request.get("unshare_net") else None, landlock
        except BaseException:
            if landlock is not None and request.get("dev"):
                os.close(landlock)
            raise


def _child(
    request: dict[str, object],
    stdio: list[int],
    report: int,
    kept: tuple[int | None, int | None, int | None],
    server: int,
) -> None:
    """In the forked child of `server`: sandbox, then exec. Never returns."""
    step = "setsid"
    try:
        _start_session(server)
        step = "stdio"
        _attach_stdio(stdio)
        step = "sandbox"
        mounts, network, ruleset = kept
        rules = launch_request.landlock_rules(request) if request.get("dev") else None
        if mounts is not None:
            _join_mounts(request, mounts)
            _null_of_its_own()
        if network is not None:
            kernel.setns(network, kernel.CLONE_NEWNET)
        elif request.get("proxy_net"):
            step = "network"
            _own_network(report)
            step = "sandbox"
        own_pids = bool(request.get("pid"))
        if own_pids:
            kernel.unshare(kernel.CLONE_NEWPID)
        if ruleset is not None:
            _restrict(ruleset, rules, launch_request.covered_root(request))
        if request.get("no_unix_sockets"):
            step = "seccomp"
            _filter_sockets(request, report)
        step = "capabilities"
        kernel.drop_capabilities()
        step = "chdir"
        os.chdir(str(request["cwd"]))
        umask = request.get("umask")
        if isinstance(umask, int):  # toolrt's of now (this server's dates from its start)
            os.umask(umask)
        if own_pids:
            step = "fork"
            _become_init(report)
        step = "exec"
        _exec(request, report)
    except OSError as error:  # the program's or the directory's error as its number; the sandbox's in words
        said = step if step in ("exec", "chdir") else f"{step}: {error}".replace("\n", " ")
        os.write(report, f"{error.errno or 0} {said}".encode()[:512])
    except BaseException as error:  # a bug must still reach the caller, and never run unsandboxed
        os.write(report, f"0 {step}: {type(error).__name__}: {error}".encode()[:512])
    finally:
        os._exit(127)


# The steps of `_child`, each in the forked child (no threads, nothing that allocates much: every object
# touched after the fork costs a copy-on-write page).


def _start_session(server: int) -> None:
    """A session of its own (its own process group, which toolrt kills whole), ended with the server."""
    os.setsid()
    kernel.set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != server:  # the server died before the kernel watched it
        os._exit(127)


def _attach_stdio(stdio: list[int]) -> None:
    """The request's descriptors as stdin, stdout and stderr, and the signals a program expects at default."""
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
    for signum in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)


def _join_mounts(request: dict[str, object], mounts: int) -> None:
    """Join the kept mount namespace; with a minimal /dev, in a copy of it with a devpts of its own."""
    kernel.setns(mounts, kernel.CLONE_NEWNS)
    if request.get("dev") and not request.get("cover"):  # a copy of the kept one, for its terminals
        kernel.unshare(kernel.CLONE_NEWNS)
        kernel.own_terminals()


def _null_of_its_own() -> None:
    """Each of stdin, stdout and stderr that is /dev/null (toolrt's, opened outside the namespace: on a
    mount of the host's, which no namespace made read-only, so `chmod 000 /proc/self/fd/0` would change
    every program's /dev/null) opened again in the namespace joined, for the same access."""
    for target in range(3):
        info = os.fstat(target)
        if stat.S_ISCHR(info.st_mode) and info.st_rdev == os.makedev(1, 3):
            null = os.open("/dev/null", fcntl.fcntl(target, fcntl.F_GETFL) & os.O_ACCMODE | os.O_CLOEXEC)
            os.dup2(null, target)
            os.close(null)


def _own_network(report: int) -> None:
    """A network namespace of its own, whose one listener goes to toolrt's proxy."""
    kernel.unshare(kernel.CLONE_NEWNET)
    listener = loopback.proxy_listener()
    socket.send_fds(socket.socket(fileno=os.dup(report)), [b"N"], [listener])
    os.close(listener)


def _restrict(ruleset: int, rules: kernel.LandlockRules | None, covered_root: str | None) -> None:
    """Enforce the Landlock ruleset (with `rules`, a child's own: granting it its own devpts first, and
    its covered root's overlay)."""
    if rules is not None:
        kernel.grant_own_terminals(ruleset, rules, covered_root)  # this process's own devpts and overlay
    kernel.restrict_with(ruleset)


def _filter_sockets(request: dict[str, object], report: int) -> None:
    """The seccomp filter on UNIX sockets: refusing them, or with an allow-list supervised by toolrt."""
    kernel.set_no_new_privs()
    if request.get("supervise_unix"):  # the listener goes to toolrt, whose supervisor answers it
        listener = seccomp.supervise_unix_sockets()
        socket.send_fds(socket.socket(fileno=os.dup(report)), [b"L"], [listener])
        os.close(listener)
    else:
        seccomp.refuse_unix_sockets()


def _become_init(report: int) -> None:
    """Fork the PID namespace's init, which returns to exec the program; this process stays its stand-in."""
    # The stand-in never execs: it holds the server's memory, toolrt's environment included,
    # and sits in the program's Landlock domain. Untraceable from before the fork, the program
    # can neither read it nor see it in /proc; its own exec makes the init dumpable again.
    kernel.set_undumpable()
    stand_in = os.pidfd_open(os.getpid())
    _wait_for_init(os.fork(), report)  # never returns in this process; the child goes on
    kernel.set_parent_death_signal(signal.SIGKILL)
    # The init's parent is outside its namespace (getppid() is 0): its pidfd says whether it died first.
    if kernel.wait_readable(stand_in, 0):
        os._exit(127)
    os.close(stand_in)


def _exec(request: dict[str, object], report: int) -> None:
    """Close every descriptor but the report pipe (close-on-exec) and exec the program."""
    kernel.closerange_except([report])
    argv = [str(a) for a in request["argv"]]  # type: ignore[attr-defined]
    env = {str(k): str(v) for k, v in request["env"].items()}  # type: ignore[attr-defined]
    os.execvpe(argv[0], argv, env)


def _wait_for_init(pid: int, report: int) -> None:
    """In the process that made a PID namespace: when `pid` is 0 (the child, the namespace's init),
    return; otherwise stay as the program's stand-in (its pid is the one toolrt knows and signals) until
    the init exits, then exit the same way. A signal that would end the stand-in goes on to the init
    (which, as every init, keeps only those it handles); SIGKILL reaches the init directly (same process
    group) and ends everything in the namespace: `setsid`, `nohup`, double forks, `disown`. An init
    that left the group is killed by the server once this process ends (see `_Server._reap`)."""
    if pid == 0:
        return
    os.write(report, f"I{pid}\n".encode())  # the server kills the init whenever this process ends
    os.close(report)
    for fd in (0, 1, 2):
        os.close(fd)
    kernel.closerange_except([])

    def pass_on(signum: int, frame: object) -> None:
        os.kill(pid, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, pass_on)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):  # end the same way, so the server reports the same status
        ended_by = os.WTERMSIG(status)
        if ended_by not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(ended_by, signal.SIG_DFL)
        os.kill(os.getpid(), ended_by)
    os._exit(os.waitstatus_to_exitcode(status))


def _kill(pidfd: int) -> None:
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass  # it has ended


class _Server:
    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.selector = selectors.DefaultSelector()
        self.selector.register(control, selectors.EVENT_READ, None)
        self.children: dict[int, tuple[int, socket.socket, int | None, int | None]] = {}
        """pidfd → (pid, status channel, its single-use mount namespace or None, a pidfd of its PID
        namespace's init or None)."""
        self.closing: list[int] = []
        """Single-use namespaces whose process ended: closed (unmounted) when the server is idle."""
        self.open = True
        self.kept = _Kept()

    def run(self) -> None:
        while self.open or self.children:
            ready = self.selector.select(0.02 if self.closing else None)
            if not ready and self.closing:
                os.close(self.closing.pop())
            for key, _ in ready:
                if key.data is None:
                    self._accept()
                else:
                    self._reap(key.fd)
        for fd in self.closing:
            os.close(fd)

    def _accept(self) -> None:
        try:
            message, fds, _, _ = socket.recv_fds(self.control, 16, 4)
        except OSError:
            message, fds = b"", []
        if not message:  # toolrt closed the socket, or died: nothing it started may outlive it
            self.open = False
            self.selector.unregister(self.control)
            for fd in fds:
                os.close(fd)
            for pid, _, _, init in self.children.values():
                try:
                    os.killpg(pid, signal.SIGKILL)  # not reaped yet, so the group is still the child's
                except OSError:
                    pass
                if init is not None:
                    _kill(init)
            return
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            return
        *stdio, channel_fd = fds
        channel = socket.socket(fileno=channel_fd)
        try:
            self._spawn(channel, stdio)
        except (OSError, EOFError, ValueError) as error:
            try:
                channel.sendall(f"E0 request: {error}\n".encode())
            except OSError:
                pass
            channel.close()
        finally:
            for fd in stdio:
                os.close(fd)

    def _spawn(self, channel: socket.socket, stdio: list[int]) -> None:
        request = _read_request(channel)
        try:
            kept = self.kept.prepare(request)
        except OSError as error:
            channel.sendall(f"E{error.errno or 0} sandbox: {error}".replace("\n", " ").encode()[:512] + b"\n")
            channel.close()
            return
        supervised = bool(request.get("supervise_unix") or request.get("proxy_net"))
        if supervised:  # a seqpacket pair: the child sends its listeners first (proxy, seccomp), then any failure
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            report_read, report_write = ours.detach(), theirs.detach()
        else:
            report_read, report_write = os.pipe2(os.O_CLOEXEC)
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(report_read)
            _child(request, stdio, report_write, kept, server)
        os.close(report_write)
        if request.get("dev") and kept[2] is not None:
            os.close(kept[2])  # the child's own (`_Kept.own_ruleset`)
        failure, listeners = _read_report(report_read, supervised)
        init, failure = _init_of(failure)
        single_use = kept[0] if request.get("cover") else None
        if failure:
            for fd in listeners:
                os.close(fd)
            if init is not None:
                os.close(init)
            os.waitpid(pid, 0)
            if single_use is not None:
                self.closing.append(single_use)
            channel.sendall(b"E" + failure + b"\n")
            channel.close()
            return
        socket.send_fds(channel, [f"P{pid}\n".encode()], listeners[:2])
        for fd in listeners:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = (pid, channel, single_use, init)
        self.selector.register(pidfd, selectors.EVENT_READ, pid)
        self.kept.make_spare()

    def _reap(self, pidfd: int) -> None:
        pid, channel, single_use, init = self.children.pop(pidfd)
        if init is not None:
            # A stand-in ends after its init, unless it was killed: then the init, which may have left the
            # stand-in's process group (setsid) and cleared its parent-death signal, is killed here.
            _kill(init)
            os.close(init)
        if single_use is not None:
            self.closing.append(single_use)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        try:
            channel.sendall(f"X{os.waitstatus_to_exitcode(status)}\n".encode())
        except OSError:
            pass  # the client went away; nothing left to tell
        channel.close()


def _read_request(channel: socket.socket) -> dict[str, object]:
    """One request: its length (4 bytes, big-endian), then its JSON."""
    channel.settimeout(_REQUEST_TIMEOUT)
    (size,) = struct.unpack(">I", _read_exact(channel, 4))
    request: dict[str, object] = json.loads(_read_exact(channel, size))
    return request


def _read_report(report_read: int, supervised: bool) -> tuple[bytes, list[int]]:
    """What the child reported until it exec'd or exited (its failure, or its stand-in's `I<pid>` line), and the
    listeners it sent (`supervised`: over a seqpacket socket, else a pipe); closes `report_read`."""
    failure = b""
    listeners: list[int] = []
    report = socket.socket(fileno=report_read) if supervised else None
    while True:
        if report is not None:
            chunk, fds, _, _ = socket.recv_fds(report, 512, 1)
        else:
            chunk, fds = os.read(report_read, 512), []
        listeners.extend(fds)
        if not chunk:
            break
        if not fds:
            failure += chunk
    if report is not None:
        report.close()
    else:
        os.close(report_read)
    return failure, listeners


def _init_of(report: bytes) -> tuple[int | None, bytes]:
    """A pidfd of the init a stand-in reported (`I<pid>` first; None: none, or already gone), and the rest of
    the report (the init's failure, if any)."""
    if not report.startswith(b"I"):
        return None, report
    line, _, failure = report.partition(b"\n")
    try:
        return os.pidfd_open(int(line[1:])), failure
    except (OSError, ValueError):
        return None, failure  # already gone (reaped by its stand-in, which then exits too)


def main(argv: list[str]) -> int:
    control = socket.socket(fileno=int(argv[1]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is for toolrt, which tells us by closing the socket
    control.send(json.dumps(_capabilities()).encode())
    # Work every child would repeat after its fork, where each object touched costs a copy-on-write page:
    # the capability bounding set (which they inherit) and the seccomp filter (built once, inherited).
    kernel.empty_bounding_set(for_children=True)
    if seccomp.supported():
        seccomp.prepare()
        seccomp.prepare(supervised=True)
    _Server(control).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
