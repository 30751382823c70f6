#!/usr/bin/env python3
"""What the Helm chart renders, turned into what podman runs (deploy_image).

  chart_pod.py objects RENDERED.json OUT.json
      The rendered objects a cluster holds for the release: everything but
      the workloads (Deployment, StatefulSet, DaemonSet: podman runs their pod
      here, there is no kubelet) and the PersistentVolumeClaims (no
      provisioner: a podman volume stands for each). Namespaces first.

  chart_pod.py pod RENDERED.json WORKLOAD DIR --objects CLUSTER.json
      [--sa-dir D] [--env K=V]... [--image-user U] [--volume-prefix P]
      The pod template of the rendered Deployment/StatefulSet WORKLOAD, as a
      kubelet would run it, written into DIR:
        vol/NAME/        each configMap/secret volume's files, from the
                         objects of CLUSTER.json (what `kubectl get
                         configmaps,secrets -o json` printed: the rendered
                         ones as applied, and those the user creates), with
                         the volume's defaultMode/items; each emptyDir (not
                         Memory) an empty 0777 directory
        containers.tsv   one line per container in start order: init|main,
                         name, the file of its `podman run` arguments
                         (NUL-separated: security options, mounts, env,
                         entrypoint, image, args)
        probes.tsv       container, liveness|readiness|startup, path, port
                         (named ports resolved), periodSeconds,
                         failureThreshold, initialDelaySeconds, timeoutSeconds
        grace            terminationGracePeriodSeconds (30 if unset)
        serviceaccount   serviceAccountName ("default" if unset)
        volumes          the podman volumes created: each PVC (PREFIX-claim)
        tmpfs            the tmpfs mounted for each Memory emptyDir (at
                         vol/NAME, of its sizeLimit): umount them
      The service account's token directory (--sa-dir: token, ca.crt,
      namespace) is mounted at /var/run/secrets/kubernetes.io/serviceaccount
      in every container unless automountServiceAccountToken is false.

Whatever the pod template holds that is not translated here (hostPath,
envFrom, exec probes, ...) is an error naming it: the test must not run
something other than what the chart renders without saying so.
"""
import base64
import json
import os
import re
import subprocess
import sys

SA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet"}


def die(msg):
    sys.stderr.write("chart_pod: %s\n" % msg)
    sys.exit(1)


