#!/usr/bin/env python3
"""The chart check CI runs (`cargo xtask chart`, part of `cargo xtask test`), with real Helm.

Run by scripts/chart-check.sh under the validators venv (PyYAML, openapi-schema-validator,
kubernetes-validate, cfn-lint, hadolint). Every check prints one line; the run fails if any fails. The
negative checks alter temporary copies of the chart and expect the matching check to fail, so
the check shows it would catch an extra RBAC verb, a lost security context or an unsupported value.

The time is bounded: every command gets what is left of --budget-seconds.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import yaml
from openapi_schema_validator import OAS30Validator

RELEASE, NAMESPACE = "karpenter", "kube-system"
ND_RELEASE, ND_NAMESPACE = "platform", "karpenter"
# Kubernetes versions the built-in kinds are validated for: the oldest EKS standard support and
# the one the API types are generated against (k8s-openapi v1_33).
KUBE_VERSIONS = ("1.29.0", "1.33.0")
CONTROLLER_UID = 65532


class Check:
    """Runs commands within a time budget and records failures."""

    def __init__(self, root, helm, out, budget_seconds):
        self.root, self.helm, self.out = root, helm, out
        self.deadline = time.monotonic() + budget_seconds
        self.failures = []
        self.notes = []

    def note(self, text):
        """A line shown under the current step's result (what a negative check caught)."""
        self.notes.append(text)

    def run(self, args, env=None, cwd=None):
        """(exit code, stdout + stderr) of one command, within what is left of the budget."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"chart check budget spent before: {' '.join(map(str, args))}")
        done = subprocess.run(
            [str(a) for a in args], cwd=cwd or self.root, env={**os.environ, **(env or {})},
            capture_output=True, text=True, timeout=left,
        )
        return done.returncode, done.stdout + done.stderr

    def report(self, name, problems, started):
        took = time.monotonic() - started
        if problems:
            self.failures.append(name)
            print(f"chart: {name}: FAILED ({took:.1f} s)")
            for line in problems:
                print(f"    {line}")
        else:
            print(f"chart: {name}: ok ({took:.1f} s)")
        for line in self.notes:
            print(f"    {line}")
        self.notes = []

    def step(self, name, fn, *args):
        started = time.monotonic()
        try:
            problems = fn(self, *args)
        except TimeoutError:
            raise
        except (OSError, ValueError, LookupError, TypeError, AttributeError, yaml.YAMLError) as err:
            problems = [f"{type(err).__name__}: {err}"]
        self.report(name, problems, started)

    def render(self, chart, values_args, release=RELEASE, namespace=NAMESPACE):
        """(exit code, output) of `helm template` with CRDs."""
        return self.run([self.helm, "template", release, chart, "--namespace", namespace,
                         "--include-crds", *values_args])


def docs(text):
    return [d for d in yaml.safe_load_all(text) if d]


def of_kind(documents, kind):
    return [d for d in documents if d.get("kind") == kind]


def tail(text, lines=6):
    return [line for line in text.strip().splitlines()[-lines:]]


# ---- checks on a rendering ----

def controller_container(documents):
    """The Deployment's pod spec and the container that runs `karpenter controller`."""
    deployments = of_kind(documents, "Deployment")
    if len(deployments) != 1:
        raise ValueError(f"expected one Deployment, found {len(deployments)}")
    pod = deployments[0]["spec"]["template"]["spec"]
    containers = [c for c in pod["containers"] if c.get("args") == ["controller"]]
    if len(containers) != 1:
        raise ValueError('expected one container with args ["controller"], '
                         f"found {len(containers)}")
    return pod, containers[0]


def security_problems(documents):
    """The controller runs as non-root 65532, with a read-only root file system, no privilege
    escalation, no capabilities and the RuntimeDefault seccomp profile."""
    pod, container = controller_container(documents)
    sc = container.get("securityContext") or {}
    expected = {"runAsNonRoot": True, "runAsUser": CONTROLLER_UID, "runAsGroup": CONTROLLER_UID,
                "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                "privileged": False}
    problems = [f"container securityContext.{k} is {sc.get(k)!r}, want {v!r}"
                for k, v in expected.items() if sc.get(k) != v]
    capabilities = sc.get("capabilities") or {}
    if "ALL" not in (capabilities.get("drop") or []) or capabilities.get("add"):
        problems.append(f"capabilities are {capabilities!r}, want drop [ALL] and no add")
    seccomp = (sc.get("seccompProfile") or (pod.get("securityContext") or {}).get("seccompProfile")
               or {}).get("type")
    if seccomp != "RuntimeDefault":
        problems.append(f"seccomp profile is {seccomp!r}, want RuntimeDefault")
    if pod.get("hostNetwork") or pod.get("hostPID") or pod.get("hostIPC"):
        problems.append("the pod shares a host namespace")
    return problems


def env_of(documents, namespace):
    """The controller's environment as name -> value (fieldRefs resolved as the kubelet would)."""
    _, container = controller_container(documents)
    env = {}
    for var in container.get("env") or []:
        if "value" in var:
            env[var["name"]] = var["value"]
        elif var.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
            env[var["name"]] = namespace
        else:
            env[var["name"]] = None
    return env


def documented_env(root):
    """Names in the table under '### Environment the chart sets' in docs/install.md."""
    text = (root / "docs/install.md").read_text()
    section = text.split("### Environment the chart sets", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"^\| `([A-Z0-9_]+)` \|", section, re.MULTILINE))


