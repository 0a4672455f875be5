"""The attacks of `tests/security`, and the kernel-level ones, aimed at the exact sandbox through the real pipeline:
one `edsb run --sandbox exact` process (scripted loopback model, fresh contained children, real judge) whose Event
Parser answers are the attacks, each followed by an honest program that must pass.

Under `exact` the code is CPython's own: nothing refuses `import os` or `open`. What contains it is the kernel
(`edsb.sandbox.kernel.contain`: descriptors, rlimits, privileges, Landlock, seccomp) and the parent, which treats
the child's answer as untrusted data. So every attack must end as the model's execution error (or a plan that
fails, or at most a plan a model could have set anyway), create or change no file, leak no secret (a fake API key
and a canary sit in `edsb`'s environment), and leave the sweep running: the next honest run passes and `edsb run`
exits 0.

The controls at the end show the tests can fail: the same plan code, run by the same `run_exact` under `contain()`
with the responsible layer switched off (`Containment`'s switches, which exist for this), does what it tried.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import load_scene
from edsb.sandbox import ApiScene, CodeContext, CodeError, SandboxLimits, SandboxPool
from edsb.sandbox.exact import run_exact
from edsb.sandbox.kernel import Containment, host_support, prepare
from edsb.sandbox.reads import read_paths, within
from edsb.sandbox.selfcheck import run_contained
from tests.security.test_pipeline_attacks import ATTACKS as RESTRICTED_ATTACKS
from tests.security.test_pipeline_attacks import PLAN
from tests.support.data import DATA, require_data
from tests.support.edsb_cli import Outcome, child_env, edsb_child
from tests.support.kernel_sandbox import require_kernel_sandbox
from tests.support.openai_server import OpenAIServer
from tests.support.run_dir import every_output, read_results
from tests.support.scripted_programs import (
    BENIGN_BODY,
    NARRATOR_REPLY,
    ProgramScript,
    program,
    programs_by_run,
    run_args,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the exact sandbox is Linux's")

CODE_TIMEOUT = 1.0
CODE_MEMORY_MB = 512
API_KEY = f"sk-canary-{uuid.uuid4().hex}"
CANARY_ENV = "EDSB_CANARY_SECRET"
CANARY = f"canary-{uuid.uuid4().hex}"
TMP_PREFIX = f"/tmp/edsb-exact-attack-{uuid.uuid4().hex[:8]}-"

PASSED = {("passed", None)}
FAILED_PLAN = {("error", "missing_character"), ("error", "unknown_action"), ("failed", None)}


def kind(*kinds: str) -> set[tuple[str, str | None]]:
    return {("error", k) for k in kinds}


RUNTIME, TIMEOUT, MEMORY, CRASH = kind("code_runtime"), kind("code_timeout"), kind("code_memory"), kind("code_crash")


@dataclass(frozen=True)
class Attack:
    name: str
    body: str  # the body of parse_event: TARGET, VICTIM and TMP are replaced (see `attack_program`)
    expected: set[tuple[str, str | None]]  # acceptable (status, error_kind)
    message: str = ""  # a text the recorded error must contain


# --- the attacks of test_pipeline_attacks, re-aimed ---------------------------------------------------------------
# Under exact those that the restricted policy refused run as Python runs them: the kernel refuses what they reach
# for (a PermissionError), a forbidden construct that harms nothing is just Python (exec, globals(), dunder walks:
# each ends by setting the honest plan, or by an error of its own), and a resource bomb meets the same limits.
ERR = RUNTIME  # the kernel's EPERM / EACCES, or the code's own exception
REAIMED: dict[str, set[tuple[str, str | None]]] = {
    "import_os": PASSED,  # os.system returns a failure status (fork is refused), then the plan is set
    "import_from": FAILED_PLAN,  # the template's environment (three harmless variables) as an action label
    "dunder_import": PASSED | FAILED_PLAN,
    "builtins_dict": ERR,
    "open_write": ERR,
    "open_relative": ERR,
    "open_parent_environ": ERR,
    "swallowed_open": PASSED,  # the refusal was caught by the code; nothing was written
    "fork_bomb": ERR,
    "fork_dunder": ERR,
    "socket": ERR,
    "subprocess": ERR,
    "os_environ_by_name": ERR,  # `os` is not bound in the reference's globals: NameError
    "exec": FAILED_PLAN,  # the shell cannot start; no plan
    "eval": FAILED_PLAN,
    "compile": FAILED_PLAN,
    "globals": FAILED_PLAN,
    "locals": FAILED_PLAN,
    "vars": FAILED_PLAN,
    "dir": FAILED_PLAN,  # harmless introspection: no plan set
    "function_globals": FAILED_PLAN,
    "bound_method_self": FAILED_PLAN,
    "subclasses": FAILED_PLAN,
    "dynamic_dunder": FAILED_PLAN,
    "object_subclasses": FAILED_PLAN,
    "hasattr_probe": FAILED_PLAN,
    "private_handle": ERR,
    "format_walk": FAILED_PLAN,
    "format_map_walk": FAILED_PLAN,
    "unbound_format": FAILED_PLAN,
    "fstring_walk": FAILED_PLAN,
    "class_dunder": FAILED_PLAN,
    "type_three_args": FAILED_PLAN,
    "metaclass_format": FAILED_PLAN | ERR,
    "traceback_frame": FAILED_PLAN,
    "traceback_getattr": FAILED_PLAN,
    "exception_method": FAILED_PLAN,
    "generator_frame": FAILED_PLAN | ERR,
    "generator_frame_getattr": FAILED_PLAN,
    "coroutine": FAILED_PLAN | ERR,
    "match_class_pattern": FAILED_PLAN,
    "rebind_api_function": PASSED,
    "monkeypatch_handle": PASSED,  # the run's own handle: the next get_character makes a new one
    "setattr_handle": FAILED_PLAN,
    "patch_area_class": PASSED | FAILED_PLAN,
    "patch_builtin_type": ERR,  # a builtin type's attribute cannot be set
    "leak_global": PASSED,
    "mutate_returned_values": PASSED,
    "shadow_builtins": PASSED,
    "finalizer_loop": PASSED | TIMEOUT,
    "finalizer_open": PASSED,  # the finaliser's open is refused after the answer: nothing is written
    "busy_loop": TIMEOUT,
    "busy_loop_swallowing": TIMEOUT,
    "endless_iterator": TIMEOUT,
    "huge_power": TIMEOUT | MEMORY,
    "string_bomb": MEMORY,
    "list_bomb": MEMORY,
    "growing_list": TIMEOUT | MEMORY,
    "deep_recursion": ERR,
    "deep_structure_error": ERR,
    "gigantic_print": PASSED,
    "print_flood": PASSED,
    "print_to_file": ERR,
    "gigantic_plan": kind("code_output"),
    "huge_relationship_list": kind("code_output"),
    "nesting_bomb": kind("code_syntax"),
    "input_blocks": ERR,  # stdin is /dev/null: EOFError
    "exit": ERR,  # SystemExit is the model's exception, as in the reference
}

# --- the kernel-level attacks ---------------------------------------------------------------------------------------

FORGE = """\
import os, struct, json
def forge(payload):
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    for fd in range(3, 1024):
        try:
            os.write(fd, struct.pack('>I', len(data)) + data)
            break
        except OSError:
            pass
