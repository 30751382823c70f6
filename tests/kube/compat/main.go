// Command kube-compat runs the Kubernetes 1.33 kube-scheduler or
// kube-controller-manager, each as its own process:
//
//	kube-compat kube-scheduler FLAGS...
//	kube-compat kube-controller-manager FLAGS...
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	cmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	schedulerapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	var cmd *cobra.Command
	if len(os.Args) >= 2 {
		switch os.Args[1] {
		case "kube-scheduler":
			cmd = schedulerapp.NewSchedulerCommand()
		case "kube-controller-manager":
			cmd = cmapp.NewControllerManagerCommand()
		}
	}
	if cmd == nil {
		fmt.Fprintln(os.Stderr, "usage: kube-compat kube-scheduler|kube-controller-manager FLAGS...")
		os.Exit(2)
	}
	os.Args = os.Args[1:]
	cmd.SetArgs(os.Args[1:])
	os.Exit(cli.Run(cmd))
}
