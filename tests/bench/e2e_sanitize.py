#!/usr/bin/env python3
"""scripts/bench.sh e2e, the kubectl phase: what a user moving objects by hand
between clusters puts between `kubectl get -o json` and `kubectl apply
--server-side`: the least that makes the objects apply on another cluster.

Reads one List (kubectl get -o json) on stdin and writes a List on stdout
with, for each item: status, metadata uid, resourceVersion,
creationTimestamp, generation, managedFields, selfLink and ownerReferences
dropped; a Service's allocated clusterIP/clusterIPs dropped (unless None);
the namespace renamed by --map SRC=DST,... . --stats FILE receives
"objects=N json_bytes=B": how many items came in and the sum of their
compact JSON sizes as the API server served them (before any change).
"""
import argparse
import json
import sys

DROP_META = ("uid", "resourceVersion", "creationTimestamp", "generation",
             "managedFields", "selfLink", "ownerReferences")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--map", default="")
    ap.add_argument("--stats", required=True)
    a = ap.parse_args()
    nsmap = dict(p.split("=", 1) for p in a.map.split(",") if p)
    doc = json.load(sys.stdin)
    items = doc.get("items", [])
    json_bytes = 0
    out = []
    for o in items:
        json_bytes += len(json.dumps(o, separators=(",", ":"), ensure_ascii=False).encode())
        o.pop("status", None)
        meta = o.setdefault("metadata", {})
        for k in DROP_META:
            meta.pop(k, None)
        ns = meta.get("namespace")
        if ns in nsmap:
            meta["namespace"] = nsmap[ns]
        if o.get("kind") == "Service":
            spec = o.get("spec", {})
            if spec.get("clusterIP") != "None":
                spec.pop("clusterIP", None)
                spec.pop("clusterIPs", None)
        out.append(o)
    with open(a.stats, "w") as f:
        f.write("objects=%d json_bytes=%d\n" % (len(items), json_bytes))
    json.dump({"apiVersion": "v1", "kind": "List", "items": out}, sys.stdout)


if __name__ == "__main__":
    main()