"""
HONEST_PLAN = "[{'character': 'David', 'position': ['sit on chair_2'], 'target_action': 'eat', 'orientation': None}]"
SYSCALL = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n"
#: Scans the run's own memory (everything near the objects it can see, the template's heap included) for bytes that
#: start with `prefix` and continue with `after`, and raises with the count. The needle is built at run time and
#: is never followed by `after` itself, so the scan does not find its own copy.
HEAP_SCAN = """\
import gc, ctypes
libc = ctypes.CDLL(None, use_errno=True)
gc.unfreeze()
regions = set(id(o) >> 22 for o in gc.get_objects()) | {id(o) >> 22 for o in ('x' * 100000, bytearray(400000))}
found = scanned = 0
for region in sorted(regions):
    for page in range(region << 22, (region + 1) << 22, 4096):
        ctypes.set_errno(0)
        libc.access(ctypes.c_void_p(page), 0)
        if ctypes.get_errno() == 14:
            continue
        data = ctypes.string_at(page, 4096)
        scanned += 1
        at = data.find(PREFIX)
        while at >= 0:
            if data[at + len(PREFIX): at + len(PREFIX) + 1] in AFTER:
                found += 1
            at = data.find(PREFIX, at + 1)
raise ValueError(f'scanned {scanned > 1000} found {found}')
"""
KEY_SCAN = HEAP_SCAN.replace("PREFIX", "('sk-' + 'canary-').encode()").replace(
    "AFTER", "[bytes([c]) for c in b'0123456789abcdef']"
)
CASE_SCAN = HEAP_SCAN.replace("PREFIX", "('\"expected' + '_plans\"').encode()").replace("AFTER", "[b':']")

# A path outside what a run may read: not there at all in the file view (ENOENT, as for a missing path), refused by
# Landlock without one.
HIDDEN = "FileNotFoundError" if host_support().view else "PermissionError"
# Where the interpreter lives under /tmp (a virtual environment made by `mktemp`), the view holds a /tmp of its own,
# read-only, on the way to it.
TMP_HIDDEN = "Read-only file system" if any(within(path, "/tmp") for path in read_paths()) else HIDDEN

KERNEL_ATTACKS = [
    # Files: create, change, delete, in /tmp and in the watched directory.
    Attack("create_in_tmp", "open('TMPcreated', 'x')", RUNTIME, TMP_HIDDEN),
    Attack("create_in_target", "open('TARGET', 'w').write('x')", RUNTIME, HIDDEN),
    Attack("mkdir_in_tmp", "import os\nos.mkdir('TMPdir')", RUNTIME, "PermissionError"),
    Attack("mkfifo_in_tmp", "import os\nos.mkfifo('TMPfifo')", RUNTIME, "PermissionError"),
    Attack("symlink_in_tmp", "import os\nos.symlink('/etc/passwd', 'TMPlink')", RUNTIME, "PermissionError"),
    Attack("append_to_victim", "open('VICTIM', 'a').write('pwned')", RUNTIME, HIDDEN),
    Attack("truncate_victim", "import os\nos.truncate('VICTIM', 0)", RUNTIME, "PermissionError"),
    Attack("delete_victim", "import os\nos.unlink('VICTIM')", RUNTIME, "PermissionError"),
    Attack("rename_victim", "import os\nos.rename('VICTIM', 'VICTIM.moved')", RUNTIME, "PermissionError"),
    Attack("chmod_victim", "import os\nos.chmod('VICTIM', 0o777)", RUNTIME, "PermissionError"),
    Attack("utime_victim", "import os\nos.utime('VICTIM', (0, 0))", RUNTIME, "PermissionError"),
    Attack("write_own_library", "import os\nopen(os.__file__, 'a').write('#')", RUNTIME, "PermissionError"),
    Attack("memfd_exec", "import os\nos.memfd_create('x')", RUNTIME, "PermissionError"),
    Attack(
        "open_descriptors",
        "import os\nfds = []\nfor fd in range(1 << 16):\n    try:\n        os.fstat(fd)\n        fds.append(fd)\n"
        "    except OSError:\n        pass\nraise ValueError(len(fds), fds[:3])",
        RUNTIME,
        "ValueError: (4, [0, 1, 2])",  # /dev/null three times, and the result channel: nothing inherited
    ),
    # Sockets.
    Attack("tcp_connect", "import socket\nsocket.create_connection(('127.0.0.1', TCP_PORT), 1)", RUNTIME),
    Attack("udp_send", "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)", RUNTIME),
    Attack("udp6_send", "import socket\ns = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)", RUNTIME),
    Attack("unix_socketpair", "import socket\nsocket.socketpair()", RUNTIME),
    Attack("netlink", "import socket\nsocket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)", RUNTIME),
    # Processes.
    Attack("subprocess_run", "import subprocess\nsubprocess.run(['touch', 'TARGET'])", RUNTIME),
    Attack(
        "os_system", "import os\nraise OSError(os.system('touch TARGET'))", RUNTIME, "OSError: 32512"
    ),  # the shell never starts: 127
    Attack("os_fork", "import os\nos.fork()", RUNTIME, "PermissionError"),
    Attack("fork_bomb_loop", "import os\nwhile True:\n    os.fork()", RUNTIME, "PermissionError"),
    Attack("posix_spawn", "import os\nos.posix_spawn('/bin/touch', ['touch', 'TARGET'], {})", RUNTIME),
    Attack("execv", "import os\nos.execv('/bin/sh', ['sh', '-c', 'touch TARGET'])", RUNTIME, "PermissionError"),
    Attack("multiprocessing", "import multiprocessing\nmultiprocessing.Process(target=print).start()", RUNTIME),
    Attack("pty_fork", "import pty\npty.fork()", RUNTIME),
    # Secrets: the parent's environment, /proc, ~/.netrc, the key in memory.
    Attack(
        "environ_as_action", "import os\nget_character('David').set_target_action(repr(dict(os.environ)))", FAILED_PLAN
    ),
    Attack("proc_self_environ", "open('/proc/self/environ').read()", RUNTIME, HIDDEN),
    Attack("proc_parent_environ", "import os\nopen(f'/proc/{os.getppid()}/environ').read()", RUNTIME, HIDDEN),
    Attack("proc_init_environ", "open('/proc/1/environ').read()", RUNTIME, HIDDEN),
    Attack("proc_parent_mem", "import os\nopen(f'/proc/{os.getppid()}/mem', 'rb').read(8)", RUNTIME, HIDDEN),
    Attack("proc_parent_cmdline", "import os\nopen(f'/proc/{os.getppid()}/cmdline').read()", RUNTIME, HIDDEN),
    Attack("netrc", "import os\nopen(os.path.expanduser('~/.netrc')).read()", RUNTIME, "Error"),
    # A missing file is ENOENT before Landlock decides (its existence shows); an existing one is EACCES.
    Attack("root_netrc", "open('/root/.netrc').read()", RUNTIME, "Error: [Errno"),
    Attack("root_profile", "open('/root/.profile').read()", RUNTIME, "Error: [Errno"),
    Attack("etc_passwd", "open('/etc/passwd').read()", RUNTIME, HIDDEN),
    Attack("data_dir", "import os\nos.listdir('DATA')", RUNTIME, HIDDEN),
    Attack("run_dir", "import os\nos.listdir('OUT')", RUNTIME, HIDDEN),
    Attack("checkout_tests", "import os\nos.listdir('REPO/tests')", RUNTIME, HIDDEN),
    Attack(
        "gc_walk_for_the_key",
        "import gc\ngc.unfreeze()\nhits = [o for o in gc.get_objects() if isinstance(o, str) and 'sk-canary' in o]\n"
        "hits += [v for o in gc.get_objects() if isinstance(o, dict) for v in list(o.values())\n"
        "         if isinstance(v, str) and v.startswith('sk-')]\n"
        "raise ValueError(f'found {len(hits)}')",
        RUNTIME,
        "ValueError: found 0",
    ),
    Attack("heap_scan_for_the_key", KEY_SCAN, RUNTIME, "ValueError: scanned True found 0"),
    # Signals: the parent (the template), siblings, everyone, itself.
    Attack("kill_parent", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", RUNTIME, "PermissionError"),
    Attack("kill_everyone", "import os, signal\nos.kill(-1, signal.SIGKILL)", RUNTIME, "PermissionError"),
    Attack("kill_group", "import os, signal\nos.killpg(0, signal.SIGKILL)", RUNTIME, "PermissionError"),
    Attack(
        "kill_siblings",
        "import os, signal\nfor pid in range(os.getpid() - 20, os.getpid() + 20):\n"
        "    if pid != os.getpid():\n        try:\n            os.kill(pid, signal.SIGKILL)\n"
        "        except OSError as e:\n            assert e.errno == 1, e\n" + PLAN,
        PASSED,
    ),
    Attack("sigstop_itself", "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)", RUNTIME, "PermissionError"),
    Attack("raise_sigstop", "import signal\nsignal.raise_signal(signal.SIGSTOP)", RUNTIME | CRASH | TIMEOUT),
    Attack("alarm", "import signal\nsignal.setitimer(signal.ITIMER_REAL, 0.01)", RUNTIME),
    # Resources.
    Attack("numpy_ones_bomb", "import numpy as np\nx = np.ones(10 ** 10)", MEMORY),
    Attack("numpy_matrix_bomb", "x = np.zeros((10 ** 5, 10 ** 5)) + 1", MEMORY),
    Attack("numpy_repeat_bomb", "x = np.repeat(np.arange(10 ** 6), 10 ** 5)", MEMORY),
    Attack("numpy_outer_bomb", "x = np.outer(np.ones(10 ** 6), np.ones(10 ** 6))", MEMORY),
    Attack(
        "cpu_loop_ignoring_sigxcpu",
        "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass",
        TIMEOUT,
    ),
    Attack("sleep_forever", "import time\ntime.sleep(10 ** 6)", TIMEOUT),
    Attack("wait_forever", "import threading\nthreading.Event().wait()", TIMEOUT),
    Attack("stdout_flood", "import os\nfor _ in range(100):\n    os.write(1, b'x' * 10 ** 6)\n" + PLAN, PASSED),
    Attack(
        "stderr_flood",
        "import sys\nfor _ in range(100):\n    sys.__stderr__.write('y' * 10 ** 6)\nsys.__stderr__.flush()\n" + PLAN,
        PASSED,
    ),
    Attack(
        "print_flood_to_stderr",
        "import sys\nfor _ in range(10 ** 4):\n    print('z' * 100, file=sys.stderr)\n" + PLAN,
        PASSED,
    ),
    Attack("raise_memory_limit", "import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))", RUNTIME),
    Attack(
        "raise_cpu_limit",
        "import resource\nsoft, hard = resource.getrlimit(resource.RLIMIT_CPU)\n"
        "resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))",
        RUNTIME,
        "ValueError: not allowed to raise maximum limit",  # CPython's words for EPERM
    ),
    Attack("raise_open_files", "import resource\nresource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))", RUNTIME),
    Attack(
        "thread_bomb",
        "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(60,)).start()",
        RUNTIME | MEMORY,
    ),
    Attack(
        "thread_outlives_the_answer",
        "import threading\ndef spin():\n    while True:\n        pass\n"
        "threading.Thread(target=spin, daemon=True).start()\n" + PLAN,
        PASSED,
    ),
    Attack(
        "thread_forges_after_the_answer",
        FORGE + "import threading, time\ndef later():\n    time.sleep(0.05)\n"
        "    forge({'status': 'error', 'kind': 'code_runtime', 'message': 'forged late'})\n"
        "threading.Thread(target=later).start()\n" + PLAN,
        PASSED,
    ),
    Attack(
        "c_stack_recursion",
        "import sys\nsys.setrecursionlimit(10 ** 7)\ndef f():\n    f()\nf()",
        CRASH | RUNTIME | TIMEOUT,
    ),
    Attack("segfault", "import ctypes\nctypes.string_at(0)", CRASH),
    # Forging the result channel: at most a plan, never a fault of edsb.
    Attack(
        "forge_honest_plan",
        FORGE + f"forge({{'status': 'ok', 'plan': {HONEST_PLAN}, 'output': ''}})\nimport time\ntime.sleep(60)",
        PASSED,
    ),
    Attack(
        "forge_fault",
        FORGE + "forge({'status': 'fault', 'message': 'edsb broke'})\nimport time\ntime.sleep(60)",
        CRASH,
        "malformed answer",
    ),
    Attack(
        "forge_internal_error",
        FORGE + "forge({'status': 'error', 'kind': 'internal_error', 'message': 'x'})\nimport time\ntime.sleep(60)",
        CRASH,
        "malformed answer",
    ),
    Attack("forge_contained", FORGE + "forge({'status': 'contained'})\nimport time\ntime.sleep(60)", CRASH),
    Attack("forge_not_json", FORGE + "forge(b'\\xff\\xfe not json')\nimport time\ntime.sleep(60)", CRASH),
    Attack("forge_not_an_object", FORGE + "forge(b'[1, 2]')\nimport time\ntime.sleep(60)", CRASH),
    Attack(
        "forge_oversized",
        "import os, struct\nfor fd in range(3, 1024):\n    try:\n"
        "        os.write(fd, struct.pack('>I', 2 ** 32 - 1))\n        break\n    except OSError:\n        pass\n"
        "import time\ntime.sleep(60)",
        CRASH,
        "oversized",
    ),
    Attack(
        "forge_deep_json",
        FORGE + "forge(b'{\"status\": \"ok\", \"plan\": ' + b'[' * 100000 + b']' * 100000 + b'}')"
        "\nimport time\ntime.sleep(60)",
        CRASH,
    ),
    Attack(
        "forge_deep_character",
        FORGE + 'forge((\'{"status": "ok", "output": "", "plan": [{"character": \''
        " + '[' * 950 + '1' + ']' * 950 + ', \"position\": [], \"target_action\": \"eat\", \"orientation\": null}]}')"
        ".encode())\nimport time\ntime.sleep(60)",
        CRASH | kind("code_plan") | FAILED_PLAN,
    ),
    # Nesting within the JSON parser's limits but deeper than any plain value a child makes: the record that held it
    # could be written yet not read back (200 levels), or not written (300); either way, the model's malformed answer.
    *(
        Attack(
            f"forge_deep_action_{depth}",
            FORGE
            + "inner = '\"eat\"'\nfor _ in range("
            + str(depth)
            + "):\n    inner = '{\"tuple\": [' + inner + ']}'\n"
            'forge((\'{"status": "ok", "output": "", "plan": [{"character": "David", '
            '"position": ["sit on chair_2"], "target_action": \' + inner + \', "orientation": null}]}\')'
            ".encode())\nimport time\ntime.sleep(60)",
            CRASH,
            "nested deeper",
        )
        for depth in (200, 300)
    ),
    Attack(
        "forge_huge_int",
        FORGE + "forge({'status': 'ok', 'output': '', 'plan': [{'character': 'David', "
        "'position': [10 ** 4000], 'target_action': 'eat', 'orientation': None}]})\nimport time\ntime.sleep(60)",
        CRASH | kind("code_plan"),
    ),
    Attack(
        "forge_bad_values",
        FORGE + "forge({'status': 'ok', 'output': 5, 'plan': [{'character': {'opaque': 3}, "
        "'position': {'tuple': 7}, 'target_action': None, 'orientation': 9}]})\nimport time\ntime.sleep(60)",
        CRASH,
    ),
    Attack(
        "forge_surrogates",
        FORGE + "forge({'status': 'error', 'kind': 'code_runtime', 'message': 'x\\ud800'})"
        "\nimport time\ntime.sleep(60)",
        RUNTIME,
    ),
    Attack(
        "forge_header_then_silence",
        "import os, struct\nfor fd in range(3, 1024):\n    try:\n"
        "        os.write(fd, struct.pack('>I', 100) + b'{')\n        break\n    except OSError:\n        pass\n"
        "import time\ntime.sleep(60)",
        TIMEOUT,
    ),
    Attack("forge_then_exit", FORGE + "forge(b'{\"status\"')\nimport os\nos._exit(0)", CRASH),
    # Exceptions and values whose rendering fails or never ends.
    Attack(
        "str_raises",
        "class E(Exception):\n    def __str__(self):\n        raise E()\nraise E()",
        RUNTIME,
        "could not be rendered",
    ),
    Attack(
        "str_never_returns",
        "class E(Exception):\n    def __str__(self):\n        while True:\n            pass\nraise E()",
        TIMEOUT,
    ),
    Attack(
        "str_exits",
        "class E(Exception):\n    def __str__(self):\n        import os\n        os._exit(0)\nraise E()",
        CRASH,
    ),
    Attack("base_exception", "raise KeyboardInterrupt('stop')", RUNTIME),
    Attack(
        "repr_hangs_in_the_plan",
        "class A:\n    def __repr__(self):\n        while True:\n            pass\n"
        "get_character('David').set_target_action(A())",
        TIMEOUT,
    ),
    Attack(
        "hash_raises_in_the_plan",
        "class A:\n    def __hash__(self):\n        raise RuntimeError('no')\n"
        "get_character('David').set_target_action(A())",
        kind("code_output", "code_plan") | FAILED_PLAN,
    ),
    Attack("parsed_event_replaced", "self.parsed_event = 5", kind("code_plan")),
    # State for the next run: module globals, numpy, builtins, the API, the random state.
    Attack("patch_numpy", "import numpy\nnumpy.array = None\nnumpy.linalg.norm = None\n" + PLAN, PASSED),
    # It breaks its own child's packing of the answer (json uses len): the model's malformed answer.
    Attack("patch_builtins", "import builtins\nbuiltins.len = lambda x: 0\nbuiltins.sorted = None\n" + PLAN, CRASH),
    Attack("patch_builtin_repr", "import builtins\nbuiltins.repr = None\nbuiltins.str = None\n" + PLAN, CRASH),
    Attack(
        "patch_the_api",
        "import sys\nsys.modules['edsb.sandbox.exact'].GLOBAL_NAMES['Area'] = None\n"
        "setattr(sys.modules['edsb.sandbox.code_api'].CodeApi, 'get_' + 'area_to_sit_on', None)\n"
        "get_character('David').set_target_action('eat')\n"
        "get_character('David').set_position(Area(['sit on chair_2']))",
        PASSED,
    ),
    Attack("leak_a_global", "global leaked\nleaked = True\nimport builtins\nbuiltins.leaked = True\n" + PLAN, PASSED),
    # ctypes into libc: raw syscalls and exec.
    Attack(
        "libc_raw_syscalls",
        SYSCALL + "import os\nresults = [libc.syscall(n, *a) for n, a in ((57, ()), (62, (os.getppid(), 9)), "
        "(101, (16, os.getppid(), 0, 0)), (272, (0x10000000,)), (425, (8, 0)), (160, (9, 0)), (105, (0,)))]\n"
        "raise ValueError(results)",
        RUNTIME,
        "ValueError: [-1, -1, -1, -1, -1, -1",
    ),
    Attack(
        "libc_execv",
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "argv = (ctypes.c_char_p * 4)(b'sh', b'-c', b'touch TARGET', None)\n"
        "raise ValueError(libc.execv(b'/bin/sh', argv), ctypes.get_errno())",
        RUNTIME,
        "ValueError: (-1, ",
    ),
    Attack(
        "libc_system",
        "import ctypes\nraise ValueError(ctypes.CDLL(None).system(b'touch TARGET'))",
        RUNTIME,
        "ValueError: 32512",
    ),
]

ATTACKS = [Attack(a.name, a.body, REAIMED[a.name]) for a in RESTRICTED_ATTACKS] + KERNEL_ATTACKS


@dataclass(frozen=True)
class Batch:
    process: Outcome
    out: Path
    targets: Path
    cwd: Path
    victim: Path
    records: dict[str, dict]  # program name → record


VICTIM_TEXT = "precious"


def attack_program(attack: Attack, targets: Path, out: Path, port: int) -> str:
    body = attack.body.replace("TARGET", str(targets / f"pwned-{attack.name}")).replace("TMP", TMP_PREFIX)
    body = body.replace("VICTIM", str(targets / "victim.txt")).replace("TCP_PORT", str(port))
    body = body.replace("'DATA'", repr(str(DATA))).replace("'OUT'", repr(str(out)))
    body = body.replace("'REPO/tests'", repr(str(Path(__file__).parents[1])))
    return program(attack.name, body)


@pytest.fixture(scope="module")
def listener() -> Iterator[socket.socket]:
    """A TCP server no attack may reach (nothing must be waiting to be accepted after the sweep)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        yield server


