"""Run a command with `/gcs` as the job's Cloud Storage folder, in a mount namespace of its own (Linux).

    python -I -S gcs_namespace.py FOLDER STAGE GUARD -- COMMAND...    # then exec COMMAND
    python -I -S gcs_namespace.py --probe FOLDER STAGE                # can it be done here? (exit 0 / 1)

On Vertex every replica sees Cloud Storage at `/gcs/BUCKET/...` (Cloud Storage FUSE). Here the job's
gs:// space is a folder (`<run folder>/gcs`, or the emulator's), and this script makes the command, and
every process it starts, see that folder at `/gcs`, while nothing on the host's own `/gcs` is created or
changed:

1. A mount namespace of its own: `unshare(CLONE_NEWNS)` as root; as any other user together with a user
   namespace in which the user keeps its own uid and gid (no root pretence: after `exec` it has no
   capabilities left, and files it writes are the user's, as before). Mounts are private from then on,
   so none of them propagates to the host.
2. If the host has a folder `/gcs`, FOLDER is bind-mounted over it, in this namespace only.
3. If it has none, `/` cannot get one without changing the host (and `/` cannot be covered by a tmpfs
   without hiding everything). So a new root is made instead: a tmpfs mounted on STAGE (an empty folder of
   the job's own), in it an entry per entry of the host's `/` (folders and files bind-mounted recursively,
   so /proc, /dev, /dev/shm, /sys, /tmp and /home are the host's, links copied), plus `gcs`, on which FOLDER
   is bind-mounted; the tmpfs is then made read-only and the process chroots into it, at the same working
   folder. Every path is the host's but `/gcs`; the host's `/` never sees it.

The namespace is inherited: torchrun's workers, Ray's daemons, a shell's children all see the same `/gcs`.
When it cannot be made (user namespaces disabled, AppArmor's restriction, a container without
CAP_SYS_ADMIN) the command runs anyway, told why in VERTEXDIST_GCS_UNMAPPED, with GUARD first on PYTHONPATH:
its sitecustomize turns any Python access to `/gcs` into that message (`gcs_guard`).

Standard library only, no vertexdist import: it runs with `-I -S`, before the command, for every replica.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 0x2
MOUNT_POINT = "/gcs"
UNMAPPED_VARIABLE = "VERTEXDIST_GCS_UNMAPPED"
SYSCTL = "/proc/sys/"


class Unmappable(Exception):
    """Why `/gcs` cannot be mapped here, and what would make it possible."""

    def __init__(self, why: str, fix: str) -> None:
        super().__init__(why)
        self.why = why
        self.fix = fix


def _sysctl(name: str) -> str:
    try:
        with open(SYSCTL + name.replace(".", "/")) as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _why_no_user_namespace(error: int) -> Unmappable:
    if _sysctl("kernel.unprivileged_userns_clone") == "0":
        return Unmappable(
            "unprivileged user namespaces are disabled here (kernel.unprivileged_userns_clone = 0)",
            "sudo sysctl -w kernel.unprivileged_userns_clone=1",
        )
    if _sysctl("user.max_user_namespaces") == "0":
        return Unmappable(
            "user namespaces are disabled on this machine (user.max_user_namespaces = 0)",
            "sudo sysctl -w user.max_user_namespaces=15000",
        )
    if error == errno.ENOSPC:
        return Unmappable(
            "this user may make no more user namespaces (user.max_user_namespaces is reached)",
            "sudo sysctl -w user.max_user_namespaces=15000",
        )
    return Unmappable(
        f"this process may not make a user namespace ({os.strerror(error)}; in a container without"
        " CAP_SYS_ADMIN, or under a seccomp profile that forbids unshare?)",
        "",
    )


def _why_no_mount(error: int, what: str) -> Unmappable:
    if _sysctl("kernel.apparmor_restrict_unprivileged_userns") == "1":
        return Unmappable(
            "AppArmor restricts unprivileged user namespaces on this machine"
            " (kernel.apparmor_restrict_unprivileged_userns = 1, as Ubuntu 23.10 and later set it)",
            "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile"
            " that allows `userns` for this Python",
        )
    return Unmappable(f"{what} failed ({os.strerror(error)})", "")


class _MountFailed(OSError):
    """A mount(2) call that failed: `what` says which."""

    def __init__(self, error: int, what: str) -> None:
        super().__init__(error, os.strerror(error))
        self.what = what


class _Libc:
    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)

    def _call(self, result: int) -> int:
        return 0 if result == 0 else ctypes.get_errno() or errno.EPERM

    def unshare(self, flags: int) -> int:
        return self._call(self._libc.unshare(ctypes.c_int(flags)))

    def mount(self, source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
        result = self._call(
            self._libc.mount(
                source.encode() if source else None,
                target.encode(),
                fstype.encode() if fstype else None,
                ctypes.c_ulong(flags),
                data.encode() if data else None,
            )
        )
        if result:
            raise _MountFailed(result, f"mount {source or fstype or ''} on {target}")

    def umount(self, target: str) -> None:
        self._libc.umount2(target.encode(), ctypes.c_int(MNT_DETACH))


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _enter_namespace(libc: _Libc) -> None:
    """A mount namespace of this process's own (with a user namespace unless root), mounts private."""
    uid, gid = os.geteuid(), os.getegid()
    error = libc.unshare(CLONE_NEWNS) if uid == 0 else errno.EPERM
    if error and uid == 0 and error != errno.EPERM:
        raise _why_no_mount(error, "unshare(CLONE_NEWNS)")
    if error:  # not root, or root without CAP_SYS_ADMIN (in a container): a user namespace of its own
        error = libc.unshare(CLONE_NEWUSER | CLONE_NEWNS)
        if error:
            raise _why_no_user_namespace(error)
        try:
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
            _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
        except OSError as exc:
            raise _why_no_mount(exc.errno or errno.EPERM, "mapping this user into its namespace") from None
    try:
        libc.mount(None, "/", None, MS_REC | MS_PRIVATE)
    except _MountFailed as exc:
        raise _why_no_mount(exc.errno or errno.EPERM, "making the mounts private") from None


