"""The kernel layers' probe and building blocks: what `host_support` reports, the testing hook that makes a host look
weaker, the read paths Landlock grants, the seccomp list, and fail-closed `contain`."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from edsb.sandbox import host, kernel, reads, rules, view
from edsb.sandbox.kernel import MIN_LANDLOCK_ABI, PROBE_ENV, Containment, host_support
from edsb.sandbox.selfcheck import run_contained, stand_in
from tests.support.data import require_data
from tests.support.kernel_sandbox import require_kernel_sandbox

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the kernel sandbox is Linux's")
FULL = Containment(memory_bytes=4 << 30, cpu_seconds=30)


def test_the_probe_reports_this_host(fresh_probe: pytest.MonkeyPatch) -> None:
    require_kernel_sandbox()
    support = host_support()
    assert support.exact and support.seccomp
    assert support.landlock_abi is not None and support.landlock_abi >= MIN_LANDLOCK_ABI
    assert support.kernel == os.uname().release
    assert support.user == ("root" if os.geteuid() == 0 else f"uid {os.geteuid()}")
    lines = support.describe()
    assert lines[0].startswith("sandbox: exact") and any(line.startswith("privilege drop: ") for line in lines)


@pytest.mark.parametrize(("hook", "missing"), [("no-landlock", "Landlock"), ("no-seccomp", "seccomp")])
def test_the_probe_hook_makes_the_host_look_weaker(fresh_probe: pytest.MonkeyPatch, hook: str, missing: str) -> None:
    fresh_probe.setenv(PROBE_ENV, hook)
    support = host_support()
    assert not support.exact
    assert missing in support.reason and "RestrictedPython" in support.reason
    assert hook in (support.landlock_note if missing == "Landlock" else support.seccomp_note)
    assert support.describe()[0].startswith("sandbox: restricted")


def test_the_probe_hook_never_makes_a_host_stronger(fresh_probe: pytest.MonkeyPatch) -> None:
    honest = host_support()
    host_support.cache_clear()
    fresh_probe.setenv(PROBE_ENV, "landlock,seccomp,exact,yes")
    assert host_support() == honest


def test_contain_fails_closed_when_a_requested_layer_is_missing(fresh_probe: pytest.MonkeyPatch) -> None:
    fresh_probe.setenv(PROBE_ENV, "no-landlock")
    host_support.cache_clear()
    outcome = run_contained(lambda: "ran", FULL)
    assert outcome.status == "uncontained" and "Landlock" in outcome.detail, outcome
    assert run_contained(lambda: "ran", replace(FULL, landlock=False)).status == "done"


def test_a_checkout_on_the_import_path_lends_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "edsb_fake_package").mkdir()
    (tmp_path / "edsb_fake_package" / "__init__.py").write_text("")
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-secret\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "edsb_fake_package", raising=False)
    import edsb_fake_package  # noqa: F401

    paths = reads.read_paths()
    assert not any(reads.within(path, str(tmp_path.resolve())) for path in paths)
    assert not any(reads.within(str(tmp_path.resolve()), path) for path in paths)


def _covered(path: str | Path, rules: list[str]) -> bool:
    return any(reads.within(os.path.realpath(path), rule) for rule in rules)


def test_the_read_rules_name_the_standard_library_and_numpy_never_edsb() -> None:
    """Exact directories: never edsb's package or the directory holding it, never a site-packages, a venv or an
    interpreter prefix, never /usr or /usr/lib whole."""
    import sysconfig

    import numpy

    import edsb

    paths = reads.read_paths()
    package = Path(edsb.__file__).parent
    assert not _covered(package / "llm" / "__init__.py", paths)
    assert not any(reads.within(path, os.path.realpath(package)) for path in paths)
    wide = [package.parent, sysconfig.get_path("purelib"), sys.prefix, sys.base_prefix, "/usr", "/usr/lib"]
    for directory in [*wide, "/usr/local/lib", "/usr/src", "/usr/src/app"]:
        assert not any(reads.within(os.path.realpath(directory), path) for path in paths), directory
    assert _covered(Path(numpy.__file__).parent / "linalg" / "__init__.py", paths)
    assert _covered(Path(sysconfig.get_path("stdlib")) / "fractions.py", paths)


LAYOUTS = {  # where the standard library, the site-packages holding numpy, and edsb's package live
    "wheel in a venv": ("venv-base/lib/python3.11", "venv/lib/python3.11/site-packages", "site"),
    "venv over the system Python": ("usr/lib/python3.11", "venv/lib/python3.11/site-packages", "site"),
    "Docker or pyenv": ("usr/local/lib/python3.11", "usr/local/lib/python3.11/site-packages", "site"),
    "conda": ("opt/conda/lib/python3.11", "opt/conda/lib/python3.11/site-packages", "site"),
    "editable checkout": ("usr/local/lib/python3.11", "usr/local/lib/python3.11/site-packages", "usr/src/app/src"),
    "app directory": ("usr/lib/python3.11", "usr/lib/python3/dist-packages", "usr/src/app"),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_no_install_layout_lends_edsb(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, layout: str) -> None:
    """Each layout built as a tree: numpy's directories and the standard library's entries are granted; edsb, the
    site-packages and the standard library's directory itself (which may hold the site-packages) are not."""
    import sysconfig
    import types

    stdlib_dir, site_dir, edsb_home = LAYOUTS[layout]
    stdlib, site = tmp_path / stdlib_dir, tmp_path / site_dir
    home = site if edsb_home == "site" else tmp_path / edsb_home
    for directory in (stdlib / "json", site / "numpy" / "linalg", site / "numpy.libs", home / "edsb" / "llm"):
        directory.mkdir(parents=True, exist_ok=True)
    for file in (stdlib / "os.py", site / "numpy" / "__init__.py", home / "edsb" / "llm" / "oracle.py"):
        file.write_text("")
    monkeypatch.setattr(sysconfig, "get_path", lambda name, *a, **k: str(stdlib))
    monkeypatch.setitem(sys.modules, "numpy", types.SimpleNamespace(__file__=str(site / "numpy" / "__init__.py")))
    monkeypatch.setattr(reads, "__file__", str(home / "edsb" / "sandbox" / "reads.py"))
    paths = reads.read_paths()
    assert _covered(stdlib / "os.py", paths) and _covered(stdlib / "json", paths)
    assert _covered(site / "numpy" / "linalg", paths) and _covered(site / "numpy.libs", paths)
    assert not _covered(home / "edsb" / "llm" / "oracle.py", paths)
    for directory in (site, stdlib, home, home / "edsb"):
        assert not any(reads.within(os.path.realpath(directory), path) for path in paths), directory