@pytest.fixture(scope="module")
def exact_attack_batch(tmp_path_factory: pytest.TempPathFactory, listener: socket.socket) -> Batch:
    require_data()
    require_kernel_sandbox()
    root = tmp_path_factory.mktemp("exact-attacks")
    targets, cwd, out = root / "targets", root / "cwd", root / "run"
    targets.mkdir()
    cwd.mkdir()
    victim = targets / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    os.chmod(targets, 0o777)  # writable by anyone: only the sandbox stands between the code and it
    os.chmod(victim, 0o666)
    port = listener.getsockname()[1]
    script = []
    for attack in ATTACKS:
        script += [attack_program(attack, targets, out, port), program(f"benign-after-{attack.name}", BENIGN_BODY)]
    env = child_env(root / "cache", **{CANARY_ENV: CANARY, "OPENAI_API_KEY": API_KEY})
    with OpenAIServer(ProgramScript(script)) as server:
        args = run_args(server.base_url, out, len(script), "--concurrency", "1", "--sandbox", "exact")
        args += ["--code-timeout", str(CODE_TIMEOUT), "--code-memory", str(CODE_MEMORY_MB)]
        process = edsb_child(args, env=env, cwd=cwd, timeout=900)
    assert process.returncode == 0, process.stderr
    names = programs_by_run(out)
    records = {names[record["key"]]: record for record in read_results(out)}
    return Batch(process, out, targets, cwd, victim, records)


