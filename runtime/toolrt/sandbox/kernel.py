"""The Linux system calls the sandbox needs, through ctypes: Landlock, namespaces, bind mounts.

Standard library only: the fork server runs this module under `python -I -S`, outside the toolrt
package, so that it starts in milliseconds and imports nothing a project could shadow.

Landlock rights are enabled best effort: only those the running kernel's ABI knows are handled, and
`landlock_abi()` says which ABI that was, so the caller can report what was enforced.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import select
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

if __package__:
    from .binds import (
        RESOLVE_IN_ROOT,
        RESOLVE_NO_MAGICLINKS,
        RESOLVE_NO_SYMLINKS,
        bind_read_only,
        open_directory,
        openat2,
        read_only_elsewhere,
    )
    from .devices import minimal_dev, own_proc, own_terminals
else:  # run by path under `python -I -S`, outside the package (the fork server)
    from binds import (  # type: ignore[import-not-found,no-redef]
        RESOLVE_IN_ROOT,
        RESOLVE_NO_MAGICLINKS,
        RESOLVE_NO_SYMLINKS,
        bind_read_only,
        open_directory,
        openat2,
        read_only_elsewhere,
    )
    from devices import minimal_dev, own_proc, own_terminals  # type: ignore[import-not-found,no-redef]

__all__ = [
    "current_umask",
    "CLONE_FS",
    "SandboxSetupError",
    "cover_absent",
    "covered_mounts",
    "build_ruleset",
    "RuleTemplate",
    "identity_key",
    "mounted_identity_key",
    "restrict_with",
    "setns",
    "CLONE_NEWNET",
    "CLONE_NEWNS",
    "CLONE_NEWPID",
    "CLONE_NEWUSER",
    "LandlockRules",
    "drop_capabilities",
    "grant_own_terminals",
    "own_terminals",
    "empty_bounding_set",
    "landlock_abi",
    "make_mounts_private",
    "open_in_root",
    "set_no_new_privs",
    "set_parent_death_signal",
    "unshare",
]

CLONE_FS = 0x00000200
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

_SYSCALLS = {  # (create_ruleset, add_rule, restrict_self): the same numbers on every architecture since 5.13
    "x86_64": (444, 445, 446),
    "aarch64": (444, 445, 446),
    "arm64": (444, 445, 446),
    "riscv64": (444, 445, 446),
    "ppc64le": (444, 445, 446),
    "s390x": (444, 445, 446),
}
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP = 24
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

# Filesystem rights, with the ABI that introduced each.
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
FS_READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
FS_FILE_ONLY = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
"""The rights a rule on a file (not a directory) may carry."""

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p)

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
# statvfs flags that a read-only remount must keep, else the kernel refuses it in a user namespace.
_KEPT_FLAGS = os.ST_NOSUID | os.ST_NODEV | os.ST_NOEXEC | os.ST_NOATIME | os.ST_NODIRATIME | os.ST_RELATIME


class SandboxSetupError(OSError):
    """The sandbox could not be applied; the process was not started (fail closed)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32))


_AT_FDCWD = -100


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def _fail(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)}")


def _numbers() -> tuple[int, int, int] | None:
    return _SYSCALLS.get(platform.machine()) if platform.system() == "Linux" else None


def landlock_abi() -> int:
    """The Landlock ABI version the kernel offers; 0 when Landlock is absent or disabled."""
    numbers = _numbers()
    if numbers is None:
        return 0
    version = int(_libc.syscall(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)))
    return max(version, 0)


class LandlockRules:
    """A ruleset being built: which rights are handled, which paths get which of them."""

    def __init__(self, abi: int, *, deny_tcp: bool, scope_signals: bool, scope_abstract_unix: bool) -> None:
        self.abi = abi
        self.fs = _FS_BY_ABI.get(abi, _FS_BY_ABI[5])
        self.net = NET_BIND_TCP | NET_CONNECT_TCP if deny_tcp and abi >= 4 else 0
        scoped = 0
        if abi >= 6:
            scoped |= SCOPE_SIGNAL if scope_signals else 0
            scoped |= SCOPE_ABSTRACT_UNIX_SOCKET if scope_abstract_unix else 0
        self.scoped = scoped
        self.paths: list[tuple[str, int]] = []

    def allow(self, path: str, rights: int) -> None:
        self.paths.append((path, rights))

    def key(self) -> tuple[object, ...]:
        """What makes two rulesets the same (for keeping built ones): the rules, and the device and
        inode each path has now. A ruleset holds the inodes its paths had when it was built, so a
        directory replaced on disk, or a path that did not exist then, gives another key."""
        return (self.abi, self.fs, self.net, self.scoped, tuple(self.paths), identity_key(p for p, _ in self.paths))