def test_read_paths_never_cover_secrets_or_the_data(monkeypatch: pytest.MonkeyPatch) -> None:
    data = str(require_data())
    monkeypatch.setattr(sys, "path", [*sys.path, "/", "/srv", "/etc", os.path.expanduser("~"), data, "/proc/self"])
    paths = reads.read_paths(protected=[data])
    for forbidden in ("/", "/srv", "/etc", "/proc", "/tmp", "/root", "/home", os.path.expanduser("~"), data):
        assert not any(reads.within(forbidden, path) for path in paths), (forbidden, paths)
    import sysconfig

    assert _covered(Path(sysconfig.get_path("stdlib")) / "os.py", paths)


def test_the_seccomp_list_names_real_syscalls_and_leaves_out_the_dangerous_ones() -> None:
    seccomp = pytest.importorskip("pyseccomp")
    native = seccomp.system_arch()
    unknown = [name for name in kernel.SECCOMP_ALLOW if seccomp.resolve_syscall(native, name) < 0]
    assert set(unknown) <= {"open", "stat", "lstat", "access", "poll", "select", "time", "dup2", "readlink"}, unknown
    dangerous = {
        "fork", "vfork", "clone", "clone3", "execve", "execveat", "socket", "socketpair", "ptrace",
        "process_vm_readv", "process_vm_writev", "io_uring_setup", "io_uring_enter", "io_uring_register", "openat2",
        "mount", "setrlimit", "prlimit64", "unshare", "setns", "bpf", "keyctl", "kill", "tkill", "tgkill",
        "truncate", "ftruncate", "unlink", "unlinkat", "rename", "renameat2", "connect", "bind", "pidfd_getfd",
        "open_by_handle_at", "memfd_create", "userfaultfd", "perf_event_open", "fcntl", "ioctl", "prctl",
    }  # fmt: skip
    assert not dangerous & set(kernel.SECCOMP_ALLOW)