def test_every_attack_is_distinct_and_recorded_once(exact_attack_batch: Batch) -> None:
    assert len({attack.name for attack in ATTACKS}) == len(ATTACKS) >= 150
    assert len(exact_attack_batch.records) == 2 * len(ATTACKS)
    assert all(record["sandbox"] == "exact" for record in exact_attack_batch.records.values())


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_attack_is_contained_and_the_next_run_is_unaffected(exact_attack_batch: Batch, attack: Attack) -> None:
    record = exact_attack_batch.records[attack.name]
    assert (record["status"], record["error_kind"]) in attack.expected, record["error"] or record["plan"]
    assert attack.message in (record["error"] or ""), record["error"]
    if attack.expected == TIMEOUT:  # the wall-clock limit, not the CPU backstop or a crash
        assert record["error"].endswith(f"TimeoutError: the code ran longer than {CODE_TIMEOUT:g} s"), record["error"]
    following = exact_attack_batch.records[f"benign-after-{attack.name}"]
    assert following["status"] == "passed", following["error"]
    assert following["plan"] == {"David": {"target_action": ["eat", "sit"], "relationships": ["sit on chair_2"]}}


def test_no_file_appears_or_changes(exact_attack_batch: Batch) -> None:
    assert sorted(path.name for path in exact_attack_batch.targets.iterdir()) == ["victim.txt"]
    assert exact_attack_batch.victim.read_text() == VICTIM_TEXT
    assert oct(exact_attack_batch.victim.stat().st_mode & 0o777) == oct(0o666)
    assert exact_attack_batch.victim.stat().st_mtime > 0
    assert list(exact_attack_batch.cwd.iterdir()) == []
    assert [name for name in os.listdir("/tmp") if name.startswith(os.path.basename(TMP_PREFIX))] == []
    assert not Path("/pwned-relative").exists()