def _existing(paths: Iterable[str]) -> Iterator[tuple[str, os.stat_result]]:
    """Each path that exists, with its `lstat`."""
    for path in paths:
        try:
            yield path, os.lstat(path)
        except FileNotFoundError:
            continue


def identity_key(paths: Iterable[str]) -> tuple[tuple[str, int, int], ...]:
    """(path, device, inode) of each existing path: a kept mount namespace is made for exactly these."""
    return tuple((path, info.st_dev, info.st_ino) for path, info in _existing(paths))


def mounted_identity_key(paths: Iterable[str]) -> tuple[tuple[str, int, int, int], ...]:
    """(path, device, inode, change time) of each existing path a kept mount namespace mounts on: the
    change time of a file that is no directory, 0 of a directory. Unlinking a file detaches the mounts
    on it in every other namespace, and the file put at its name can have the same device and inode (a
    hard link renamed into place; an inode number handed out again, as ext4 does after `git checkout`
    rewrites a file): its link count changed, or it is a new inode, so its change time differs and the
    namespace whose mount went with the old name entry is not used for it. (A directory's change time
    moves with every entry made in it: for one, the key stays its device and inode.) A symlink is
    followed by the mount: what it names is keyed too, so that file saved by a rename over it (the link
    left as it is) gets a fresh namespace."""
    key = []
    for path, info in _existing(paths):
        key.append(_mounted_identity(path, info))
        if stat.S_ISLNK(info.st_mode):
            try:
                key.append(_mounted_identity(path, os.stat(path)))
            except OSError:
                pass  # a dangling link (or a loop) is not mounted
    return tuple(key)


def _mounted_identity(path: str, info: os.stat_result) -> tuple[str, int, int, int]:
    return (path, info.st_dev, info.st_ino, 0 if stat.S_ISDIR(info.st_mode) else info.st_ctime_ns)


def build_ruleset(rules: LandlockRules) -> int:
    """A Landlock ruleset fd holding `rules` (close it when done). Paths that do not exist are skipped
    (a missing /dev/tty is no reason to fail). Raises OSError when the kernel refuses."""
    template = RuleTemplate(rules)
    try:
        return template.build()
    finally:
        template.close()


_NO_FLAGS = ctypes.c_uint32(0)


class RuleTemplate:
    """`rules` with each path opened once (O_PATH) and its rights worked out: a ruleset of its own for
    each process (see `grant_own_terminals`) then costs one system call per rule, not four. Holds the
    inodes its paths had when made, as a built ruleset does (keep it by `LandlockRules.key`). Paths
    that do not exist are skipped. Raises OSError when Landlock is missing."""

    def __init__(self, rules: LandlockRules) -> None:
        numbers = _numbers()
        if numbers is None:
            raise OSError(38, "Landlock is only available on Linux")
        self._create, self._add_rule = numbers[0], numbers[1]
        self._attr = _RulesetAttr(rules.fs, rules.net, rules.scoped)
        self._size = 8 if rules.abi < 4 else 16 if rules.abi < 6 else 24
        self._rules: list[tuple[str, _PathBeneathAttr]] = []
        try:
            for path, rights in rules.paths:
                try:
                    fd = _open_rule_path(path, rights)
                except (FileNotFoundError, _LinkOnTheWay):
                    continue
                allowed = rights & rules.fs
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    allowed &= FS_FILE_ONLY
                self._rules.append((path, _PathBeneathAttr(allowed, fd)))
        except BaseException:
            self.close()
            raise

    def build(self) -> int:
        """A new ruleset fd holding the rules (close it when done)."""
        ruleset = int(_libc.syscall(self._create, ctypes.byref(self._attr), ctypes.c_size_t(self._size), _NO_FLAGS))
        if ruleset < 0:
            raise _fail("landlock_create_ruleset")
        try:
            for path, beneath in self._rules:
                if _libc.syscall(self._add_rule, ruleset, _RULE_PATH_BENEATH, ctypes.byref(beneath), _NO_FLAGS) < 0:
                    raise _fail(f"landlock_add_rule {path}")
        except BaseException:
            os.close(ruleset)
            raise
        return ruleset

    def close(self) -> None:
        for _, beneath in self._rules:
            os.close(beneath.parent_fd)
        self._rules.clear()