def _new_root(libc: _Libc, folder: str, stage: str) -> None:
    """`/` again, with `gcs` in it bound to `folder`, on a tmpfs at `stage`; then chroot into it."""
    os.makedirs(stage, mode=0o700, exist_ok=True)
    libc.mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")
    for name in sorted(os.listdir("/")):
        if name == MOUNT_POINT.lstrip("/"):
            continue  # a link or file named gcs on the host: not the job's
        source, target = "/" + name, os.path.join(stage, name)
        try:
            info = os.lstat(source)
            if stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(source), target)
                continue
            if stat.S_ISDIR(info.st_mode):
                os.mkdir(target, stat.S_IMODE(info.st_mode))
            elif stat.S_ISREG(info.st_mode):
                os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
            else:
                continue  # a socket or device at the top of / : nothing runs from there
            libc.mount(source, target, None, MS_BIND | MS_REC)
        except OSError:
            continue  # an entry this user may not see (lost+found, say) stays out of its root
    os.mkdir(os.path.join(stage, MOUNT_POINT.lstrip("/")), 0o755)
    libc.mount(folder, os.path.join(stage, MOUNT_POINT.lstrip("/")), None, MS_BIND | MS_REC)
    libc.mount(None, stage, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    cwd = os.getcwd()
    os.chroot(stage)
    libc.umount(stage)  # the copy of the new root inside itself (STAGE is under a bound folder)
    try:
        os.chdir(cwd)
    except OSError:
        os.chdir("/")


def map_gcs(folder: str, stage: str) -> None:
    """Make `/gcs` be `folder` for this process and its children; Unmappable if it cannot be done."""
    if not sys.platform.startswith("linux"):
        raise Unmappable(
            f"mount namespaces, which map /gcs without touching the host's, are Linux's ({sys.platform} has"
            " none)",
            "",
        )
    folder = os.path.realpath(folder)
    libc = _Libc()
    _enter_namespace(libc)
    try:
        if os.path.isdir(MOUNT_POINT) and not os.path.islink(MOUNT_POINT):
            libc.mount(folder, MOUNT_POINT, None, MS_BIND | MS_REC)
        else:
            _new_root(libc, folder, stage)
    except _MountFailed as exc:
        raise _why_no_mount(exc.errno or errno.EPERM, exc.what) from None
    except OSError as exc:
        raise _why_no_mount(exc.errno or errno.EPERM, f"making the root with /gcs ({exc.filename})") from None


def unmapped_reason(problem: Unmappable) -> str:
    """One line: why /gcs is not the job's here, and what to do."""
    docker = "run with --docker (it binds the job's storage folder at /gcs)"
    fix = f"{problem.fix}, or {docker}" if problem.fix else docker
    return f"/gcs is not this job's Cloud Storage here: {problem.why}. Paths under /gcs fail; for /gcs, {fix}"


def _exec(argv: list[str], env: dict[str, str] | None = None) -> None:
    try:
        if env is None:
            os.execvp(argv[0], argv)
        else:
            os.execvpe(argv[0], argv, env)
    except OSError as exc:
        sys.stderr.write(f"vertexdist: cannot start {argv[0]}: {exc}\n")
        sys.stderr.flush()
        os._exit(127)


def main(args: list[str]) -> int:
    if args[:1] == ["--probe"] and len(args) == 3:
        try:
            map_gcs(args[1], args[2])
        except Unmappable as problem:
            sys.stdout.write(unmapped_reason(problem) + "\n")
            return 1
        return 0
    if len(args) < 5 or args[3] != "--":
        sys.stderr.write("usage: gcs_namespace.py FOLDER STAGE GUARD -- COMMAND...\n")
        return 2
    folder, stage, guard, argv = args[0], args[1], args[2], args[4:]
    try:
        map_gcs(folder, stage)
    except Unmappable as problem:
        reason = unmapped_reason(problem)
        sys.stderr.write(f"vertexdist: {reason}\n")
        sys.stderr.flush()
        env = dict(os.environ)
        env[UNMAPPED_VARIABLE] = reason
        env["PYTHONPATH"] = os.pathsep.join(p for p in (guard, env.get("PYTHONPATH", "")) if p)
        _exec(argv, env)
    _exec(argv)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