def test_no_connection_reached_the_listener(exact_attack_batch: Batch, listener: socket.socket) -> None:
    with pytest.raises(BlockingIOError):
        listener.accept()


def test_no_secret_and_no_flood_reaches_any_output(exact_attack_batch: Batch) -> None:
    everything = every_output(
        exact_attack_batch.out, exact_attack_batch.process.stdout, exact_attack_batch.process.stderr
    )
    assert len(everything) > 50_000
    assert API_KEY not in everything and API_KEY[3:] not in everything
    assert CANARY not in everything
    for flood in ("x", "y", "z"):
        assert flood * 1000 not in everything
    assert max(len(line) for line in (exact_attack_batch.out / "results.jsonl").read_bytes().splitlines()) < 24 << 10


def test_the_process_ends_cleanly(exact_attack_batch: Batch) -> None:
    assert "Traceback" not in exact_attack_batch.process.stderr
    assert f"{2 * len(ATTACKS)} runs planned" in exact_attack_batch.process.stderr
    assert not any(record["status"] == "incomplete" for record in exact_attack_batch.records.values())


# --- the controls: with the responsible layer off, the same code gets through ---------------------------------------


@pytest.fixture(scope="module")
def contained_house(house_scene: ApiScene) -> ApiScene:
    """The House scene, on a host that contains a child with every layer (the controls turn one off)."""
    require_kernel_sandbox()
    prepare()
    return house_scene