def test_the_landlock_canary_catches_a_ruleset_that_grants_the_root() -> None:
    require_kernel_sandbox()
    kernel.prepare()

    def permissive() -> None:  # in the child: a ruleset that lets everything be read, as a best-effort no-op would
        assert kernel._prepared is not None
        kernel._prepared.ruleset.close()
        kernel._prepared.ruleset = rules.build_ruleset(host_support().landlock_abi or 0, ["/"])

    outcome = run_contained(lambda: "ran", replace(FULL, view=False), before=permissive)  # the host's root
    assert outcome.status == "uncontained" and "Landlock did not take effect" in outcome.detail, outcome


def test_the_landlock_canary_catches_a_restriction_that_does_nothing_in_the_file_view() -> None:
    require_kernel_sandbox()
    kernel.prepare()

    def no_op() -> None:  # in the child: landlock_restrict_self(2) answers success and enforces nothing
        from landlockpy import _syscall

        _syscall.restrict_self = lambda fd, flags: None

    outcome = run_contained(lambda: "ran", FULL, before=no_op)
    assert outcome.status == "uncontained" and "Landlock did not take effect" in outcome.detail, outcome


def test_prepare_builds_both_layers_once() -> None:
    require_kernel_sandbox()
    kernel.prepare()
    built = kernel._prepared
    assert built is not None and built.ruleset is not None and built.seccomp_program
    assert len(built.seccomp_program) % 8 == 0  # whole BPF instructions
    kernel.prepare()  # again: the old ruleset's descriptor is released
    assert built.ruleset.closed


def test_contain_refuses_a_process_with_other_threads() -> None:
    """Landlock and seccomp bind the calling thread and its future children only: a thread already running would
    stay free, so contain() refuses."""
    require_kernel_sandbox()
    kernel.prepare()

    def start_a_thread() -> None:
        import threading

        threading.Thread(target=threading.Event().wait, daemon=True).start()

    outcome = run_contained(lambda: "ran", FULL, before=start_a_thread)
    assert outcome.status == "uncontained" and "single-threaded" in outcome.detail, outcome


@pytest.mark.skipif(os.geteuid() != 0, reason="the drop to uid 65534 is a root worker's")
def test_a_root_worker_drops_to_the_unprivileged_user_where_the_host_allows() -> None:
    """Where a Python lives under /root, uid 65534 can read it only in the file view (whose directories above the
    read paths are its own): the uid path is forced here, in the child only, and then forced off."""
    require_kernel_sandbox()
    kernel.prepare()
    forced = replace(host_support(), drop_to_uid=True)
    kept_uid = replace(host_support(), drop_to_uid=False, drop_in_view=False)

    def force_the_uid_drop() -> None:
        kernel.host_support = lambda: forced  # type: ignore[assignment]

    def keep_the_uid() -> None:
        kernel.host_support = lambda: kept_uid  # type: ignore[assignment]

    def ids() -> tuple[object, ...]:  # the real uid is the run's own (its tasks are counted apart): base + pid
        real, *rest = os.getresuid()
        return real - os.getpid(), *rest, os.getresgid(), os.getgroups()

    dropped = run_contained(ids, FULL, before=force_the_uid_drop)
    unprivileged = (kernel.UNPRIVILEGED_ID,) * 3
    assert dropped.status == "done", dropped
    assert dropped.detail == repr((kernel.RUN_UID_BASE, *unprivileged[1:], unprivileged, [])), dropped
    kept = run_contained(ids, replace(FULL, seccomp=False), before=keep_the_uid)
    assert kept.detail == repr((kernel.RUN_UID_BASE, 0, 0, (0, 0, 0), [])), kept
    # without the uid path (seccomp off, so that capget itself answers): uid 0 at most, and no capability
    capabilities = run_contained(lambda: (os.getgroups(), host.capabilities()), replace(FULL, seccomp=False))
    assert capabilities.detail == repr(([], (0, 0))), capabilities
    kept = run_contained(
        lambda: (os.getgroups(), host.capabilities()), replace(FULL, seccomp=False), before=keep_the_uid
    )
    assert kept.detail == repr(([], (0, 0))), kept
    if host_support().drop_in_view:  # this host as it is: in the view, the drop to uid 65534 is real
        viewed = run_contained(ids, FULL)
        assert viewed.detail == repr((kernel.RUN_UID_BASE, *unprivileged[1:], unprivileged, [])), viewed
    control = run_contained(lambda: host.capabilities(), replace(FULL, seccomp=False, drop_privileges=False))
    assert control.status == "done" and control.detail != repr((0, 0)), control