class _LinkOnTheWay(OSError):
    """A writable rule's path passes through a symlink now: the rule is left out."""


def _open_rule_path(path: str, rights: int) -> int:
    """An O_PATH descriptor for a rule. A rule that lets files be made is opened without following any
    symlink on the way (openat2 `RESOLVE_NO_SYMLINKS`): the plan resolved its path, so a link found now
    was put there since (a tool-output directory swapped for a link to `/`), and the rule is left out
    rather than widened to wherever the link points."""
    if not rights & FS_MAKE_REG:
        return os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        return openat2(_AT_FDCWD, path, os.O_PATH | os.O_CLOEXEC, RESOLVE_NO_SYMLINKS)
    except OSError as error:
        code = error.errno or 0
    if code == errno.ENOENT:
        raise FileNotFoundError(code, os.strerror(code), path)
    if code == errno.ELOOP:
        raise _LinkOnTheWay(code, "a symlink on the way", path)
    if code not in (errno.EPERM, errno.ENOSYS):
        raise OSError(code, f"open {path}: {os.strerror(code)}")
    # openat2 filtered (a container's seccomp) or absent: at least the last component is no link.
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW)
    if stat.S_ISLNK(os.fstat(fd).st_mode):
        os.close(fd)
        raise _LinkOnTheWay(errno.ELOOP, "a symlink on the way", path)
    return fd


def open_in_root(root: int, path: str) -> int:
    """An O_PATH descriptor of `path` (absolute) resolved with `root` as `/` (another process's root,
    `/proc/PID/root`: its mount namespace's view) and no symlink on the way, not even the last component.

    Raises:
        OSError: ELOOP (a symlink on the way), ENOENT, or ENOSYS/EPERM where openat2 is missing (no
            weaker walk is tried: the caller refuses).
    """
    resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
    try:
        return openat2(root, path.lstrip("/") or ".", os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW, resolve)
    except OSError as error:
        raise OSError(error.errno, error.strerror, path) from None


TERMINALS = "/dev/pts"


def grant_own_terminals(ruleset: int, rules: LandlockRules, covered_root: str | None = None) -> None:
    """Add to `ruleset` the rights its rules give `/dev/pts`, on the `/dev/pts` of the mount namespace
    the caller has now joined. The ruleset was built on the host's directory; a minimal `/dev` has a
    devpts of its own there, one per process (`devices.own_terminals`), whose root is another inode.
    So `ruleset` must be this process's own (`build_ruleset`), never a kept one: each process it served
    would add its instance, and every later one would be granted them all. `covered_root`: a covered
    namespace's root, granted its rights on the overlay there too: Landlock ignores a mount point another
    mount hides, so the rule on the real root, under it, lets nothing in the overlay be written."""
    numbers = _numbers()
    for target in (TERMINALS, covered_root) if covered_root else (TERMINALS,):
        rights = 0
        for path, granted in rules.paths:
            if path == target:
                rights |= granted & rules.fs
        if not rights or numbers is None:
            continue
        try:  # walked from `/` without following a link (`binds.open_directory`)
            fd = open_directory(target)
        except OSError:
            continue  # nothing there: nothing to grant
        try:
            beneath = _PathBeneathAttr(rights, fd)
            if _libc.syscall(numbers[1], ruleset, _RULE_PATH_BENEATH, ctypes.byref(beneath), ctypes.c_uint32(0)) < 0:
                raise _fail(f"landlock_add_rule {target}")
        finally:
            os.close(fd)


def restrict_with(ruleset: int) -> None:
    """Enforce a built ruleset on the calling thread and every process it later starts."""
    numbers = _numbers()
    if numbers is None:
        raise OSError(38, "Landlock is only available on Linux")
    set_no_new_privs()
    if _libc.syscall(numbers[2], ruleset, ctypes.c_uint32(0)) < 0:
        raise _fail("landlock_restrict_self")