def strict(schema):
    """A CRD schema as the API server applies it with fieldValidation=Strict: unknown fields are
    errors unless x-kubernetes-preserve-unknown-fields. CEL rules are not evaluated."""
    if not isinstance(schema, dict):
        return schema
    schema = dict(schema)
    if schema.pop("x-kubernetes-int-or-string", False):
        schema.pop("type", None)
        schema["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    preserve = schema.pop("x-kubernetes-preserve-unknown-fields", False)
    for key in [k for k in schema if k.startswith("x-kubernetes-")]:
        schema.pop(key)
    if "properties" in schema:
        schema["properties"] = {k: strict(v) for k, v in schema["properties"].items()}
        if not preserve:
            schema.setdefault("additionalProperties", False)
    for key in ("items", "additionalProperties", "not"):
        if isinstance(schema.get(key), dict):
            schema[key] = strict(schema[key])
    for key in ("allOf", "anyOf", "oneOf"):
        if key in schema:
            schema[key] = [strict(s) for s in schema[key]]
    return schema


def custom_resource_problems(crds, objects):
    """Errors of Karpenter objects against the openAPIV3Schema of the rendered CRDs."""
    schemas = {}
    for crd in crds:
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            schema = strict(version["schema"]["openAPIV3Schema"])
            schema.setdefault("properties", {})["metadata"] = {"type": "object"}
            schemas[(f"{group}/{version['name']}", kind)] = schema
    problems, checked = [], 0
    for obj in objects:
        schema = schemas.get((obj.get("apiVersion"), obj.get("kind")))
        if schema is None:
            continue
        checked += 1
        for err in sorted(OAS30Validator(schema).iter_errors(obj), key=lambda e: list(e.path)):
            path = ".".join(map(str, err.path))
            problems.append(f"{obj['kind']}/{obj['metadata'].get('name')}: {path}: {err.message}")
    if checked == 0:
        problems.append("no Karpenter object was checked")
    return problems


# ---- steps ----

def versions(check, chart):
    """Chart.yaml's version and appVersion are the workspace's (the image tag defaults to it)."""
    cargo = tomllib.loads((check.root / "Cargo.toml").read_text())
    want = cargo["workspace"]["package"]["version"]
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    return [f"Chart.yaml {key} is {meta.get(key)!r}, the workspace is {want!r}"
            for key in ("version", "appVersion") if str(meta.get(key)) != want]


def lint(check, chart, values_args):
    code, output = check.run([check.helm, "lint", "--strict", chart, *values_args])
    return [] if code == 0 else tail(output)


def render_to(check, name, chart, values_args, release=RELEASE, namespace=NAMESPACE):
    code, output = check.render(chart, values_args, release, namespace)
    if code != 0:
        return tail(output)
    (check.out / name).write_text(output)
    return []


def cluster_name_required(check, chart):
    code, output = check.render(chart, [])
    if code == 0:
        return ["rendered without settings.clusterName"]
    if "settings.clusterName" not in output:
        return ["failed without naming settings.clusterName:", *tail(output, 2)]
    check.note(f"helm says: {output.strip().splitlines()[0]}")
    return []


def kubernetes_validate(check, rendering):
    problems = []
    for version in KUBE_VERSIONS:
        code, output = check.run([Path(sys.executable).parent / "kubernetes-validate", "--strict",
                                  "--quiet", "-k", version, check.out / rendering])
        if code != 0:
            problems += [f"Kubernetes {version}:", *tail(output, 10)]
    return problems


def karpenter_objects(check, rendering):
    crds = of_kind(docs((check.out / rendering).read_text()), "CustomResourceDefinition")
    examples = docs((check.root / "examples/seed-000-default.yaml").read_text())
    problems = custom_resource_problems(crds, examples)
    # The same check on a NodePool upstream rejects (weight over 100): it must object.
    bad = [dict(d, spec=dict(d["spec"], weight=500)) for d in examples if d["kind"] == "NodePool"]
    if not custom_resource_problems(crds, bad):
        problems.append("a NodePool with weight 500 passed the CRD schema")
    return problems


def service_monitor(check):
    kinds = {name: {d["kind"] for d in docs((check.out / name).read_text())}
             for name in ("default.yaml", "non-default.yaml")}
    problems = []
    if "ServiceMonitor" in kinds["default.yaml"]:
        problems.append("the default rendering has a ServiceMonitor")
    if "ServiceMonitor" not in kinds["non-default.yaml"]:
        problems.append("serviceMonitor.enabled with monitoring.coreos.com/v1 rendered none")
    return problems


def notes(check):
    """NOTES.txt renders (Helm shows it only after an install, so `helm template` never runs it):
    rendered here through a ConfigMap in a copy of the chart."""
    wrapper = ('apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: |\n'
               '{{ tpl (.Files.Get "notes.txt") . | indent 4 }}\n')
    chart = altered_chart(check, "notes", "templates/notes-check.yaml", lambda _: wrapper)
    shutil.copy(chart / "templates/NOTES.txt", chart / "notes.txt")
    code, output = check.run([check.helm, "template", RELEASE, chart, "--namespace", NAMESPACE,
                              "--set", "settings.clusterName=ci",
                              "--show-only", "templates/notes-check.yaml"])
    if code != 0:
        return tail(output)
    text = yaml.safe_load(output)["data"]["notes"]
    return [] if 'for cluster "ci"' in text else ["NOTES.txt does not name the cluster"]


def secure(check, rendering):
    return security_problems(docs((check.out / rendering).read_text()))


def environment(check):
    """The Deployment runs `controller` with the documented settings; writes the environment as
    KEY=VALUE files for running the binary locally against the same settings."""
    default = env_of(docs((check.out / "default.yaml").read_text()), NAMESPACE)
    values = yaml.safe_load((check.root / "charts/karpenter/ci/non-default-values.yaml").read_text())
    user = {e["name"] for e in values["controller"]["env"]}
    other = env_of(docs((check.out / "non-default.yaml").read_text()), ND_NAMESPACE)
    for name, env in (("default.env", default), ("non-default.env", other)):
        lines = [f"{k}={v}" for k, v in env.items() if v is not None]
        (check.out / name).write_text("# karpenter controller\n" + "\n".join(lines) + "\n")
    rendered = (set(default) | set(other)) - user
    documented = documented_env(check.root)
    problems = [f"set by the chart but not in docs/install.md: {n}"
                for n in sorted(rendered - documented)]
    problems += [f"in docs/install.md but not set by the chart: {n}"
                 for n in sorted(documented - rendered)]
    if default.get("CLUSTER_NAME") != "ci":
        problems.append(f"CLUSTER_NAME is {default.get('CLUSTER_NAME')!r}, want the value given")
    return problems


def rbac_exact(check, rendering):
    code, output = check.run(
        # --workspace, not --package: the same feature set as `cargo test --workspace`, so a clean
        # clone builds the dependencies once for both.
        ["cargo", "test", "--quiet", "--workspace", "--test", "chart_rbac", "--",
         "--ignored", "--exact", "the_rendered_chart_grants_exactly_the_table"],
        env={"KARPENTER_RENDERED_CHART": str(check.out / rendering), "RUST_BACKTRACE": "0"})
    if code == 0:
        return []
    found = ("granted but", "in the table", "expected one", "error")
    return [line for line in output.splitlines() if line.startswith(found)] or tail(output)


def cfn_lint(check):
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    code, output = check.run([cfn_lint, "deploy/cloudformation.yaml"])
    return [] if code == 0 else tail(output, 12)


def dockerfile(check):
    """hadolint passes, and the image is the binary alone on distroless/static as UID 65532."""
    hadolint = Path(sys.executable).parent / "hadolint"
    code, output = check.run([hadolint, "--no-color", "Dockerfile"])
    problems = [] if code == 0 else tail(output, 12)
    text = (check.root / "Dockerfile").read_text()
    final = text.rsplit("\nFROM ", 1)[1]
    expected = ("gcr.io/distroless/static", "\nUSER 65532:65532\n", 'ENTRYPOINT ["/karpenter"]')
    problems += [f"the final stage lacks {e.strip()!r}" for e in expected if e not in final]
    copies = re.findall(r"^COPY .*$", final, re.MULTILINE)
    if copies != ["COPY --from=build /karpenter /karpenter"]:
        problems.append(f"the final stage copies more than the binary: {copies}")
    return problems


# ---- negative checks: each alters a copy of the chart and expects a failure ----

def altered_chart(check, name, path, change):
    copy = check.out / "negative" / name / "karpenter"
    shutil.rmtree(copy.parent, ignore_errors=True)
    shutil.copytree(check.root / "charts/karpenter", copy)
    target = copy / path
    before = target.read_text() if target.exists() else ""
    after = change(before)
    if after == before:
        raise ValueError(f"{name}: the alteration of {path} matched nothing")
    target.write_text(after)
    return copy


def expect_failure(check, label, problems):
    """A negative check passes when the check it exercises reports a problem."""
    if not problems:
        return [f"{label}: not caught"]
    check.note(f"{label}: caught: {problems[0]}")
    return []


def schema_errors(output):
    """The lines of a Helm schema failure that name the offending value."""
    return [line.strip() for line in output.splitlines() if "at '" in line] or tail(output, 1)


def negative_extra_verb(check):
    rule = 'resources: ["volumeattachments"]\n    verbs: '
    chart = altered_chart(check, "extra-verb", "templates/clusterrole-core.yaml",
                          lambda t: t.replace(rule + '["list"]', rule + '["list", "watch"]'))
    problems = render_to(check, "negative/extra-verb.yaml", chart,
                         ["--set", "settings.clusterName=ci"])
    return problems or expect_failure(check, "extra verb",
                                      rbac_exact(check, "negative/extra-verb.yaml"))


def negative_no_security_context(check):
    def drop(text):
        block = r"\n          securityContext:\n(            .*\n)+?                - ALL\n"
        return re.sub(block, "\n", text)
    chart = altered_chart(check, "no-security-context", "templates/deployment.yaml", drop)
    problems = render_to(check, "negative/no-security-context.yaml", chart,
                         ["--set", "settings.clusterName=ci"])
    return problems or expect_failure(check, "dropped security context",
                                      secure(check, "negative/no-security-context.yaml"))


def negative_unsupported_value(check):
    chart = altered_chart(check, "unsupported-value", "values.yaml",
                          lambda t: t + "webhook:\n  enabled: false\n")
    code, output = check.run([check.helm, "lint", "--strict", chart,
                              "--set", "settings.clusterName=ci"])
    problems = expect_failure(check, "webhook.enabled in values.yaml (helm lint)",
                              [] if code == 0 else schema_errors(output))
    code, output = check.run([check.helm, "template", "x", check.root / "charts/karpenter",
                              "--set", "settings.clusterName=ci",
                              "--set", "settings.featureGates.nodeRepair=true"])
    problems += expect_failure(check, "a missing feature's gate set true (helm template)",
                               [] if code == 0 else schema_errors(output))
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--helm", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-seconds", type=float, default=300)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "negative").mkdir(exist_ok=True)
    check = Check(args.root.resolve(), args.helm.resolve(), args.out.resolve(), args.budget_seconds)
    chart = check.root / "charts/karpenter"
    non_default = ["-f", chart / "ci/non-default-values.yaml"]
    # The ServiceMonitor renders only where its API exists.
    with_monitoring = [*non_default, "--api-versions", "monitoring.coreos.com/v1"]
    started = time.monotonic()
    try:
        check.step("Chart.yaml versions are the workspace's", versions, chart)
        check.step("helm lint --strict (default values)", lint, chart,
                   ["--set", "settings.clusterName=ci"])
        check.step("helm lint --strict (non-default values)", lint, chart, non_default)
        check.step("helm template (default values)", render_to, "default.yaml", chart,
                   ["--set", "settings.clusterName=ci"])
        check.step("helm template (non-default values)", render_to, "non-default.yaml", chart,
                   with_monitoring, ND_RELEASE, ND_NAMESPACE)
        check.step("settings.clusterName is required", cluster_name_required, chart)
        for rendering in ("default.yaml", "non-default.yaml"):
            check.step(f"kubernetes-validate --strict ({rendering})", kubernetes_validate,
                       rendering)
            check.step(f"security context ({rendering})", secure, rendering)
            check.step(f"RBAC is exactly controller/core/src/rbac.rs ({rendering})", rbac_exact,
                       rendering)
        check.step("ServiceMonitor only where enabled and its API exists", service_monitor)
        check.step("NOTES.txt renders", notes)
        check.step("Karpenter objects against the chart's CRDs", karpenter_objects, "default.yaml")
        check.step("controller args and environment", environment)
        check.step("cfn-lint deploy/cloudformation.yaml", cfn_lint)
        check.step("hadolint Dockerfile; the image holds the binary alone", dockerfile)
        check.step("negative: an extra RBAC verb fails", negative_extra_verb)
        check.step("negative: a dropped security context fails", negative_no_security_context)
        check.step("negative: an unsupported value fails", negative_unsupported_value)
    except (TimeoutError, subprocess.TimeoutExpired) as err:
        check.failures.append(f"time budget ({err})")
    print(f"chart: {len(check.failures)} failed, in {time.monotonic() - started:.1f} s"
          f" (renderings in {check.out})")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