def test_a_lazy_standard_library_import_survives_invalidated_import_caches() -> None:
    """Python lists a directory on its path again once its caches are invalidated: the standard library's
    directories may be listed (never a file beneath them read unless granted), so the import still finds it."""
    require_kernel_sandbox()
    kernel.prepare()

    def invalidated_then_imported() -> object:
        import importlib

        importlib.invalidate_caches()
        sys.modules.pop("fractions", None)
        import fractions

        return str(fractions.Fraction(1, 3))

    outcome = run_contained(invalidated_then_imported, FULL)
    assert outcome.status == "done" and outcome.detail == "'1/3'", outcome
    package = os.path.dirname(os.path.dirname(kernel.__file__))
    refused = run_contained(lambda: Path(package, "__init__.py").read_bytes(), FULL)
    assert refused.status == "refused" and refused.detail.startswith(("PermissionError", "FileNotFoundError")), refused


def test_the_file_view_holds_the_read_paths_and_hides_every_site_packages() -> None:
    read, listed = reads.read_paths(), reads.listed_paths()
    plan = rules.plan_file_view(read, listed)
    assert all(_covered(path, [*plan.binds, *plan.inner]) for path in read)
    assert all(any(reads.within(path, mask) for mask in plan.masks) for path in plan.inner)
    assert all(os.path.basename(mask) in ("site-packages", "dist-packages") for mask in plan.masks)
    package = os.path.dirname(os.path.dirname(kernel.__file__))
    assert not _covered(package, [*plan.binds, *plan.inner]) or any(reads.within(package, m) for m in plan.masks)
    assert not _covered(package, plan.inner)
    assert plan.devices == ("/dev/null",)


def test_a_child_in_the_file_view_finds_nothing_else(tmp_path: Path) -> None:
    require_kernel_sandbox()
    if not host_support().view:
        pytest.skip(f"no file view here: {host_support().view_note}")
    kernel.prepare()
    (tmp_path / "results.jsonl").write_text("{}\n")
    paths = [str(tmp_path / "results.jsonl"), str(tmp_path), "/tmp", "/etc/passwd", "/proc/self", "/bin/sh"]

    def look() -> object:
        return [os.path.lexists(path) for path in paths], os.listdir(os.path.dirname(kernel.__file__))

    outcome = run_contained(look, replace(FULL, landlock=False, seccomp=False))  # the view alone
    assert outcome.status == "refused" and outcome.detail.startswith("FileNotFoundError"), outcome
    outcome = run_contained(lambda: [os.path.lexists(path) and not stand_in(path) for path in paths], FULL)
    assert outcome.detail == repr([False] * len(paths)), outcome
    assert all(os.path.lexists(path) for path in paths)  # the control: each is there for this process


def test_the_way_to_a_read_path_under_tmp_is_the_views_own_and_tells_nothing(tmp_path: Path) -> None:
    """A virtual environment made by `mktemp` puts a read path under /tmp: the view holds the directories leading to
    it, but they are its own (empty but for the next step, dated 0), and nothing else of the host's /tmp is there."""
    require_kernel_sandbox()
    if not host_support().view:
        pytest.skip(f"no file view here: {host_support().view_note}")
    read = tmp_path / "venv" / "lib"
    read.mkdir(parents=True)
    (read / "module.py").write_text("")
    (tmp_path / "results.jsonl").write_text("{}\n")
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            view.enter_view(view.ViewPlan(binds=(str(read),), devices=()))
            way = [str(tmp_path), str(tmp_path / "venv"), "/tmp"]
            seen = {
                "stand-ins": [stand_in(path) for path in way],
                "listed": [os.listdir(path) for path in way],
                "read": os.listdir(read),
                "run file": os.path.lexists(tmp_path / "results.jsonl"),
                "others in /tmp": sorted(set(os.listdir("/tmp")) - {tmp_path.parts[2]}),
            }
            os.write(writer, json.dumps(seen).encode())
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as answer:
        seen = json.loads(answer.read())
    os.waitpid(pid, 0)
    assert seen["stand-ins"] == [True, True, True]
    assert seen["listed"] == [["venv"], ["lib"], [tmp_path.parts[2]]]
    assert seen["read"] == ["module.py"] and seen["run file"] is False and seen["others in /tmp"] == []
    assert not stand_in(str(tmp_path)) and len(os.listdir("/tmp")) > 1  # the control: the host's are not