def _address_space() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def run_reply_contained(body: str, scene: ApiScene, **layers_off: bool) -> str:
    """`body` as an Event Parser reply, run by `run_exact` in a child under `contain()` with `layers_off`: "ok", or
    the model's error message."""

    def attack() -> str:
        try:
            run_exact(program("control", body), scene, {})
        except CodeError as exc:
            return exc.message
        return "ok"

    containment = Containment(memory_bytes=_address_space() + (512 << 20), cpu_seconds=30)
    outcome = run_contained(attack, replace(containment, **{layer: False for layer in layers_off}))
    assert outcome.status == "done", outcome
    return outcome.detail


def test_control_creating_a_file_needs_the_view_landlock_and_the_drop_off(
    contained_house: ApiScene, tmp_path: Path
) -> None:
    target = tmp_path / "created"
    body = f"open({str(target)!r}, 'x').close()"
    assert HIDDEN in run_reply_contained(body, contained_house)
    assert not target.exists()
    assert run_reply_contained(body, contained_house, landlock=False, drop_privileges=False, view=False) == "'ok'"
    assert target.exists()


def test_control_reading_another_process_environment_needs_the_view_and_landlock_off(contained_house: ApiScene) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], env={"OPENAI_API_KEY": API_KEY}
    ) as holder:
        try:
            body = f"raise ValueError(open('/proc/{holder.pid}/environ').read())"
            assert HIDDEN in run_reply_contained(body, contained_house)
            assert API_KEY in run_reply_contained(
                body, contained_house, landlock=False, drop_privileges=False, view=False
            )
        finally:
            holder.kill()