def wait_readable(fd: int, timeout: float | None = None) -> bool:
    """Whether `fd` (a pidfd, a socket) became readable within `timeout` seconds (None: wait for it).
    `poll`, not `select`: a process with many descriptors open hands out numbers past select's 1024."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(None if timeout is None else timeout * 1000))


def current_umask() -> int | None:
    """The calling thread's umask, without setting it (`os.umask` can only set it, and two calls would leave
    another thread's files made between them under a wrong one); None where the kernel does not say
    (before Linux 4.7)."""
    try:
        with open("/proc/thread-self/status", "rb") as status:
            for line in status:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return None


def set_parent_death_signal(signum: int) -> None:
    """Have the kernel send `signum` to the calling process when its parent exits."""
    if _libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) != 0:
        raise _fail("prctl(PR_SET_PDEATHSIG)")


def set_undumpable() -> None:
    """Make the calling process untraceable by its user (its `/proc/PID/environ`, `mem`, `fd` need
    CAP_SYS_PTRACE; `hidepid=invisible` hides it). An `exec` makes the new program dumpable again."""
    if _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise _fail("prctl(PR_SET_DUMPABLE)")


def set_no_new_privs() -> None:
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _fail("prctl(PR_SET_NO_NEW_PRIVS)")


def unshare(flags: int) -> None:
    if _libc.unshare(ctypes.c_int(flags)) != 0:
        raise _fail("unshare")


def setns(fd: int, nstype: int) -> None:
    """Move the calling thread into the namespace `fd` refers to (joining a mount namespace also moves
    its root and working directory to that namespace's root)."""
    if _libc.setns(ctypes.c_int(fd), ctypes.c_int(nstype)) != 0:
        raise _fail("setns")


def _mount(source: bytes | None, target: bytes, flags: int, fstype: bytes | None = None) -> None:
    if _libc.mount(source, target, fstype, ctypes.c_ulong(flags), None) != 0:
        raise _fail(f"mount {target.decode(errors='replace')}")


def make_mounts_private() -> None:
    """Stop mounts made from here on from propagating back to the namespace we came from."""
    _mount(b"none", b"/", MS_REC | MS_PRIVATE)


def mask(
    files: Iterable[str], directories: Iterable[str], empty: str, sources: Mapping[str, str] | None = None
) -> None:
    """Cover each existing directory with an empty read-only tmpfs and each existing regular file with
    the empty file `empty` (or the file `sources` names for it), bound read-only (in a private mount
    namespace). A path that is gone, or is no longer what it was (a symlink now), is left alone: a mount
    would follow the link. The sources lie in a temp directory a sandboxed process may write: one that
    is no regular file, or that another file took the place of while it was mounted (a symlink to a
    secret put there between the check and the mount), fails the setup rather than show what it points to.

    Raises:
        SandboxSetupError: a source is no regular file, or the file mounted is not the one checked.
    """
    hidden = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    for path in directories:
        if _is(path, stat.S_ISDIR):
            _mount(b"toolrt-masked", os.fsencode(path), hidden, b"tmpfs")
    sources = sources or {}
    for path in files:
        if _is(path, stat.S_ISREG):
            source, target = sources.get(path, empty), os.fsencode(path)
            checked = os.lstat(source)
            if not stat.S_ISREG(checked.st_mode):
                raise SandboxSetupError(f"the file to mask {path} with, {source}, is no regular file")
            kept = os.statvfs(source).f_flag & _KEPT_FLAGS
            _mount(os.fsencode(source), target, MS_BIND)
            mounted = os.stat(target)
            if (mounted.st_dev, mounted.st_ino) != (checked.st_dev, checked.st_ino):
                raise SandboxSetupError(f"the file to mask {path} with, {source}, was replaced while it was mounted")
            _mount(None, target, MS_REMOUNT | MS_BIND | hidden | kept)


def _is(path: str, kind: Callable[[int], bool]) -> bool:
    try:
        return kind(os.lstat(path).st_mode)
    except OSError:
        return False


def make_mounts(key: tuple[Any, ...], *, dev: bool = True, beneath: str | None = None) -> None:
    """In a fresh private mount namespace: the mounts a `launch_request.mount_key` describes (`dev`: its minimal /dev
    and own /proc too; False: they came with the namespace this one was copied from, and only its
    terminals are made anew, see `own_terminals`; `beneath`: see `binds.bind_read_only`), every mount
    outside its writable directories read-only first (`read_only_elsewhere`; a covered namespace's
    after its overlay, see `covered_mounts`)."""
    if key[0] and dev:
        minimal_dev()
        own_proc()
    elif key[0]:
        own_terminals()
    if beneath is None:
        read_only_outside(key)
    bind_read_only([entry[0] for entry in key[1]], [entry[0] for entry in key[5]], beneath)
    if key[4]:
        mask([entry[0] for entry in key[2]], [entry[0] for entry in key[3]], key[4], dict(key[6]))


def cover_base(dev: bool, cover: Mapping[str, Any]) -> None:
    """In a fresh mount namespace: what every covered namespace made from it shares, outside the project
    root (see `cover_absent`): the overlay's read-only lower layer and, with `dev`, the minimal /dev and
    own /proc. A covered namespace copied from it (`unshare` after `setns`) copies these mounts instead
    of making them, and adds only `cover_root` and the mounts beneath the root (`make_mounts(dev=False)`)."""
    make_mounts_private()
    cover_lower(cover)
    if dev:
        minimal_dev()
        own_proc()


def cover_absent(cover: Mapping[str, Any]) -> None:
    """In a fresh private mount namespace made for ONE process: make the absent protected names directly
    in the project root unwritable, without creating anything in the real tree.

    `cover` is `{"root", "names", "lower", "work"}`: `lower` and `work` are directories on the root's
    filesystem outside the project (toolrt's data directory; the overlay's work directory is made in
    `work` and removed once it is mounted). A read-only tmpfs on `lower` holds an
    empty directory per absent name; an overlay whose upper layer is the root itself is mounted on the
    root, so those names exist in this namespace and nowhere else, and each is covered by a read-only
    bind of its empty directory: `mkdir`, `mv`, `ln`, a rename into place or a write beneath it fails
    (EEXIST, EBUSY, EROFS), and nothing is ever copied up. Every other name is the real one: new files,
    writes, renames and removals go straight to the real tree (one filesystem: `mv` and `ln` between
    directories work as outside). The overlay hides the mounts below the root, so it comes first and
    `make_mounts` puts the read-only paths, the pinned directories and the masks on top of it (and the
    data directory holding `lower` and `work` read-only after them).

    An overlay caches what it looked up and does not see changes made beside it, so a namespace with a
    cover serves one process and is never kept (see `namespaces.covered_namespace`); its lower layer
    can come from a kept base (`cover_base`), then only `cover_root` is made per process."""
    cover_lower(cover)
    cover_root(cover)


def covered_mounts(key: tuple[Any, ...], cover: Mapping[str, Any], *, lower: bool, dev: bool) -> None:
    """In a fresh private mount namespace for ONE process: the cover (`cover_absent`, or only `cover_root`
    on a copy of a base that holds the lower layer: not `lower`), then the mounts `key` describes
    (`make_mounts`), those beneath the root bound from the real tree. The working directory is the real
    root while the overlay is mounted on it (an overlay mounted on a directory does not move a working
    directory in it), and `/` again at the end."""
    os.chdir(str(cover["root"]))
    try:
        if lower:
            cover_lower(cover)
        cover_root(cover)
        make_mounts(key, dev=dev, beneath=str(cover["root"]))
    finally:
        os.chdir("/")
    read_only_outside(key)  # the overlay is mounted: its upper layer is its own clone of the root's mount


def read_only_outside(key: tuple[Any, ...]) -> None:
    """Every mount outside the writable directories a `launch_request.mount_key` names made read-only
    (`binds.read_only_elsewhere`); a key made without them (a request that names none) leaves the flags."""
    if len(key) > 7 and key[7] is not None:
        read_only_elsewhere(entry[0] for entry in key[7])


def cover_lower(cover: Mapping[str, Any]) -> None:
    """The overlay's lower layer: a read-only tmpfs on `lower` with an empty directory per absent name."""
    lower = os.fsencode(str(cover["lower"]))
    hidden = MS_NOSUID | MS_NODEV | MS_NOEXEC
    _mount(b"toolrt-protected", lower, hidden, b"tmpfs")
    for name in cover["names"]:
        os.mkdir(os.path.join(str(cover["lower"]), str(name)), 0o555)
    _mount(None, lower, MS_REMOUNT | MS_RDONLY | hidden)


def cover_root(cover: Mapping[str, Any]) -> None:
    """The overlay on the root over the lower layer (`cover_lower`), and each placeholder bound read-only."""
    root = str(cover["root"])
    lower = os.fsencode(str(cover["lower"]))
    # A work directory of its own, removed once mounted: this overlay never copies up or whites out
    # (every name it adds is covered read-only), so it never needs one after mounting, and two overlays
    # mounted at once never clear each other's.
    work = tempfile.mkdtemp(prefix="w", dir=str(cover["work"]))
    try:
        options = f"lowerdir={cover['lower']},upperdir={root},workdir={work},index=off,redirect_dir=off,uuid=null"
        if _libc.mount(b"toolrt-root", os.fsencode(root), b"overlay", ctypes.c_ulong(0), os.fsencode(options)) != 0:
            raise _fail(f"mount overlay on {root}")
    finally:
        for leftover in (os.path.join(work, "work"), work):
            try:
                os.rmdir(leftover)
            except OSError:
                pass
    # One bind each: the tmpfs itself is read-only (the remount above), and a bind keeps the flags of
    # the mount it is made from (nosuid, nodev, noexec), so no remount of each is needed.
    for name in cover["names"]:
        placeholder = os.fsencode(os.path.join(root, str(name)))
        _mount(os.path.join(lower, os.fsencode(str(name))), placeholder, MS_BIND)


_last_cap: list[int] = []


def _last_capability() -> int:
    if not _last_cap:
        try:
            with open("/proc/sys/kernel/cap_last_cap") as f:
                _last_cap.append(int(f.read()))
        except (OSError, ValueError):
            _last_cap.append(63)
    return _last_cap[0]


_bounding_emptied: list[bool] = []
"""Set only in the fork server, whose single thread emptied its bounding set before forking: its
children inherit the empty set and skip the 41 calls. (The bounding set is per thread: a thread of the
host process that empties its own says nothing about the next thread, so the host never sets this.)"""


def empty_bounding_set(*, for_children: bool = False) -> bool:
    """Empty the calling thread's capability bounding set (needs CAP_SETPCAP); whether it was emptied.
    Nothing it then starts can gain a capability on exec; its own effective capabilities stay.
    `for_children`: the caller is single-threaded and forks the processes that will call
    `drop_capabilities`, which then need not empty it again."""
    if _bounding_emptied:
        return True
    for cap in range(_last_capability() + 1):
        if _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EPERM:
            return False  # no CAP_SETPCAP: an unprivileged thread, whose programs gain nothing on exec anyway
    if for_children:
        _bounding_emptied.append(True)
    return True


def drop_capabilities(*, keep_permitted: bool = False, bounding_set_empty: bool = False) -> None:
    """Leave every program the calling thread then starts, root's included, without any capability: the
    bounding set emptied (where this thread may: CAP_SETPCAP), the ambient set cleared, and the
    effective, permitted and inheritable sets zeroed, so an exec as uid 0 gains none back.

    `keep_permitted`: the caller is a thread of toolrt itself (the thread launcher), which lives on beside
    the program it started, in the program's Landlock domain, sharing toolrt's memory: it keeps its
    permitted set (effective stays empty; no exec can turn it into anything, with the bounding and
    inheritable sets empty), so the kernel's ptrace check, which lets a process read another's
    `/proc/TID/environ` or `mem` only when the other holds no capability it lacks, keeps the program out of
    toolrt's environment and memory through that thread's `/proc/TID`. A thread with no capability to keep
    makes toolrt undumpable instead, which the same check refuses.

    `bounding_set_empty`: the calling thread's bounding set is already empty (inherited from the thread
    that started it, see `keeper`): the 41 calls that empty it are skipped."""
    if not bounding_set_empty:
        empty_bounding_set()
    if _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
        raise _fail("prctl(PR_CAP_AMBIENT_CLEAR_ALL)")
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if keep_permitted:
        if _libc.capget(ctypes.byref(header), data) != 0:
            raise _fail("capget")
        if not (data[0].permitted or data[1].permitted):
            set_undumpable()  # no capability to keep (an unprivileged fallback): toolrt as a whole, for good
        for word in data:
            word.effective = word.inheritable = 0
    if _libc.capset(ctypes.byref(header), data) != 0:
        raise _fail("capset")


def map_user(uid: int, gid: int) -> None:
    """In a fresh user namespace: keep our own uid and gid (no root inside unless we were root outside)."""
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")


def close_each(fds: Iterable[int]) -> None:
    """Close each descriptor of `fds`, going on past one that is already closed (a handler run at fork)."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def closerange_except(keep: Sequence[int]) -> None:
    """Close every descriptor from 3 up except those in `keep`."""
    low = 3
    for fd in sorted(k for k in keep if k >= 3):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536)