def load(path):
    """Objects of a file of `kubectl ... -o json` output: one object after
    another, or Lists."""
    text, dec, objs, i = open(path).read(), json.JSONDecoder(), [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return objs
        o, i = dec.raw_decode(text, i)
        objs += o["items"] if o.get("kind", "").endswith("List") else [o]


def quantity(q):
    """Bytes of a Kubernetes quantity (64Mi, 1G, 1048576)."""
    m = re.fullmatch(r"([0-9.]+)([KMGTPE]i?|k)?", str(q))
    if not m:
        die("cannot read the quantity %r" % q)
    mult = {None: 1, "k": 1000, "K": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4,
            "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4}
    if m.group(2) not in mult:
        die("quantity %r: unit not handled" % q)
    return int(float(m.group(1)) * mult[m.group(2)])


def cmd_objects(rendered, out):
    keep = [o for o in load(rendered)
            if o["kind"] not in WORKLOADS and o["kind"] != "PersistentVolumeClaim"]
    keep.sort(key=lambda o: o["kind"] != "Namespace")
    json.dump({"apiVersion": "v1", "kind": "List", "items": keep}, open(out, "w"))


def write_files(d, data, items, default_mode, what):
    """A configMap/secret volume: every key (or the items) as a file."""
    os.makedirs(d, exist_ok=True)
    pairs = [(k, k, None) for k in sorted(data)] if items is None else \
        [(it["key"], it["path"], it.get("mode")) for it in items]
    for key, path, mode in pairs:
        if key not in data:
            die("%s has no key %s" % (what, key))
        p = os.path.join(d, path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data[key])
        os.chmod(p, mode if mode is not None else default_mode)


class Pod:
    def __init__(self, args):
        self.args = args
        self.dir = args["dir"]
        objs = load(args["rendered"])
        found = [o for o in objs if o["kind"] in WORKLOADS
                 and o["metadata"]["name"] == args["workload"]]
        if len(found) != 1:
            die("no single workload %s in %s" % (args["workload"], args["rendered"]))
        self.workload = found[0]
        self.ns = self.workload["metadata"].get("namespace", "default")
        self.spec = self.workload["spec"]["template"]["spec"]
        self.cluster = {(o["kind"], o["metadata"]["name"]): o for o in load(args["objects"])
                        if o["metadata"].get("namespace") == self.ns}
        self.mounts = {}        # volume name -> ("bind"|"volume", source, forced ro)
        self.created = []
        self.tmpfs = []

    def volume(self, v):
        name, d = v["name"], os.path.join(self.dir, "vol", v["name"])
        if "configMap" in v or "secret" in v:
            kind, src = ("ConfigMap", v["configMap"]) if "configMap" in v else ("Secret", v["secret"])
            ref = src.get("name") if kind == "ConfigMap" else src.get("secretName")
            obj = self.cluster.get((kind, ref))
            if obj is None:
                if src.get("optional"):
                    os.makedirs(d, exist_ok=True)
                    self.mounts[name] = ("bind", d, True)
                    return
                die("volume %s: %s %s/%s is not in the cluster (the pod would not start)"
                    % (name, kind, self.ns, ref))
            if kind == "ConfigMap":
                data = {k: s.encode() for k, s in (obj.get("data") or {}).items()}
                data.update({k: base64.b64decode(s) for k, s in (obj.get("binaryData") or {}).items()})
            else:
                data = {k: base64.b64decode(s) for k, s in (obj.get("data") or {}).items()}
            write_files(d, data, src.get("items"), src.get("defaultMode", 0o644),
                        "%s %s" % (kind, ref))
            # The kubelet mounts configMap and secret volumes read-only.
            self.mounts[name] = ("bind", d, True)
        elif "emptyDir" in v:
            ed = v["emptyDir"] or {}
            if ed.get("medium") == "Memory":
                # A tmpfs for the pod's lifetime (a podman tmpfs volume is
                # unmounted, its files lost, when the init container exits).
                size = quantity(ed.get("sizeLimit", "64Mi"))
                os.makedirs(d, exist_ok=True)
                subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d,mode=0777" % size,
                                "tmpfs", d], check=True)
                self.tmpfs.append(d)
                self.mounts[name] = ("bind", d, False)
            elif ed.get("medium", "") == "":
                os.makedirs(d, exist_ok=True)
                os.chmod(d, 0o777)      # as the kubelet makes an emptyDir
                self.mounts[name] = ("bind", d, False)
            else:
                die("volume %s: emptyDir medium %s not handled" % (name, ed["medium"]))
        elif "persistentVolumeClaim" in v:
            vol = "%s-%s" % (self.args["volume_prefix"], v["persistentVolumeClaim"]["claimName"])
            self.podman_volume(vol, [])
            self.mounts[name] = ("volume", vol, bool(v["persistentVolumeClaim"].get("readOnly")))
        else:
            die("volume %s: %s not handled" % (name, sorted(k for k in v if k != "name")))

    def podman_volume(self, name, opts):
        subprocess.run(["podman", "volume", "create", *opts, name], check=True,
                       stdout=subprocess.DEVNULL)
        self.created.append(name)

    def security(self, c):
        pod_sc, sc = self.spec.get("securityContext") or {}, c.get("securityContext") or {}
        get = lambda k: sc.get(k, pod_sc.get(k))
        out = []
        for k in ("windowsOptions", "seLinuxOptions", "procMount", "appArmorProfile"):
            if get(k):
                die("container %s: securityContext.%s not handled" % (c["name"], k))
        for k in ("supplementalGroups", "sysctls"):
            if pod_sc.get(k):
                die("pod securityContext.%s not handled" % k)
        uid, gid = get("runAsUser"), get("runAsGroup")
        image_user = self.args.get("image_user") or ""
        if uid is not None:
            out += ["--user", "%d:%d" % (uid, gid if gid is not None else 0)]
        elif gid is not None:
            out += ["--user", "%s:%d" % (image_user.split(":")[0] or "0", gid)]
        if get("runAsNonRoot"):
            eff = uid if uid is not None else image_user.split(":")[0]
            # The kubelet refuses a non-numeric or root image user then.
            if not re.fullmatch(r"[0-9]+", str(eff)) or int(eff) == 0:
                die("container %s: runAsNonRoot, but the user would be %r" % (c["name"], eff))
        if pod_sc.get("fsGroup") is not None:
            out += ["--group-add", str(pod_sc["fsGroup"])]
        if get("readOnlyRootFilesystem"):
            # a kubelet adds no tmpfs of its own (podman would on /run, /tmp)
            out += ["--read-only", "--read-only-tmpfs=false"]
        if get("privileged"):
            die("container %s: privileged not handled" % c["name"])
        if get("allowPrivilegeEscalation") is False:
            out += ["--security-opt", "no-new-privileges"]
        caps = get("capabilities") or {}
        out += [x for cap in caps.get("drop", []) for x in ("--cap-drop", cap.lower())]
        out += [x for cap in caps.get("add", []) for x in ("--cap-add", cap.lower())]
        sp = (get("seccompProfile") or {}).get("type", "RuntimeDefault")
        if sp == "Unconfined":
            out += ["--security-opt", "seccomp=unconfined"]
        elif sp != "RuntimeDefault":
            die("container %s: seccompProfile %s not handled" % (c["name"], sp))
        return out

    def container(self, c):
        for k in ("envFrom", "lifecycle", "stdin", "tty", "volumeDevices"):
            if c.get(k):
                die("container %s: %s not handled" % (c["name"], k))
        out = self.security(c)
        for m in c.get("volumeMounts") or []:
            if m["name"] not in self.mounts:
                die("container %s mounts %s, which is no volume" % (c["name"], m["name"]))
            typ, src, forced_ro = self.mounts[m["name"]]
            ro = forced_ro or m.get("readOnly", False)
            if m.get("subPath"):
                if typ != "bind":
                    die("container %s: subPath on a %s volume not handled" % (c["name"], typ))
                src = os.path.join(src, m["subPath"])
            spec = "type=%s,src=%s,dst=%s" % (typ, src, m["mountPath"])
            out += ["--mount", spec + (",ro=true" if ro else "")]
        if self.spec.get("automountServiceAccountToken", True) and self.args.get("sa_dir"):
            out += ["--mount", "type=bind,src=%s,dst=%s,ro=true" % (self.args["sa_dir"], SA_PATH)]
        for e in c.get("env") or []:
            if "value" in e:
                out += ["--env", "%s=%s" % (e["name"], e["value"])]
            elif (e.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
                out += ["--env", "%s=%s" % (e["name"], self.ns)]
            else:
                die("container %s: env %s: valueFrom not handled" % (c["name"], e["name"]))
        for kv in self.args["env"]:
            out += ["--env", kv]
        mem = ((c.get("resources") or {}).get("limits") or {}).get("memory")
        if mem:
            out += ["--memory", str(quantity(mem))]
        if c.get("workingDir"):
            out += ["--workdir", c["workingDir"]]
        if "command" in c:
            out += ["--entrypoint", json.dumps(c["command"])]
        out += [c["image"]] + list(c.get("args") or [])
        return out

    def probes(self, c):
        ports = {p["name"]: p["containerPort"] for p in c.get("ports") or [] if "name" in p}
        rows = []
        for kind in ("startup", "liveness", "readiness"):
            p = c.get(kind + "Probe")
            if not p:
                continue
            if "httpGet" not in p:
                die("container %s: %sProbe is not httpGet" % (c["name"], kind))
            h = p["httpGet"]
            if h.get("scheme", "HTTP") != "HTTP" or h.get("httpHeaders"):
                die("container %s: %sProbe scheme/headers not handled" % (c["name"], kind))
            port = h["port"]
            if isinstance(port, str) and not port.isdigit():
                if port not in ports:
                    die("container %s: probe port %s names no port" % (c["name"], port))
                port = ports[port]
            rows.append([c["name"], kind, h.get("path", "/"), port, p.get("periodSeconds", 10),
                         p.get("failureThreshold", 3), p.get("initialDelaySeconds", 0),
                         p.get("timeoutSeconds", 1)])
        return rows

    def run(self):
        os.makedirs(os.path.join(self.dir, "vol"), exist_ok=True)
        for k in ("hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace", "hostAliases",
                  "dnsConfig", "ephemeralContainers"):
            if self.spec.get(k):
                die("pod spec %s not handled" % k)
        try:
            for v in self.spec.get("volumes") or []:
                self.volume(v)
            lines, probes = [], []
            for role, key in (("init", "initContainers"), ("main", "containers")):
                for c in self.spec.get(key) or []:
                    f = os.path.join(self.dir, "%s-%s.args" % (role, c["name"]))
                    with open(f, "w") as out:
                        out.write("".join(a + "\0" for a in self.container(c)))
                    lines.append("%s\t%s\t%s" % (role, c["name"], f))
                    probes += self.probes(c)
        finally:
            with open(os.path.join(self.dir, "volumes"), "w") as f:
                f.write("".join(v + "\n" for v in self.created))
            with open(os.path.join(self.dir, "tmpfs"), "w") as f:
                f.write("".join(v + "\n" for v in self.tmpfs))
        with open(os.path.join(self.dir, "containers.tsv"), "w") as f:
            f.write("".join(line + "\n" for line in lines))
        with open(os.path.join(self.dir, "probes.tsv"), "w") as f:
            f.write("".join("\t".join(map(str, r)) + "\n" for r in probes))
        with open(os.path.join(self.dir, "grace"), "w") as f:
            f.write("%d\n" % self.spec.get("terminationGracePeriodSeconds", 30))
        with open(os.path.join(self.dir, "serviceaccount"), "w") as f:
            f.write("%s\n" % self.spec.get("serviceAccountName", "default"))


def main(argv):
    if len(argv) == 3 and argv[0] == "objects":
        return cmd_objects(argv[1], argv[2])
    if len(argv) < 4 or argv[0] != "pod":
        die(__doc__)
    args = {"rendered": argv[1], "workload": argv[2], "dir": argv[3], "env": [],
            "objects": None, "volume_prefix": "ds-chart"}
    rest = argv[4:]
    while rest:
        opt, val, rest = rest[0], rest[1] if len(rest) > 1 else die("%s needs a value" % rest[0]), rest[2:]
        if opt == "--env":
            args["env"].append(val)
        elif opt in ("--objects", "--sa-dir", "--image-user", "--volume-prefix"):
            args[opt[2:].replace("-", "_")] = val
        else:
            die("unknown option %s" % opt)
    if not args["objects"]:
        die("--objects is required")
    Pod(args).run()


if __name__ == "__main__":
    main(sys.argv[1:])
