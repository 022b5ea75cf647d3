"""Drives the console through every flow in order against the cluster
tests/platform/console.rs started, in one browser; exits 1 at the first
failure (with a screenshot of it) or if any page asked another host for
anything. Prints a JSON report on its last line.

    SWITCHYARD_CONSOLE_URL=... SWITCHYARD_ADMIN_TOKEN=... python run.py
"""

import importlib
import json
import sys
import traceback

sys.path.insert(0, __import__("os").path.dirname(__file__))

from harness import Console  # noqa: E402

# (module, function): later flows build on earlier ones (a node approved, a
# model imported, then a deployment of it, then a prompt to it).
FLOWS = [
    ("flows_access", "sign_in"),
    ("flows_nodes", "approve_pending_node"),
    ("flows_models", "import_by_url"),
    ("flows_deployments", "create_until_ready"),
    ("flows_plugins", "upload"),
    ("flows_admission", "chain_and_dry_run"),
    ("flows_try", "stream_and_cancel"),
    ("flows_carrier", "dry_run_switch"),
    ("flows_federation", "pages"),
    ("flows_keys", "create_and_revoke"),
    ("flows_keys", "audit_trail"),
    ("flows_usage", "report_and_export"),
    ("flows_access", "narrow_screen"),
    ("flows_access", "sign_out"),
    ("flows_access", "inference_key_sees_no_admin_pages"),
]


def main():
    only = set(sys.argv[1:])
    console = Console()
    passed = []
    report = {"passed": passed}
    code = 0
    try:
        for module, function in FLOWS:
            name = f"{module}.{function}"
            if only and module not in only and name not in only:
                continue
            getattr(importlib.import_module(module), function)(console)
            passed.append(name)
        foreign = console.foreign_requests()
        report["foreign_requests"] = foreign
        report["requests_seen"] = len(console.requested)
        if foreign:
            code = 1
            report["failed"] = "no request leaves the host"
    except Exception as error:  # noqa: BLE001 - reported, then exit 1
        code = 1
        report["failed"] = name
        report["error"] = f"{type(error).__name__}: {error}"
        traceback.print_exc()
        try:
            console.shot("failed-" + name.replace(".", "-"))
        except Exception:  # noqa: BLE001
            pass
    finally:
        console.quit()
    print(json.dumps(report))
    sys.exit(code)


if __name__ == "__main__":
    main()