def test_control_udp_needs_seccomp_off(contained_house: ApiScene) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        server.settimeout(10)
        port = server.getsockname()[1]
        body = (
            "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            f"s.sendto(b'escaped', ('127.0.0.1', {port}))"
        )
        assert "PermissionError" in run_reply_contained(body, contained_house)
        assert run_reply_contained(body, contained_house, seccomp=False) == "'ok'"
        assert server.recv(64) == b"escaped"


def test_control_running_a_program_needs_seccomp_landlock_and_the_view_off(contained_house: ApiScene) -> None:
    body = "import os\nraise ValueError(os.system('exit 7'))"
    assert run_reply_contained(body, contained_house) == f"'ValueError: {127 << 8}'"  # the shell never started
    assert (
        run_reply_contained(body, contained_house, seccomp=False, landlock=False, view=False)
        == f"'ValueError: {7 << 8}'"
    )


def test_control_raising_a_limit_needs_seccomp_off(contained_house: ApiScene) -> None:
    body = (
        "import resource\nsoft, hard = resource.getrlimit(resource.RLIMIT_CPU)\n"
        "resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))"
    )
    assert run_reply_contained(body, contained_house) == "'ValueError: not allowed to raise maximum limit'"
    assert run_reply_contained(body, contained_house, seccomp=False) == "'ok'"


def test_control_a_numpy_bomb_needs_the_rlimits_off(contained_house: ApiScene) -> None:
    body = "x = np.zeros(3 << 30, dtype=np.uint8)"  # calloc'd lazily: address space, no resident memory
    assert run_reply_contained(body, contained_house).startswith("'MemoryError: Unable to allocate 3.00 GiB")
    assert run_reply_contained(body, contained_house, rlimits=False) == "'ok'"


