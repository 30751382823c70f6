// Command kube is a multicall binary: the Kubernetes control-plane
// components the drasync tests run, each started as its own process.
//
//	kube etcd --data-dir D --listen-client URL --listen-peer URL [TLS flags]
//	kube kube-apiserver FLAGS...
//	kube kube-scheduler FLAGS...
//	kube kube-controller-manager FLAGS...
//	kube kubectl ARGS...          (or invoked through a symlink named kubectl)
//	kube nodeagent FLAGS...       (fake nodes, devices and a pod "kubelet")
//	kube version
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

type component struct {
	summary string
	run     func(args []string) int
}

var components = map[string]component{
	"etcd":                    {"embedded etcd server", runEtcd},
	"kube-apiserver":          {"Kubernetes API server", runAPIServer},
	"kube-scheduler":          {"Kubernetes scheduler", runScheduler},
	"kube-controller-manager": {"Kubernetes controller manager", runControllerManager},
	"kubectl":                 {"Kubernetes command-line client", runKubectl},
	"nodeagent":               {"fake nodes, ResourceSlices and pod status", runNodeAgent},
	"version":                 {"print component versions", runVersion},
}

func usage() {
	names := make([]string, 0, len(components))
	for n := range components {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: %s COMPONENT [ARGS...]\n\ncomponents:\n", filepath.Base(os.Args[0]))
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-24s %s\n", n, components[n].summary)
	}
}

func main() {
	// A symlink named after a component runs that component.
	if c, ok := components[filepath.Base(os.Args[0])]; ok {
		os.Exit(c.run(os.Args[1:]))
	}
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	c, ok := components[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "%s: unknown component %q\n", filepath.Base(os.Args[0]), os.Args[1])
		usage()
		os.Exit(2)
	}
	// Cobra commands read os.Args; drop the component word.
	os.Args = append([]string{os.Args[1]}, os.Args[2:]...)
	os.Exit(c.run(os.Args[1:]))
}
