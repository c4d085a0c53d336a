"""What this machine can enforce, found once per process by asking the kernel (never assumed).

Two ways to start a sandboxed process, both without Python between fork and exec in a threaded
process:

- `thread`: a fresh thread of toolrt enters its own mount and network namespaces when needed
  (unshare is per thread, given CAP_SYS_ADMIN), restricts itself with Landlock (per thread before
  ABI 8), and starts the process with `subprocess` (fork and exec in C): the child inherits all of
  it, and the thread ends. Costs about a thread start.
- `forkserver`: for unprivileged users, whose namespaces need a user namespace, which a threaded
  process cannot enter: the single-threaded fork server (`forkserver.py`) does it.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import threading
from dataclasses import dataclass
from typing import Literal

from . import kernel
from .seatbelt import SANDBOX_EXEC

__all__ = ["Support", "detect_support", "probe_thread_namespaces"]

Launch = Literal["thread", "forkserver", "exec", "none"]


@dataclass(frozen=True, slots=True)
class Support:
    """The mechanisms available here and how processes are started inside them."""

    landlock_abi: int
    mount_namespace: bool
    net_namespace: bool
    launch: Launch
    bwrap: str | None = None
    """Path of `bwrap` when installed (used when Landlock is missing)."""
    reason: str = ""
    """Why there is no sandbox, when there is none."""
    seatbelt: bool = False
    """macOS `sandbox-exec` is present."""
    pid_namespace: bool = False
    """Each process can get a PID namespace of its own, so that nothing it starts outlives it."""

    def describe(self) -> str:
        """One line for `toolrt validate` / `toolrt serve`: `landlock ABI 7 + netns + mountns`."""
        if self.landlock_abi:
            parts = [f"landlock ABI {self.landlock_abi}"]
            parts += ["netns"] if self.net_namespace else []
            parts += ["mountns"] if self.mount_namespace else []
            parts += ["pidns"] if self.pid_namespace else []
            return " + ".join(parts)
        if self.bwrap:
            return "bubblewrap"
        if self.seatbelt:
            return "seatbelt (sandbox-exec; untested)"
        return f"none ({self.reason})"

    @property
    def available(self) -> bool:
        return bool(self.landlock_abi or self.bwrap or self.seatbelt)


def probe_thread_namespaces() -> tuple[bool, bool, bool]:
    """(mount, net, pid): can a thread of this process make and join those namespaces without a user
    namespace? (A PID namespace is made per process: the probing thread's next child would be its init.)"""
    from .namespaces import mount_namespace, network_namespace

    found: dict[str, bool] = {}

    def probe() -> None:
        try:
            mounts = mount_namespace(())
            kernel.unshare(kernel.CLONE_FS)
            kernel.setns(mounts, kernel.CLONE_NEWNS)
            found["mount"] = True
        except OSError:
            found["mount"] = False
        try:
            kernel.setns(network_namespace(), kernel.CLONE_NEWNET)
            found["net"] = True
        except OSError:
            found["net"] = False
        try:
            kernel.unshare(kernel.CLONE_NEWPID)
            found["pid"] = True
        except OSError:
            found["pid"] = False

    thread = threading.Thread(target=probe, name="toolrt-sandbox-probe")
    thread.start()
    thread.join()
    return found.get("mount", False), found.get("net", False), found.get("pid", False)


@functools.cache
def detect_support() -> Support:
    """Query the kernel: the Landlock ABI, namespaces (in a thread, else through the fork server), bwrap."""
    bwrap = shutil.which("bwrap")
    if sys.platform == "darwin" and os.path.exists(SANDBOX_EXEC):
        return Support(0, False, False, "exec", None, seatbelt=True)
    if sys.platform != "linux":
        return Support(0, False, False, "none", None, f"no sandbox mechanism on {sys.platform}")
    abi = kernel.landlock_abi()
    if abi == 0:
        if bwrap:
            return Support(0, True, True, "exec", bwrap)
        return Support(0, False, False, "none", None, "the kernel has no Landlock and bwrap is not installed")
    mount, net, pid = probe_thread_namespaces()
    if mount and net:
        return Support(abi, True, True, "thread", bwrap, pid_namespace=pid)
    from .launcher import fork_server

    try:
        served = fork_server().support
    except OSError:
        return Support(abi, mount, net, "thread", bwrap, pid_namespace=pid)
    if (served.mount_namespace, served.net_namespace) > (mount, net):
        return Support(
            abi, served.mount_namespace, served.net_namespace, "forkserver", bwrap, pid_namespace=served.pid_namespace
        )
    return Support(abi, mount, net, "thread", bwrap, pid_namespace=pid)