def test_control_the_key_walks_find_a_key_in_a_process_that_holds_one(
    contained_house: ApiScene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gc walk and the heap scan above find a key where there is one: in a child forked from a process whose
    environment holds it (the template is exec'd with a clean one instead)."""
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    walk = next(a for a in KERNEL_ATTACKS if a.name == "gc_walk_for_the_key").body
    assert "ValueError: found 0" not in run_reply_contained(walk, contained_house)
    assert "found 0" not in run_reply_contained(KEY_SCAN, contained_house)


# --- findings ---------------------------------------------------------------------------------------------------


def test_a_perturbed_scene_leaves_no_expected_plan_in_the_template(tmp_path: Path) -> None:
    """With `--perturb`, the template used to read every test case (the character renaming) while loading a scene:
    the cases' JSON text, expected plans included, stayed in the freed heap that every contained child inherits,
    and plan code could find its own case's answer there. Loading a scene now reads no case at all."""
    require_data()
    require_kernel_sandbox()
    david = Benchmark.open(DATA, perturb=1).character_mapping["David"]
    narrator = NARRATOR_REPLY.replace('"David"', json.dumps(david))
    with OpenAIServer(ProgramScript([program("case-scan", CASE_SCAN)], narrator)) as server:
        args = run_args(server.base_url, tmp_path / "run", 1, "--sandbox", "exact")
        process = edsb_child([*args, "--perturb", "1", "--code-timeout", "20"], env=child_env(tmp_path / "cache"))
    assert process.returncode == 0, process.stderr
    [record] = read_results(tmp_path / "run")
    assert record["error"].endswith("ValueError: scanned True found 0"), record["error"]


def test_loading_a_perturbed_scene_reads_no_test_case(monkeypatch: pytest.MonkeyPatch) -> None:
    require_data()

    def refuse(self: Benchmark) -> list[Path]:
        raise AssertionError("a test case was read")

    monkeypatch.setattr(Benchmark, "case_files", refuse)
    scene = load_scene(Benchmark.open(DATA, perturb=977), "House")  # a seed no other test caches
    assert scene.objects


FORGED_PLAN_BYTES = 20_000  # more than the child's 16 KiB plan limit, within the parent's plan limits


def test_a_forged_plan_larger_than_the_plan_limit_is_the_models_output_error(tmp_path: Path) -> None:
    """The child refuses a plan over `max_plan_bytes` (16 KiB), which bounds the parent's sampling work; a forged
    answer skips that check and may be as large as the answer limit (1 MiB): 64 characters of 64 relationships each
    cost the parent's sampler minutes of CPU per run where a 16 KiB plan costs seconds."""
    require_data()
    require_kernel_sandbox()
    relationships = [f"close to chair_{i % 6 + 1}" for i in range(60)]
    plan = [
        {"character": f"C{i}", "position": relationships, "target_action": "eat", "orientation": None}
        for i in range(24)
    ]
    assert len(json.dumps(plan)) > FORGED_PLAN_BYTES
    body = FORGE + f"forge({{'status': 'ok', 'output': '', 'plan': {plan!r}}})\nimport time\ntime.sleep(60)"
    with OpenAIServer(ProgramScript([program("big-forged-plan", body)])) as server:
        args = run_args(server.base_url, tmp_path / "run", 1, "--sandbox", "exact", "--code-timeout", "5")
        process = edsb_child(args, env=child_env(tmp_path / "cache"))
    assert process.returncode == 0, process.stderr
    [record] = read_results(tmp_path / "run")
    assert (record["status"], record["error_kind"]) == ("error", "code_output"), record


def test_frames_are_what_the_attacks_assume() -> None:
    """FORGE writes the worker's frame format: a big-endian length, then JSON (so a forged answer is read)."""
    from edsb.sandbox.wire import frame

    message = {"status": "ok"}
    assert frame(message) == struct.pack(">I", len(json.dumps(message))) + json.dumps(message).encode()


def test_a_cpu_loop_killed_at_the_hard_cpu_limit_is_a_timeout() -> None:
    """Threads that ignore SIGXCPU spend CPU faster than the wall clock runs, so the hard CPU limit (SIGKILL) can
    come before the wall-clock limit (with the defaults, 10 s and 15 + 1 CPU seconds, two busy threads do it). The
    run is the model's error either way, but it is a timeout, not `code_memory` ("out of memory?")."""
    require_data()
    require_kernel_sandbox()
    body = (
        "import signal, threading\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\ndef spin():\n    while True:\n"
        "        pass\nfor _ in range(3):\n    threading.Thread(target=spin, daemon=True).start()\nspin()"
    )
    limits = SandboxLimits(sandbox="exact", timeout=20, cpu_seconds=1, memory_bytes=1 << 30, workers=1)
    with SandboxPool(limits) as pool, pytest.raises(CodeError) as raised:
        pool.execute(program("cpu", body), CodeContext.for_benchmark(DATA, "House"))
    assert raised.value.kind == "code_timeout", raised.value.message


def test_code_that_closes_its_answer_channel_and_lingers_is_a_crash() -> None:
    """Code may close every descriptor it holds, the answer channel among them, and keep running. The parent then
    kills it, but that kill is the parent's, not the kernel's out-of-memory killer: the run is the model's
    `code_crash`, with the reason, never `code_memory`."""
    require_data()
    require_kernel_sandbox()
    body = "import os, time\nos.closerange(3, 1024)\ntime.sleep(30)"
    limits = SandboxLimits(sandbox="exact", timeout=20, memory_bytes=1 << 30, workers=1)
    with SandboxPool(limits) as pool:
        with pytest.raises(CodeError) as raised:
            pool.execute(program("hangup", body), CodeContext.for_benchmark(DATA, "House"))
        assert raised.value.kind == "code_crash", raised.value.message
        assert "closed" in raised.value.message
        with pytest.raises(CodeError) as exiting:
            pool.execute(program("exit", "import os\nos._exit(3)"), CodeContext.for_benchmark(DATA, "House"))
        assert exiting.value.kind == "code_crash" and "exit status 3" in exiting.value.message
